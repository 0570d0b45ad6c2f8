"""roce_qos: the lossless RoCE class holds up. No PFC pause storm and no flood
of pause frames sent by this NIC within the window (`ethtool -S`), and the NIC
classifies by the trust mode the fabric expects (`mlnx_qos -i`). A storming or
mis-trusting node stalls or drops the RoCE traffic of every job beside it."""

from __future__ import annotations

from ..probe import rdma
from ..result import CheckResult, Status
from . import CheckSpec

NAME = "roce_qos"


def settings():
    from typing import Literal

    from pydantic import Field

    from ._settings import Strict

    class RoceQosCfg(Strict):
        # Priority trust the fabric expects (`mlnx_qos -i IF`: "Priority trust state");
        # "any": not checked.
        trust: Literal["dscp", "pcp", "any"] = "dscp"
        # "auto": read the trust where mlnx_qos is installed (a missing tool is noted);
        # true: required, a missing mlnx_qos is an error; false: never.
        mlnx_qos: bool | Literal["auto"] = "auto"
        # Largest allowed increases within window_s: storm errors fail, storm warnings
        # and pause frames sent (per priority) warn.
        storm_error_limit: int = Field(0, ge=0)
        storm_warning_limit: int = Field(0, ge=0)
        tx_pause_limit: int = Field(100000, ge=0)
        window_s: float = Field(3600.0, gt=0, le=30 * 86400)

    return RoceQosCfg


SPEC = CheckSpec(
    # Health check only: `mlnx_qos` is a Python script, one per netdev; at 8 rails
    # that is seconds, too long to add to every job's epilog for counters and a
    # trust mode that a 5-minute health check watches as well.
    NAME, "standard", rank=75, hooks=("healthcheck",), settings=settings,
    summary="RoCE: no PFC pause storm or pause flood within the window, priority trust as the fabric expects",
    hint="pause storm: reboot the node, then check the NIC's PCIe slot; trust: mlnx_qos -i <netdev> --trust dscp",
    explain="""On RoCE ports, reads `ethtool -S <netdev>` (mlx5 flow-control counters
tx_pause_storm_error_events, tx_pause_storm_warning_events, tx_prio<N>_pause or
tx_global_pause) and judges their increase within checks.roce_qos.window_s (default
one hour): storm error events above checks.roce_qos.storm_error_limit (0) fail: the
NIC could not drain its receive buffer for seconds and its PFC storm prevention
stopped sending pauses, so the lossless class dropped traffic. Storm warning events
above checks.roce_qos.storm_warning_limit (0) and pause frames sent on one priority
above checks.roce_qos.tx_pause_limit (100000) warn: the host is not absorbing its
RoCE traffic. Readings of the last window are kept in
<hooks.state_dir>/counters/<node>.roce_qos.json, so a node recovers by itself once
the counters stay flat for a window. Then `mlnx_qos -i <netdev>` must print
'Priority trust state: <checks.roce_qos.trust>' (default dscp; "any": not checked;
checks.roce_qos.mlnx_qos: "auto" reads it where mlnx_qos is installed, true requires
it, false never). A node left at pcp puts routed RoCE traffic into priority 0,
outside the lossless class. InfiniBand: not applicable.
Fix: storm: look for a stuck host (dmesg, pcie_aer, pcie_link), reboot; trust:
mlnx_qos -i <netdev> --trust dscp and make it persistent in the node's network config.""",
)


