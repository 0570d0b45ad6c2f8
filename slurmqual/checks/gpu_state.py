"""gpu_state: GPU settings and conditions that make jobs slow or fail from
`nvidia-smi -q -x`: persistence mode, MIG where the site does not expect it,
the driver's recovery action, hardware slowdowns and temperature."""

from __future__ import annotations

from ..result import CheckResult
from . import CheckSpec
from ._gpu import fail_or_warn, report

NAME = "gpu_state"


def settings():
    from typing import Literal

    from pydantic import Field

    from ._settings import Strict
    from ..probe.nvsmi import SLOWDOWN_REASONS

    class GpuStateCfg(Strict):
        persistence_mode: bool = True              # require persistence mode on
        mig: Literal["off", "on", "any"] = "off"   # what the site expects
        # Clocks-event reasons that warn while active.
        slowdown_reasons: list[str] = Field(default_factory=lambda: list(SLOWDOWN_REASONS))
        # Fail at or above this GPU temperature; None: warn at the GPU's own slowdown threshold.
        max_temp_c: float | None = Field(None, gt=0, le=150)

    return GpuStateCfg


SPEC = CheckSpec(
    NAME, "standard", rank=120, settings=settings,
    summary="persistence mode on, MIG as expected, no driver recovery action, no hardware slowdown or overheating",
    hint="nvidia-smi -pm 1 (or enable nvidia-persistenced); nvidia-smi -mig 0 and reset; "
         "slowdown/heat: check fans, airflow, power cabling",
    explain="""Reads `nvidia-smi -q -x` (shared with gpu_memory and fabric_manager):
- persistence mode (checks.gpu_state.persistence_mode = true): off means the driver
  tears the GPU down between jobs; the next job start pays seconds and clocks reset.
- MIG mode as checks.gpu_state.mig expects ("off", "on" or "any"): a GPU left in
  MIG by a previous tenant gives an 8-GPU job a slice of a GPU.
- gpu_recovery_action (driver 550+): anything but None ("Reset", "Reboot",
  "Drain P2P", "Drain and Reset") is the driver asking for that action: fail.
- clocks-event reasons in checks.gpu_state.slowdown_reasons (HW slowdown, HW
  thermal, power brake, SW thermal) active: warn, the GPU runs below its clocks.
- temperature at or above checks.gpu_state.max_temp_c: fail; without it, at or
  above the GPU's own slowdown threshold: warn.
Fix: nvidia-smi -pm 1 / nvidia-persistenced; nvidia-smi -i N -mig 0 and reset;
fans, airflow, PSU and power cables for slowdowns.""",
)


def judge(gpus, cfg: dict) -> CheckResult:
    failed, warned, devices, hints = [], [], [], []
    for g in gpus:
        bad, soft = [], []
        if cfg["persistence_mode"] and g.persistence == "Disabled":
            bad.append("persistence mode off")
            hints.append(f"nvidia-smi -i {g.index} -pm 1 (or start nvidia-persistenced)")
        if cfg["mig"] == "off" and g.mig == "Enabled":
            bad.append("MIG enabled")
            hints.append(f"nvidia-smi -i {g.index} -mig 0, then reset GPU {g.index}")
        elif cfg["mig"] == "on" and g.mig == "Disabled":
            bad.append("MIG disabled (site expects MIG)")
            hints.append(f"nvidia-smi -i {g.index} -mig 1, then reset GPU {g.index}")
        if g.recovery_action and g.recovery_action != "None":
            bad.append(f"driver asks for recovery action '{g.recovery_action}'")
            hints.append(f"{g.recovery_action.lower()} GPU {g.index} as the driver asks")
        if cfg["max_temp_c"] is not None and g.temp_c is not None and g.temp_c >= cfg["max_temp_c"]:
            bad.append(f"{g.temp_c:g} C (limit {cfg['max_temp_c']:g} C)")
            hints.append(f"GPU {g.index} overheating: check fans, airflow, heatsink")
        elif cfg["max_temp_c"] is None and g.temp_c is not None and g.slowdown_c and g.temp_c >= g.slowdown_c:
            soft.append(f"{g.temp_c:g} C at its slowdown threshold {g.slowdown_c:g} C")
            hints.append(f"GPU {g.index} hot: check fans, airflow, heatsink")
        active = [r for r in cfg["slowdown_reasons"] if g.clock_events.get(r)]
        if active:
            soft.append("clocks slowed: " + ", ".join(active))
            hints.append(f"GPU {g.index} slowed: check cooling, PSU and power cables")
        if bad:
            failed.append(f"{g.label}: {', '.join(bad + soft)}")
            devices.append(g.pci)
        elif soft:
            warned.append(f"{g.label}: {', '.join(soft)}")
            devices.append(g.pci)
    return fail_or_warn(NAME, failed, warned, devices, hints, f"{len(gpus)} GPUs: persistence on, MIG as expected, "
                        "no slowdown")


def run(ctx) -> CheckResult:
    rep, result = report(ctx, NAME)
    if result:
        return result
    return judge(rep.gpus, ctx.settings(NAME))
