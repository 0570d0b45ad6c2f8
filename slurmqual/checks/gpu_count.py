"""gpu_count: the expected number of GPUs is on the bus and seen by the driver.
A GPU that fell off the bus (Xid 79) leaves an 8-GPU job unschedulable or slow."""

from __future__ import annotations

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "gpu_count"

SPEC = CheckSpec(
    NAME, 'fast', rank=50,
    summary='the expected number of GPUs is visible on PCI',
    hint='GPU fell off the bus (Xid 79?) or was not enumerated: check dmesg, reseat/RMA, nvidia-smi -r or reboot',
    explain="""The number of NVIDIA GPUs on PCI (class 0x0300/0x0302; NVSwitch 0x0680 excluded)
must equal node.gpus, and the driver (/proc/driver/nvidia/gpus) must see all of them.
Fix: dmesg for Xid 79 (fallen off the bus); nvidia-smi -r, reboot, reseat, RMA.""",
)


def judge(on_pci: list[str], in_driver: list[str] | None, expected: int | None) -> CheckResult:
    n = len(on_pci)
    if expected is not None and n != expected:
        return CheckResult(NAME, Status.FAIL, f"{n} GPUs on PCI, expected {expected}", on_pci)
    if in_driver is not None and n and set(in_driver) != set(on_pci):
        missing = sorted(set(on_pci) - set(in_driver))
        return CheckResult(NAME, Status.FAIL, f"driver sees {len(in_driver)} of {n} GPUs; not initialised: "
                           f"{', '.join(missing) or '-'}", missing)
    note = "" if expected is not None else " (no expected count configured)"
    return CheckResult(NAME, Status.PASS, f"{n} GPUs{note}")


def run(ctx) -> CheckResult:
    fs = ctx.fs
    on_pci = [d.bdf for d in ctx.pci_devices() if d.is_gpu]
    in_driver = None
    if fs.isdir("/proc/driver/nvidia/gpus"):
        in_driver = fs.listdir("/proc/driver/nvidia/gpus")
        if not on_pci:  # no PCI view (container): trust the driver's list
            on_pci = in_driver
    if in_driver is None and not fs.isdir("/sys/bus/pci/devices"):
        return CheckResult(NAME, Status.ERROR, "no /sys/bus/pci/devices under the node root and no driver view: "
                           "cannot count GPUs")
    return judge(on_pci, in_driver, ctx.config["node"]["gpus"])