def _ago(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def judge_counters(increase: dict[str, dict[str, int]], since: dict[str, float | None], now: float,
                   cfg: dict) -> tuple[list[str], list[str], list[str], list[str]]:
    """increase: 'mlx5_2 (ens3np0)' -> counter -> increase within the window.
    Returns (failures, failing devices, warnings, warning devices)."""
    from ..probe.netqos import STORM_ERROR, STORM_WARNING, tx_pause_names

    fails, fail_devs, warns, warn_devs = [], [], [], []
    for dev, values in sorted(increase.items()):
        base = since.get(dev)
        when = "since the driver loaded (first reading)" if base is None else f"in {_ago(now - base)}"
        if values.get(STORM_ERROR, 0) > cfg["storm_error_limit"]:
            fails.append(f"{dev}: PFC pause storm, {STORM_ERROR} +{values[STORM_ERROR]} "
                         f"(limit {cfg['storm_error_limit']}) {when}")
            fail_devs.append(dev)
        over = []
        if values.get(STORM_WARNING, 0) > cfg["storm_warning_limit"]:
            over.append(f"{STORM_WARNING} +{values[STORM_WARNING]} (limit {cfg['storm_warning_limit']})")
        over += [f"{k} +{values[k]} (limit {cfg['tx_pause_limit']})" for k in tx_pause_names(values)
                 if values[k] > cfg["tx_pause_limit"]]
        if over:
            warns.append(f"{dev}: {', '.join(over)} {when}")
            warn_devs.append(dev)
    return fails, fail_devs, warns, warn_devs


def run(ctx) -> CheckResult:
    import time

    from .. import counterwindow
    from ..command import CommandError
    from ..probe.netqos import QosError, parse_ethtool_stats, parse_trust, pause_counters

    fs, cfg = ctx.fs, ctx.settings(NAME)
    ports = [p for p in ctx.ports() if p.attr(fs, "link_layer") == "Ethernet"]
    if not ports:
        return CheckResult(NAME, Status.NA, "no RoCE ports (InfiniBand or no RDMA): RoCE QoS not applicable")
    try:  # 'mlx5_2 (ens3np0)' -> ens3np0
        netdevs = {label: ifname for label, _port, ifname in rdma.roce_netdevs(fs, ports)}
    except rdma.NoNetdev as exc:
        return CheckResult(NAME, Status.ERROR, str(exc), [exc.port.name])

    current, notes = {}, []
    for label, ifname in netdevs.items():
        try:
            out = ctx.run_command(["ethtool", "-S", ifname])
        except CommandError as exc:
            return CheckResult(NAME, Status.ERROR, f"{label}: cannot read pause counters: {exc}", [label])
        counters = pause_counters(parse_ethtool_stats(out.stdout))
        if counters:
            current[label] = counters
        else:
            notes.append(f"{label}: no pause counters in ethtool -S (PFC and global pause off)")

    now = time.time()
    path = ctx.state_path(f"counters/{ctx.node_key()}.{NAME}.json")
    increase, since, note = counterwindow.observe(path, current, now, cfg["window_s"])
    notes += [note] if note else []
    fails, fail_devs, warns, warn_devs = judge_counters(increase, since, now, cfg)
    hints = [_storm_hint(d, netdevs[d]) for d in fail_devs]

    if cfg["trust"] != "any" and cfg["mlnx_qos"] is not False:
        for label, ifname in netdevs.items():
            try:
                trust = parse_trust(ctx.run_command(["mlnx_qos", "-i", ifname]).stdout)
            except CommandError as exc:
                if "command not found" in str(exc) and cfg["mlnx_qos"] == "auto":
                    notes.append("mlnx_qos not installed: trust mode not checked")
                    break
                return CheckResult(NAME, Status.ERROR, f"{label}: cannot read the trust mode: {exc}", [label])
            except QosError as exc:
                return CheckResult(NAME, Status.ERROR, f"{label}: {exc}", [label])
            if trust != cfg["trust"]:
                fails.append(f"{label}: priority trust {trust}, expected {cfg['trust']}")
                fail_devs.append(label)
                hints.append(f"mlnx_qos -i {ifname} --trust {cfg['trust']} (and in the node's network config "
                             f"so it survives a reboot)")

    note = f" ({'; '.join(notes)})" if notes else ""
    if fails:
        return CheckResult(NAME, Status.FAIL, "; ".join(fails + warns) + note, fail_devs + warn_devs,
                           "; ".join(hints + [_pause_hint(d, netdevs[d]) for d in warn_devs]))
    if warns:
        return CheckResult(NAME, Status.WARN, "; ".join(warns) + note, warn_devs,
                           "; ".join(_pause_hint(d, netdevs[d]) for d in warn_devs))
    trust = "" if cfg["trust"] == "any" or "not checked" in note else f", trust {cfg['trust']}"
    return CheckResult(NAME, Status.PASS, f"{len(netdevs)} RoCE netdevs: no pause storm or flood{trust}{note}")


def _storm_hint(label: str, ifname: str) -> str:
    return (f"{label}: PFC storm prevention fired (the NIC could not drain its receive buffer): check dmesg for "
            f"mlx5 errors and pcie_aer/pcie_link of the NIC, `ethtool -S {ifname} | grep -e pause -e discard`; "
            f"reboot; if it recurs, reseat or replace the NIC")


def _pause_hint(label: str, ifname: str) -> str:
    return (f"{label} sends many PFC pauses (the host does not absorb its RoCE traffic): check the NIC's PCIe link "
            f"and NUMA placement, `ethtool -S {ifname} | grep -e prio -e pause`, and the switch port's PFC counters")
