"""dcqcn: RoCE congestion control (DCQCN reaction + notification point) is on.
A node without it floods the fabric; PFC pauses then stall every other rank."""

from __future__ import annotations

from ..probe import rdma
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "dcqcn"


def settings():
    from typing import Literal

    from pydantic import Field, field_validator

    from ._settings import Strict

    class DcqcnCfg(Strict):
        priorities: list[int] = Field(default_factory=lambda: list(range(8)))
        # Standard level: also query the firmware with mlxconfig. "auto": when the
        # tool is installed (a missing tool is noted, not judged); true: required,
        # a missing mlxconfig is an error; false: never.
        mlxconfig: bool | Literal["auto"] = "auto"
        prio_mask: int = Field(255, ge=0, le=255)

        @field_validator("priorities")
        @classmethod
        def _prio_range(cls, v: list[int]) -> list[int]:
            bad = [p for p in v if not 0 <= p <= 7]
            if bad:
                raise ValueError(f"priorities must be 0-7, got {bad}")
            return v

    return DcqcnCfg


SPEC = CheckSpec(
    NAME, 'fast', rank=30, settings=settings,
    summary='RoCE congestion control (DCQCN RP/NP) enabled on the configured priorities',
    hint='mlxconfig -d <dev> set ROCE_CC_PRIO_MASK_P1=255 ROCE_CC_PRIO_MASK_P2=255, then mlxfwreset or reboot; runtime: echo 1 > /sys/class/net/<if>/ecn/roce_{rp,np}/enable/<prio>',
    explain="""On RoCE, DCQCN congestion control must be enabled for the traffic priorities:
/sys/class/net/<if>/ecn/roce_rp/enable/<prio> (reaction point) and roce_np
(notification point) read 1 for every priority in checks.dcqcn.priorities.
At standard level slurmqual also reads the firmware setting with
`mlxconfig -d <pci> query ROCE_CC_PRIO_MASK_P1 ROCE_CC_PRIO_MASK_P2` (expected
checks.dcqcn.prio_mask, 255; checks.dcqcn.mlxconfig: "auto", true or false).
A reimage that loses ROCE_CC_PRIO_MASK_P1=255 leaves a node that floods the fabric;
switches answer with PFC pauses and every other rank waits. InfiniBand: not applicable.
Fix: mlxconfig -d <pci> set ROCE_CC_PRIO_MASK_P1=255 ROCE_CC_PRIO_MASK_P2=255, then
mlxfwreset or reboot.""",
)


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


_MASK = r"(?m)^\s*(ROCE_CC_PRIO_MASK_P\d)\s+(\S+)"  # for `re`, imported at --level standard only


def parse_mlxconfig(text: str) -> dict[str, int]:
    """ROCE_CC_PRIO_MASK_P<n> values from `mlxconfig -d DEV query ...` output."""
    import re

    out = {}
    for key, value in re.findall(_MASK, text):
        m = re.search(r"\((\d+)\)$", value) or re.match(r"^(\d+)$", value)
        if m:
            out[key] = int(m.group(1))
    return out


def run(ctx) -> CheckResult:
    fs, cfg = ctx.fs, ctx.config["checks"]["dcqcn"]
    ports = [p for p in ctx.ports()
             if p.attr(fs, "link_layer") == "Ethernet"]
    if not ports:
        return CheckResult(NAME, Status.NA, "no RoCE ports (InfiniBand or no RDMA): DCQCN not applicable")
    flags: dict[str, dict[str, dict[int, str]]] = {}
    where: dict[str, tuple[str, str]] = {}
    try:
        labelled = rdma.roce_netdevs(fs, ports)
    except rdma.NoNetdev as exc:
        return CheckResult(NAME, Status.ERROR, str(exc), [exc.port.name])
    for label, port, ifname in labelled:
        flags[label] = {kind: {p: fs.read(f"/sys/class/net/{ifname}/ecn/{kind}/enable/{p}").strip()
                               for p in cfg["priorities"]} for kind in ("roce_rp", "roce_np")}
        where[label] = (port.pci or port.device, ifname)
    problems, devices = judge_sysfs(flags, cfg["priorities"])
    hints = [_hint(where[d], cfg) for d in devices]
    note = ""
    if ctx.level == "standard" and cfg["mlxconfig"] is not False:
        fw_problems, fw_devices, note = _firmware(ctx, ports, cfg["prio_mask"], required=cfg["mlxconfig"] is True)
        if fw_problems is None:
            return CheckResult(NAME, Status.ERROR, note, devices)
        problems += fw_problems
        devices += fw_devices
    if problems:
        return CheckResult(NAME, Status.FAIL, "DCQCN disabled: " + "; ".join(problems), devices,
                           "; ".join(hints) if hints else "")
    prios = ",".join(map(str, cfg["priorities"]))
    return CheckResult(NAME, Status.PASS, f"DCQCN rp/np enabled on prio {prios} for {len(flags)} RoCE netdevs{note}")


def _hint(where: tuple[str, str], cfg: dict) -> str:
    """The fix for one device, with its PCI address and netdev filled in."""
    pci, ifname = where
    prios = ",".join(map(str, cfg["priorities"]))
    return (f"mlxconfig -d {pci} set ROCE_CC_PRIO_MASK_P1={cfg['prio_mask']} ROCE_CC_PRIO_MASK_P2={cfg['prio_mask']}, "
            f"then mlxfwreset or reboot; now: for p in {prios.replace(',', ' ')}; do echo 1 > "
            f"/sys/class/net/{ifname}/ecn/roce_rp/enable/$p; echo 1 > /sys/class/net/{ifname}/ecn/roce_np/enable/$p; done")


def _firmware(ctx, ports, want: int, required: bool):
    """Query each PCI function's firmware setting. Returns (problems, devices, note);
    problems is None when a query failed (hung or broken mlxconfig, or a missing
    one where the site requires it)."""
    from ..command import CommandError

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
