"""Shared by the GPU checks that read `nvidia-smi -q -x`: get the report or
the result that says why there is none (no GPUs: n/a; tool missing, hung or
printing garbage: error, which never drains)."""

from __future__ import annotations

from ..result import CheckResult, Status


def report(ctx, name: str):
    """(SmiReport, None) or (None, CheckResult)."""
    from ..command import CommandError
    from ..probe.nvsmi import SmiError

    if not ctx.gpus():
        return None, CheckResult(name, Status.NA, "no NVIDIA GPUs on this node")
    try:
        rep = ctx.nvidia_smi()
    except (CommandError, SmiError) as exc:
        return None, CheckResult(name, Status.ERROR, f"cannot read GPU state: {exc}")
    if not rep.gpus:
        return None, CheckResult(name, Status.ERROR, f"nvidia-smi lists no GPUs, {len(ctx.gpus())} on PCI "
                                 "(driver not loaded? see gpu_count)")
    return rep, None


def fail_or_warn(name: str, failed: list[str], warned: list[str], devices: list[str], hints: list[str],
                 ok: str) -> CheckResult:
    """One result from per-GPU findings; the hint names the actual GPUs."""
    hint = "; ".join(dict.fromkeys(hints))
    if failed:
        return CheckResult(name, Status.FAIL, "; ".join(failed + warned), devices, hint)
    if warned:
        return CheckResult(name, Status.WARN, "; ".join(warned), devices, hint)
    return CheckResult(name, Status.PASS, ok)
