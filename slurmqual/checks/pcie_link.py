"""pcie_link: GPU and NIC PCIe links trained at full width (and NICs at full speed).

GPUs lower their link *speed* when idle to save power (an idle H100 reads
2.5 GT/s), so a GPU's speed is not judged; its width never changes at idle."""

from __future__ import annotations

from ..probe import pci
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "pcie_link"


def settings():
    from typing import Literal

    from ._settings import Strict

    class PcieCfg(Strict):
        on_degraded: Literal["fail", "warn"] = "fail"

    return PcieCfg


SPEC = CheckSpec(
    NAME, 'fast', rank=60, settings=settings,
    summary='GPU and NIC PCIe links trained at their maximum width and speed',
    hint='link trained below max (width/speed): reseat the card or riser, check BIOS PCIe gen setting, RMA if it recurs',
    explain="""GPU and NIC links must run at their maximum width (current_link_width vs
max_link_width); NICs also at their maximum speed. GPU link speed is not judged:
GPUs drop to 2.5 GT/s when idle to save power. A link trained at x8 halves host and
GPUDirect bandwidth. checks.pcie_link.on_degraded = "warn" reports without draining.
Fix: reseat the card or riser, check the BIOS PCIe generation, RMA if it recurs.""",
)


def judge(links: dict[str, tuple[str, pci.LinkState]], severity: str) -> CheckResult:
    """links: device label -> (kind 'gpu'|'nic', LinkState)."""
    bad, devices = [], []
    for label, (kind, ls) in sorted(links.items()):
        issues = []
        if ls.width < ls.max_width:
            issues.append(f"x{ls.width} of x{ls.max_width}")
        if kind == "nic" and ls.speed < ls.max_speed:
            issues.append(f"{ls.speed:g} of {ls.max_speed:g} GT/s")
        if issues:
            bad.append(f"{label}: {', '.join(issues)}")
            devices.append(label)
    if bad:
        status = Status.WARN if severity == "warn" else Status.FAIL
        return CheckResult(NAME, status, "PCIe link degraded: " + "; ".join(bad), devices)
    return CheckResult(NAME, Status.PASS, f"{len(links)} GPU/NIC links at full width")


def run(ctx) -> CheckResult:
    fs = ctx.fs
    links: dict[str, tuple[str, pci.LinkState]] = {}
    for g in ctx.gpus():
        if g.path.startswith("/sys/"):
            links[f"GPU {g.bdf}"] = ("gpu", pci.link_state(fs, g.bdf))
    for p in ctx.ports():
        if p.pci and f"{p.device} {p.pci}" not in links:
            links[f"{p.device} {p.pci}"] = ("nic", pci.link_state(fs, p.pci))
    return judge(links, ctx.config["checks"]["pcie_link"]["on_degraded"])
