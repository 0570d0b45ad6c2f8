"""pcie_link: GPU and NIC PCIe links trained at full width (and NICs at full speed).

GPUs lower their link *speed* when idle to save power (an idle H100 reads
2.5 GT/s), so a GPU's speed is not judged; its width never changes at idle."""

from __future__ import annotations

from ..probe import pci, rdma
from ..result import CheckResult, Status

NAME = "pcie_link"


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
    for g in ctx.probe("gpus", lambda: pci.gpus(fs)):
        if g.path.startswith("/sys/"):
            links[f"GPU {g.bdf}"] = ("gpu", pci.link_state(fs, g.bdf))
    for p in ctx.probe("ports", lambda: rdma.list_ports(fs, ctx.config["fabric"]["ignore"])):
        if p.pci and f"{p.device} {p.pci}" not in links:
            links[f"{p.device} {p.pci}"] = ("nic", pci.link_state(fs, p.pci))
    return judge(links, ctx.config["checks"]["pcie_link"]["on_degraded"])
