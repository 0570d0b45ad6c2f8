"""dcqcn: RoCE congestion control (DCQCN reaction + notification point) is on.
A node without it floods the fabric; PFC pauses then stall every other rank."""

from __future__ import annotations

import re

from ..command import CommandError
from ..probe import rdma
from ..result import CheckResult, Status

NAME = "dcqcn"


def judge_sysfs(flags: dict[str, dict[str, dict[int, str]]], priorities: list[int]) -> tuple[list[str], list[str]]:
    """flags: netdev -> {"roce_rp"|"roce_np": {prio: "0"/"1"}}. Returns (problems, devices)."""
    problems, devices = [], []
    for ifname, kinds in sorted(flags.items()):
        off = []
        for kind in ("roce_rp", "roce_np"):
            prios = [p for p in priorities if kinds[kind].get(p) != "1"]
            if prios:
                off.append(f"{kind[5:]} off on prio {','.join(map(str, prios))}")
        if off:
            devices.append(ifname)
            problems.append(f"{ifname}: {'; '.join(off)}")
    return problems, devices


_MASK = re.compile(r"^\s*(ROCE_CC_PRIO_MASK_P\d)\s+(\S+)", re.M)


def parse_mlxconfig(text: str) -> dict[str, int]:
    """ROCE_CC_PRIO_MASK_P<n> values from `mlxconfig -d DEV query ...` output."""
    out = {}
    for key, value in _MASK.findall(text):
        m = re.search(r"\((\d+)\)$", value) or re.match(r"^(\d+)$", value)
        if m:
            out[key] = int(m.group(1))
    return out


def run(ctx) -> CheckResult:
    fs, cfg = ctx.fs, ctx.config["checks"]["dcqcn"]
    ports = [p for p in ctx.probe("ports", lambda: rdma.list_ports(fs, ctx.config["fabric"]["ignore"]))
             if p.attr(fs, "link_layer") == "Ethernet"]
    if not ports:
        return CheckResult(NAME, Status.NA, "no RoCE ports (InfiniBand or no RDMA): DCQCN not applicable")
    flags: dict[str, dict[str, dict[int, str]]] = {}
    for port in ports:
        ifnames = rdma.netdevs(fs, port)
        if not ifnames:
            return CheckResult(NAME, Status.ERROR, f"RoCE port {port.name} has no netdev (neither "
                               f"{port.base}/gid_attrs/ndevs/0 nor /sys/class/infiniband/{port.device}/device/net/*)",
                               [port.name])
        for ifname in ifnames:
            flags[ifname] = {kind: {p: fs.read(f"/sys/class/net/{ifname}/ecn/{kind}/enable/{p}").strip()
                                    for p in cfg["priorities"]} for kind in ("roce_rp", "roce_np")}
    problems, devices = judge_sysfs(flags, cfg["priorities"])
    note = ""
    if ctx.level == "standard" and cfg["mlxconfig"] is not False:
        fw_problems, fw_devices, note = _firmware(ctx, ports, cfg["prio_mask"], required=cfg["mlxconfig"] is True)
        if fw_problems is None:
            return CheckResult(NAME, Status.ERROR, note, devices)
        problems += fw_problems
        devices += fw_devices
    if problems:
        return CheckResult(NAME, Status.FAIL, "DCQCN disabled: " + "; ".join(problems), devices)
    prios = ",".join(map(str, cfg["priorities"]))
    return CheckResult(NAME, Status.PASS, f"DCQCN rp/np enabled on prio {prios} for {len(flags)} RoCE netdevs{note}")


def _firmware(ctx, ports, want: int, required: bool):
    """Query each PCI function's firmware setting. Returns (problems, devices, note);
    problems is None when a query failed (hung or broken mlxconfig, or a missing
    one where the site requires it)."""
    problems, devices = [], []
    for pci in sorted({p.pci for p in ports if p.pci}):
        try:
            out = ctx.run_command(["mlxconfig", "-d", pci, "query", "ROCE_CC_PRIO_MASK_P1", "ROCE_CC_PRIO_MASK_P2"])
        except CommandError as exc:
            if "command not found" in str(exc) and not required:
                return problems, devices, " (mlxconfig not installed: firmware setting not checked)"
            return None, [], f"mlxconfig query failed: {exc}"
        values = parse_mlxconfig(out.stdout)
        if "ROCE_CC_PRIO_MASK_P1" not in values:
            return None, [], f"mlxconfig -d {pci}: no ROCE_CC_PRIO_MASK_P1 in output"
        wrong = {k: v for k, v in values.items() if v != want}
        if wrong:
            devices.append(pci)
            problems.append(f"{pci} firmware " + ", ".join(f"{k}={v}" for k, v in sorted(wrong.items())) + f" (expected {want})")
    return problems, devices, ""
