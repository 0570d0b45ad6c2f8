"""gpu_count: the expected number of GPUs is on the bus and seen by the driver.
A GPU that fell off the bus (Xid 79) leaves an 8-GPU job unschedulable or slow."""

from __future__ import annotations

from ..result import CheckResult, Status
from . import CheckSpec

NAME = "gpu_count"

SPEC = CheckSpec(
    NAME, 'fast', rank=50,
    summary='the expected number (and model) of GPUs is visible on PCI',
    hint='GPU fell off the bus (Xid 79?) or was not enumerated: check dmesg, reseat/RMA, nvidia-smi -r or reboot',
    explain="""The number of NVIDIA GPUs on PCI (class 0x0300/0x0302; NVSwitch 0x0680 excluded)
must equal node.gpus, and the driver (/proc/driver/nvidia/gpus) must see all of them.
With node.gpu_model set, every GPU's model in the driver's view
(/proc/driver/nvidia/gpus/<pci>/information, 'Model:') must be that one: a node
imaged into the wrong partition, or a board swapped for another part, fails.
Fix: dmesg for Xid 79 (fallen off the bus); nvidia-smi -r, reboot, reseat, RMA.""",
)


def judge(on_pci: list[str], in_driver: list[str] | None, expected: int | None,
          models: dict[str, str] | None = None, expected_model: str | None = None) -> CheckResult:
    """models: GPU PCI address -> model as the driver names it (read only
    when expected_model is set)."""
    n = len(on_pci)
    if expected is not None and n != expected:
        return CheckResult(NAME, Status.FAIL, f"{n} GPUs on PCI, expected {expected}", on_pci)
    if in_driver is not None and n and set(in_driver) != set(on_pci):
        missing = sorted(set(on_pci) - set(in_driver))
        return CheckResult(NAME, Status.FAIL, f"driver sees {len(in_driver)} of {n} GPUs; not initialised: "
                           f"{', '.join(missing) or '-'}", missing)
    note = "" if expected is not None else " (no expected count configured)"
    if expected_model is not None and models is not None:
        other = {b: m for b, m in sorted(models.items()) if m != expected_model}
        if other:
            return CheckResult(NAME, Status.FAIL, f"{len(other)} of {n} GPUs are not {expected_model}: "
                               + ", ".join(f"{b} {m}" for b, m in other.items()), list(other))
        unknown = sorted(set(on_pci) - set(models))
        note += f", {expected_model}" + (f" (model not in the driver's view: {', '.join(unknown)})" if unknown else "")
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
    node = ctx.config["node"]
    want_model = node.get("gpu_model")
    models = None
    if want_model is not None and in_driver is not None:
        from ..probe import nvidia

        models = nvidia.gpu_models(fs)
    return judge(on_pci, in_driver, node["gpus"], models, want_model)
