"""fabric_manager: on NVSwitch systems (HGX/DGX) the NVIDIA fabric manager
runs and every GPU finished its fabric registration. Without it CUDA reports
'system not yet initialized' and multi-GPU jobs fail or never start."""

from __future__ import annotations

from ..result import CheckResult, Status
from . import CheckSpec
from ._gpu import report

NAME = "fabric_manager"


def settings():
    from typing import Literal

    from ._settings import Strict

    class FabricManagerCfg(Strict):
        # "auto": judged where NVSwitches are on PCI; true: always; false: never.
        required: bool | Literal["auto"] = "auto"
        # Process names (/proc/<pid>/comm, 15 characters) of the fabric manager.
        process_names: list[str] = ["nv-fabricmanage"]

    return FabricManagerCfg


SPEC = CheckSpec(
    NAME, "standard", rank=130, settings=settings,
    summary="on NVSwitch systems the fabric manager runs and every GPU's fabric registration completed",
    hint="systemctl restart nvidia-fabricmanager (its version must equal the driver's); "
         "a GPU stuck 'In Progress': reset the GPUs or reboot",
    explain="""On HGX/DGX systems the GPUs talk through NVSwitches, which the fabric manager
(nvidia-fabricmanager, process nv-fabricmanager) programs. The check applies where
NVSwitch functions (PCI class 0x0680) are on the bus (checks.fabric_manager.required
= "auto"; true/false force it on/off) and fails when:
- no process named in checks.fabric_manager.process_names runs (/proc/*/comm);
- a GPU's fabric state (nvidia-smi -q -x, Hopper and later) is not "Completed"
  with status "Success": "Not Started"/"In Progress" is a registration that never
  finished (fabric manager down or of another version than the driver), a
  Completed state with a failure status is a failed registration.
Fix: systemctl restart nvidia-fabricmanager; keep its package at the driver version;
reset the GPUs or reboot when registration stays stuck.""",
)


def fm_running(fs, names: list[str]) -> bool:
    """Any process whose /proc/<pid>/comm is one of names."""
    for pid in fs.listdir("/proc"):
        if pid.isdigit() and (fs.read_or(f"/proc/{pid}/comm") or "").strip() in names:
            return True
    return False


def judge(nvswitches: int, running: bool, gpus) -> CheckResult:
    """gpus: SmiGpu records, or None when nvidia-smi could not be read."""
    bad, devices = [], []
    if not running:
        bad.append(f"fabric manager not running ({nvswitches} NVSwitches on PCI)")
        devices.append("nvidia-fabricmanager")
    stuck = []
    for g in gpus or []:
        if g.fabric_state is None:
            continue   # pre-Hopper or no fabric: nothing reported
        if g.fabric_state != "Completed":
            stuck.append(f"{g.label}: fabric state {g.fabric_state}")
        elif g.fabric_status not in (None, "Success"):
            stuck.append(f"{g.label}: fabric registration failed ({g.fabric_status})")
        else:
            continue
        devices.append(g.pci)
    bad += stuck
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad), devices)
    reported = [g for g in gpus or [] if g.fabric_state is not None]
    detail = f", {len(reported)} GPUs registered" if reported else ""
    return CheckResult(NAME, Status.PASS, f"fabric manager running{detail}")


def run(ctx) -> CheckResult:
    cfg = ctx.settings(NAME)
    nvswitches = sum(1 for d in ctx.pci_devices() if d.is_nvswitch)
    if cfg["required"] is False or (cfg["required"] == "auto" and not nvswitches):
        return CheckResult(NAME, Status.NA, "no NVSwitch on PCI: no fabric manager needed")
    running = fm_running(ctx.fs, cfg["process_names"])
    rep, result = report(ctx, NAME)
    if result is not None and result.status is Status.ERROR and running:
        return result          # cannot judge registration: say so, never drain
    return judge(nvswitches, running, rep.gpus if rep else None)
