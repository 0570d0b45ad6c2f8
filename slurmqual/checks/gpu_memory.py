"""gpu_memory: GPU memory health from `nvidia-smi -q -x`: uncorrectable ECC
errors, row remapping (Ampere and later: pending until the GPU is reset,
failed = out of spare rows) and retired pages (before Ampere)."""

from __future__ import annotations

from ..result import CheckResult
from . import CheckSpec
from ._gpu import fail_or_warn, report

NAME = "gpu_memory"


def settings():
    from pydantic import Field

    from ._settings import Strict

    class GpuMemoryCfg(Strict):
        # Uncorrectable ECC errors since the last GPU reset that are tolerated.
        volatile_uncorrectable_limit: int = Field(0, ge=0)
        # Over the GPU's life (None: not judged; row remapping handles them).
        aggregate_uncorrectable_limit: int | None = Field(None, ge=0)
        # Retired pages (single + double bit) at which a pre-Ampere GPU is RMA'd.
        retired_pages_limit: int = Field(60, ge=0)
        # ECC must be on.
        require_ecc: bool = True

    return GpuMemoryCfg


SPEC = CheckSpec(
    NAME, "standard", rank=110, settings=settings,
    summary="no uncorrectable ECC errors, no pending or failed row remapping, retired pages under the limit",
    hint="pending remap / uncorrectable ECC: drain, reset the GPU (nvidia-smi -r -i <index>) or reboot; "
         "remapping failure or too many retired pages: RMA the GPU",
    explain="""Reads `nvidia-smi -q -x` once per run (shared with gpu_state and fabric_manager).
- Uncorrectable ECC errors since the last reset (volatile) above
  checks.gpu_memory.volatile_uncorrectable_limit (0): the GPU returned bad data;
  reset it. Lifetime (aggregate) counts are judged only when
  checks.gpu_memory.aggregate_uncorrectable_limit is set.
- Row remapping (A100/H100/H200): "pending" means a faulty row is remapped at the
  next GPU reset; until then jobs can hit it (Xid 63/64). "Remapping failure"
  means no spare rows are left: RMA.
- Retired pages (V100/T4 and older): single + double bit retired pages over
  checks.gpu_memory.retired_pages_limit (60) is NVIDIA's RMA criterion; a
  pending retirement needs a reboot.
- ECC mode off (checks.gpu_memory.require_ecc = true): memory errors go unseen.
Failures name GPU index, PCI address and serial.
Fix: drain, `nvidia-smi -r -i <index>` (or reboot), requalify; RMA on remap failure.""",
)


def judge(gpus, cfg: dict) -> CheckResult:
    failed, devices, hints = [], [], []
    for g in gpus:
        issues = []
        if g.remap_failure:
            issues.append("row remapping failed (no spare rows left)")
            hints.append(f"RMA {g.label}")
        if g.remap_pending:
            issues.append(f"row remap pending ({g.remap_unc or 0} uncorrectable, {g.remap_corr or 0} correctable rows)")
            hints.append(f"reset GPU {g.index}: nvidia-smi -r -i {g.index} (or reboot) to apply the remap")
        if g.unc_volatile is not None and g.unc_volatile > cfg["volatile_uncorrectable_limit"]:
            issues.append(f"{g.unc_volatile} uncorrectable ECC errors since reset")
            hints.append(f"reset GPU {g.index}: nvidia-smi -r -i {g.index} (or reboot)")
        limit = cfg["aggregate_uncorrectable_limit"]
        if limit is not None and g.unc_aggregate is not None and g.unc_aggregate > limit:
            issues.append(f"{g.unc_aggregate} uncorrectable ECC errors in its life (limit {limit})")
            hints.append(f"RMA {g.label}")
        retired = (g.retired_sbe or 0) + (g.retired_dbe or 0)
        if retired > cfg["retired_pages_limit"]:
            issues.append(f"{retired} retired pages (limit {cfg['retired_pages_limit']})")
            hints.append(f"RMA {g.label}")
        if g.retire_pending:
            issues.append("page retirement pending")
            hints.append(f"reboot to retire the pages of GPU {g.index}")
        if cfg["require_ecc"] and g.ecc_mode == "Disabled":
            issues.append("ECC disabled")
            hints.append(f"nvidia-smi -i {g.index} -e 1, then reboot")
        if issues:
            failed.append(f"{g.label}: {', '.join(issues)}")
            devices.append(g.pci)
    return fail_or_warn(NAME, failed, [], devices, hints, f"{len(gpus)} GPUs: memory healthy")


def run(ctx) -> CheckResult:
    rep, result = report(ctx, NAME)
    if result:
        return result
    return judge(rep.gpus, ctx.settings(NAME))
