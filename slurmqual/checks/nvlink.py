"""nvlink: every NVLink of every GPU is up, at the expected count and speed
(`nvidia-smi nvlink -s`). A GPU with a dead link falls back to slower paths
or, on NVSwitch systems, breaks the all-to-all fabric NCCL relies on."""

from __future__ import annotations

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "nvlink"

# Links per GPU of the SXM parts (NVIDIA data sheets); others: the most any GPU shows.
LINKS_BY_PRODUCT = {"H100": 18, "H200": 18, "H800": 8, "A100": 12, "A800": 8, "V100": 6, "B200": 18}


def settings():
    from pydantic import Field

    from ..config_schema import Strict

    class NvlinkCfg(Strict):
        # Active links every GPU must have; None: by product (H100/H200 18, A100 12)
        # or else the most any GPU on the node has.
        links_per_gpu: int | None = Field(None, ge=0, le=64)

    return NvlinkCfg


SPEC = CheckSpec(
    NAME, "standard", rank=125, settings=settings,
    summary="every GPU has all its NVLinks active at full speed",
    hint="reset the GPU (nvidia-smi -r -i <index>) or reboot; links still down: reseat the GPU/baseboard, RMA",
    explain="""Runs `nvidia-smi nvlink -s` and requires checks.nvlink.links_per_gpu active links on
every GPU (default by product: H100/H200 SXM 18, A100 SXM 12; else the most any GPU
on the node has), all at the speed of the fastest link. A GPU whose links are all
down prints 'Unable to retrieve NVLink information as all links are inactive'.
PCIe GPUs without NVLink: n/a.
A dead link makes NCCL route around it (slower) or fail on NVSwitch systems.
Fix: reset the GPU or reboot; if links stay down, reseat the GPU or baseboard, RMA.""",
)


def expected_links(gpus, configured: int | None) -> int:
    if configured is not None:
        return configured
    for g in gpus:
        for part, n in LINKS_BY_PRODUCT.items():
            if part in g.name and "PCIe" not in g.name:
                return n
    return max((len(g.links) for g in gpus), default=0)


def judge(gpus, configured: int | None) -> CheckResult:
    want = expected_links(gpus, configured)
    if not want:
        return CheckResult(NAME, Status.NA, f"{len(gpus)} GPUs without NVLink")
    speeds = [s for g in gpus for s in g.links.values() if s]
    top = max(speeds, default=0.0)
    bad, devices, hints = [], [], []
    for g in gpus:
        active = {n: s for n, s in g.links.items() if s}
        issues = []
        if g.all_inactive:
            issues.append(f"all links inactive (expected {want})")
        elif len(active) < want:
            down = sorted(n for n in g.links if n not in active)
            issues.append(f"{len(active)} of {want} links active" + (f" (down: {', '.join(map(str, down))})"
                                                                      if down else ""))
        slow = sorted(n for n, s in active.items() if s < top * 0.99)
        if slow:
            issues.append(f"links {', '.join(map(str, slow))} below {top:g} GB/s")
        if issues:
            bad.append(f"GPU {g.index} ({g.uuid or g.name}): {'; '.join(issues)}")
            devices.append(f"GPU {g.index}")
            hints.append(f"nvidia-smi -r -i {g.index} or reboot; links still down: reseat/RMA GPU {g.index}")
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad), devices, "; ".join(hints))
    return CheckResult(NAME, Status.PASS, f"{len(gpus)} GPUs x {want} NVLinks active at {top:g} GB/s")


def run(ctx) -> CheckResult:
    from ..command import CommandError
    from ..probe.nvsmi import parse_nvlink_status

    if not ctx.gpus():
        return CheckResult(NAME, Status.NA, "no NVIDIA GPUs on this node")
    try:
        out = ctx.run_command(["nvidia-smi", "nvlink", "-s"])
    except CommandError as exc:
        return CheckResult(NAME, Status.ERROR, f"cannot read NVLink state: {exc}")
    gpus = parse_nvlink_status(out.stdout)
    if not gpus:
        return CheckResult(NAME, Status.ERROR, "nvidia-smi nvlink -s printed no GPU lines: "
                           f"{out.stdout.strip()[:120]!r}")
    return judge(gpus, ctx.settings(NAME)["links_per_gpu"])
