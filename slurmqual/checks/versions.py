"""versions: GPU driver, NIC firmware, kernel and host NCCL match the site's pins.
Mixed driver/firmware sets cause loss spikes that look like hyperparameter bugs.
The versions found are left in ctx.memo["versions"] for the hooks to record."""

from __future__ import annotations

from ..fsroot import FsError
from ..probe import nvidia
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "versions"


def settings():
    from ._settings import Strict

    class VersionsCfg(Strict):
        driver: str | None = None
        nic_fw: str | None = None
        kernel: str | None = None
        nccl: str | None = None

    return VersionsCfg


SPEC = CheckSpec(
    NAME, "standard", rank=100, settings=settings,
    summary="GPU driver, NIC firmware, kernel and host NCCL match the pinned versions",
    hint="reimage or upgrade the node to the pinned driver/firmware/kernel/NCCL (mlxfwmanager, driver and libnccl2 packages)",
    explain="""Records the GPU driver (/proc/driver/nvidia/version), NIC firmware
(/sys/class/infiniband/*/fw_ver), kernel (/proc/sys/kernel/osrelease) and host NCCL
(libnccl.so.X.Y.Z in the system library directories; absent is not a failure, as
containers bring their own), and fails when one differs from its pin
(checks.versions.driver, nic_fw, kernel, nccl) or the node's NICs run mixed firmware.
`slurmqual inventory` shows the fleet and the nodes that differ from the majority.
Fix: reimage or upgrade to the pinned set (driver package, mlxfwmanager, libnccl2).""",
)


def judge(found: dict[str, str | None], pins: dict[str, str | None], fw_set: set[str]) -> CheckResult:
    bad, devices = [], []
    for key in ("driver", "nic_fw", "kernel", "nccl"):
        want = pins.get(key)
        if key == "nccl" and found.get(key) is None:
            continue  # no host NCCL: jobs bring their own (containers); the burn-in records what ran
        if want and found.get(key) != want:
            bad.append(f"{key} {found.get(key) or 'unknown'} (pinned {want})")
            devices.append(key)
    if len(fw_set) > 1:
        bad.append(f"NICs run mixed firmware {', '.join(sorted(fw_set))}")
        devices.append("nic_fw")
    summary = ", ".join(f"{k} {v}" for k, v in found.items() if v)
    if bad:
        return CheckResult(NAME, Status.FAIL, "; ".join(bad), devices)
    return CheckResult(NAME, Status.PASS, summary or "no versions found")


def run(ctx) -> CheckResult:
    fs = ctx.fs
    try:
        driver = nvidia.driver(fs).version
    except FsError as exc:
        if exc.reason != "missing":
            raise
        driver = None
    fws = {}
    for p in ctx.ports():
        fws[p.device] = fs.read(f"/sys/class/infiniband/{p.device}/fw_ver").strip()
    fw_set = set(fws.values())
    found = {"driver": driver, "nic_fw": ",".join(sorted(fw_set)) or None, "kernel": nvidia.kernel_release(fs),
             "nccl": nvidia.host_nccl(fs)}
    ctx.memo["versions"] = {k: v for k, v in found.items() if v}
    return judge(found, ctx.config["checks"]["versions"], fw_set)
