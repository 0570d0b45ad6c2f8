"""versions: GPU driver, NIC firmware, kernel and host NCCL match the site's pins.
Mixed driver/firmware sets cause loss spikes that look like hyperparameter bugs.
The versions found are left in ctx.memo["versions"] for the hooks to record."""

from __future__ import annotations

from ..fsroot import FsError
from ..probe import nvidia, rdma
from ..result import CheckResult, Status

NAME = "versions"


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
    for p in ctx.probe("ports", lambda: rdma.list_ports(fs, ctx.config["fabric"]["ignore"])):
        fws[p.device] = fs.read(f"/sys/class/infiniband/{p.device}/fw_ver").strip()
    fw_set = set(fws.values())
    found = {"driver": driver, "nic_fw": ",".join(sorted(fw_set)) or None, "kernel": nvidia.kernel_release(fs),
             "nccl": nvidia.host_nccl(fs)}
    ctx.memo["versions"] = {k: v for k, v in found.items() if v}
    return judge(found, ctx.config["checks"]["versions"], fw_set)
