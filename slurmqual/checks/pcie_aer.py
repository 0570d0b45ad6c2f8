"""pcie_aer: PCIe Advanced Error Reporting counters of the GPUs, the fabric NICs
and every bridge above them (root ports, PCIe switch ports).

A non-fatal or fatal uncorrectable error (completion timeout, surprise down,
poisoned TLP) means lost or corrupted transactions: the GPU or NIC is about to
fall off the bus, or already hides data corruption. Correctable errors (bad
TLP/DLLP, receiver errors) are retried by the link layer and only cost
bandwidth; a high rate marks a marginal riser, cable or slot.

The kernel counts since boot and cannot be reset, so uncorrectable errors stay
until the reboot or reseat that fixes them; correctable errors are judged as a
rate (count per hour of uptime), so one old burst fades. Sysfs reads only, for
the prolog."""

from __future__ import annotations

from ..probe import pci
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "pcie_aer"


def settings():
    from typing import Literal

    from pydantic import Field

    from ._settings import Strict

    class PcieAerCfg(Strict):
        # What an uncorrectable (fatal / non-fatal) error does to the node.
        on_uncorrectable: Literal["fail", "warn"] = "fail"
        # Correctable errors per hour of uptime above which the check warns.
        correctable_per_hour: float = Field(60.0, ge=0)
        # Also read the bridges (root and switch ports) above each GPU and NIC.
        bridges: bool = True

    return PcieAerCfg


SPEC = CheckSpec(
    NAME, "fast", rank=65, settings=settings,
    summary="no uncorrectable PCIe AER errors on GPUs, NICs and the switches above them",
    hint="uncorrectable PCIe errors: reseat the device or riser, reboot to clear; if they return, RMA the card or "
         "the board; correctable only: check the riser/slot, PCIe gen setting",
    explain="""Reads /sys/bus/pci/devices/<bdf>/aer_dev_fatal, aer_dev_nonfatal and
aer_dev_correctable (kernel >= 4.19; older kernels' long error names such as 'Receiver Error 2' are
read as the short ones newer kernels print, 'RxErr 2') of every GPU, every fabric NIC and, with
checks.pcie_aer.bridges = true, the root and PCIe switch ports above them.
Fatal or non-fatal (uncorrectable) errors: completion timeouts, surprise link
down, poisoned or malformed TLPs. The transaction was lost; the device usually
follows with Xid 79 (fallen off the bus) or silent corruption.
checks.pcie_aer.on_uncorrectable = "warn" reports without draining.
Correctable errors are retried by the link and only judged as a rate over the
uptime (/proc/uptime): above checks.pcie_aer.correctable_per_hour the check warns.
The counters only reset at boot, so a drained node is resumed by the reboot that
fixes it. Devices without AER files (no AER capability, firmware-first AER) are
skipped; a node where no device has them is n/a.
Fix: reseat the card, riser or cable named in the message; reboot; RMA if it recurs.""",
)


def label(kind: str, dev: str, below: str | None = None) -> str:
    return f"{kind} {dev}" + (f" (above {below})" if below else "")


def judge(stats: dict[str, pci.AerCounts], uptime_s: float, cfg: dict) -> CheckResult:
    """stats: device label -> its AER counts."""
    if not stats:
        return CheckResult(NAME, Status.NA, "no AER statistics in sysfs for the GPUs and NICs "
                           "(no AER capability or firmware-first AER)")
    failed, warned, devices = [], [], []
    hours = max(uptime_s, 1.0) / 3600
    for dev, aer in sorted(stats.items()):
        bad = [f"{aer.totals[k]} {k} ({aer.named(k)})" for k in ("fatal", "nonfatal") if aer.totals[k]]
        if bad:
            failed.append(f"{dev}: {', '.join(bad)}")
            devices.append(dev)
            continue
        rate = aer.totals["correctable"] / hours
        if aer.totals["correctable"] and rate > cfg["correctable_per_hour"]:
            warned.append(f"{dev}: {aer.totals['correctable']} correctable in {hours:.1f} h "
                          f"({rate:.0f}/h > {cfg['correctable_per_hour']:g}/h: {aer.named('correctable')})")
            devices.append(dev)
    if failed:
        status = Status.WARN if cfg["on_uncorrectable"] == "warn" else Status.FAIL
        return CheckResult(NAME, status, "uncorrectable PCIe errors: " + "; ".join(failed + warned), devices)
    if warned:
        return CheckResult(NAME, Status.WARN, "PCIe correctable error rate high: " + "; ".join(warned), devices)
    return CheckResult(NAME, Status.PASS, f"{len(stats)} PCIe functions without uncorrectable errors")


def observe(ctx) -> dict[str, pci.AerCounts]:
    fs, cfg = ctx.fs, ctx.settings(NAME)
    targets: dict[str, str] = {}           # bdf -> label
    bridges: dict[str, str] = {}
    by_bdf = {d.bdf: d for d in ctx.pci_devices()}
    for g in ctx.gpus():
        targets[g.bdf] = label("GPU", g.bdf)
    for p in ctx.ports():
        if p.pci and p.pci not in targets:
            targets[p.pci] = label(p.device, p.pci)
    if cfg["bridges"]:
        for bdf, name in list(targets.items()):
            dev = by_bdf.get(bdf)
            for up in dev.upstream if dev else ():
                bridges.setdefault(up, label("bridge", up, name))
    stats = {}
    for bdf, name in [*targets.items(), *((b, n) for b, n in bridges.items() if b not in targets)]:
        counts = pci.aer(fs, bdf)
        if counts is not None:
            stats[name] = counts
    return stats


def run(ctx) -> CheckResult:
    stats = observe(ctx)
    if not stats:
        return judge(stats, 0, ctx.settings(NAME))
    return judge(stats, pci.uptime_s(ctx.fs), ctx.settings(NAME))
