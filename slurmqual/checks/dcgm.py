"""dcgm: NVIDIA DCGM diagnostics (`dcgmi diag -r N -j`), the slow level.

Minutes long, so it never runs in a hook by default: `slurmqual requalify`
and `slurmqual check --level slow` run it. The command runs under a hard
timeout of its own, so an unresponsive host engine cannot hang the caller;
it is skipped with a clear message where DCGM is not installed or a GPU is
in MIG mode (the diagnostic refuses MIG GPUs)."""

from __future__ import annotations

import json

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "dcgm"


def settings():
    from pydantic import Field

    from ._settings import Strict

    class DcgmCfg(Strict):
        run_level: int = Field(2, ge=1, le=4)          # dcgmi diag -r: 1 quick, 2 medium, 3 long, 4 extended
        timeout_s: float = Field(900.0, gt=0, le=6 * 3600)
        # A missing dcgmi is a skip; true makes it an error (sites that install DCGM everywhere).
        required: bool = False

    return DcgmCfg


SPEC = CheckSpec(
    NAME, "slow", rank=200, settings=settings,
    summary="DCGM diagnostics (dcgmi diag -r N) pass on every GPU",
    hint="rerun `dcgmi diag -r 3` on the GPU named; a failing memory/PCIe/NVLink test: reset, reseat, RMA "
         "with the DCGM log",
    explain="""Runs `dcgmi diag -r <checks.dcgm.run_level> -j` (1 quick, 2 medium: a few minutes,
3 long, 4 extended) with a hard timeout of checks.dcgm.timeout_s, parses the JSON
(DCGM 3.x 'DCGM GPU Diagnostic' > test_categories > tests > results, and the 4.x
layout with tests at the top) and fails on any test whose result is FAIL, naming
the test, the GPU ids and DCGM's warning text; WARN results warn.
Slow level: never in the prolog, epilog or health check unless a site lists it;
`slurmqual requalify` and `slurmqual check --level slow` run it.
Skipped (not failed) where dcgmi is not installed (checks.dcgm.required = true
makes that an error) or a GPU is in MIG mode; a host engine that does not answer
is an error, never a drain.
Fix: rerun at -r 3 to confirm; follow DCGM's message: reset or reseat the GPU,
RMA with the DCGM log (/var/log/nvidia-dcgm/).""",
)


def _status(raw) -> str:
    s = str(raw or "").strip().lower()
    return {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "warn": "warn", "warning": "warn",
            "skip": "skip", "skipped": "skip"}.get(s, "other")


def _warnings(result: dict) -> list[str]:
    out = []
    for w in result.get("warnings") or []:
        if isinstance(w, dict):
            w = w.get("warning") or w.get("message") or ""
        if w:
            out.append(" ".join(str(w).split()))
    return out


def parse(text: str) -> list[tuple[str, str, str, list[str]]]:
    """(test, gpu ids, status, warnings) per result. dcgmi may print a line
    before the JSON; the document starts at the first '{'."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON document in the dcgmi output")
    data = json.loads(text[start:])
    root = data.get("DCGM GPU Diagnostic", data) if isinstance(data, dict) else {}
    tests = []
    for cat in root.get("test_categories") or []:
        if isinstance(cat, dict):
            tests += [t for t in cat.get("tests") or [] if isinstance(t, dict)]
    tests += [t for t in root.get("tests") or [] if isinstance(t, dict)]
    out = []
    for test in tests:
        for res in test.get("results") or []:
            if not isinstance(res, dict):
                continue
            ids = res.get("gpu_ids", res.get("entity_id", ""))
            out.append((str(test.get("name", "?")), str(ids), _status(res.get("status")), _warnings(res)))
    if not out:
        raise ValueError("the DCGM document has no test results")
    return out


def judge(results, run_level: int) -> CheckResult:
    failed, warned, devices = [], [], []
    for test, ids, status, warnings in results:
        line = f"{test} on GPU {ids}" + (f": {'; '.join(warnings)[:300]}" if warnings else "")
        if status == "fail":
            failed.append(line)
            devices.append(f"GPU {ids}")
        elif status == "warn":
            warned.append(line)
    if failed:
        return CheckResult(NAME, Status.FAIL, f"dcgmi diag -r {run_level}: " + "; ".join(failed + warned), devices)
    if warned:
        return CheckResult(NAME, Status.WARN, f"dcgmi diag -r {run_level}: " + "; ".join(warned))
    tests = len({r[0] for r in results})
    return CheckResult(NAME, Status.PASS, f"dcgmi diag -r {run_level}: {tests} tests passed")


def run(ctx) -> CheckResult:
    from ..command import CommandError

    cfg = ctx.settings(NAME)
    if not ctx.gpus():
        return CheckResult(NAME, Status.NA, "no NVIDIA GPUs on this node")
    try:
        mig = [g.index for g in ctx.nvidia_smi().gpus if g.mig == "Enabled"]
    except Exception:  # noqa: BLE001 - MIG unknown: let dcgmi decide
        mig = []
    if mig:
        return CheckResult(NAME, Status.SKIP, f"skipped: GPU {', '.join(map(str, mig))} in MIG mode "
                           "(DCGM diagnostics need whole GPUs)")
    argv = ["dcgmi", "diag", "-r", str(cfg["run_level"]), "-j"]
    try:
        out = ctx.run_command(argv, timeout=cfg["timeout_s"], check=False)
    except CommandError as exc:
        if "command not found" in str(exc) and not cfg["required"]:
            return CheckResult(NAME, Status.SKIP, "skipped: dcgmi not installed (DCGM absent)")
        return CheckResult(NAME, Status.ERROR, f"dcgmi diag did not finish: {exc}")
    try:
        results = parse(out.stdout)
    except ValueError as exc:
        said = (out.stdout.strip() or out.stderr.strip()).splitlines()[:1] or [""]
        return CheckResult(NAME, Status.ERROR, f"dcgmi diag -r {cfg['run_level']} (exit {out.returncode}): {exc}; "
                           f"it said {said[0][:160]!r}")
    return judge(results, cfg["run_level"])
