"""RoCE QoS state of a netdev: pause (PFC) counters from `ethtool -S` and the
trust mode from `mlnx_qos -i`.

mlx5 names its flow-control counters after the priorities that have PFC on
("rx_prio3_pause", "tx_prio3_pause_duration", ...) or, with global pause,
"global" instead of "prio<N>" (drivers/net/ethernet/mellanox/mlx5/core/en_stats.c,
pport_per_prio_pfc_stats_desc); the stall detector adds
tx_pause_storm_warning_events / tx_pause_storm_error_events where the firmware
has it. Only these are kept: the rest of `ethtool -S` (hundreds of per-queue
counters) is not judged.
"""

from __future__ import annotations

import re


class QosError(Exception):
    """Tool output we cannot read; the message says what is wrong."""


_STAT = re.compile(r"^\s+([^\s:]+):\s+(\d+)\s*$")   # names may hold dots: ice "tx_priority_0_xon.nic"
_PAUSE = re.compile(r"^(rx|tx)_(prio[0-7]|global)_pause(_duration|_transition)?$")
STORM_WARNING = "tx_pause_storm_warning_events"
STORM_ERROR = "tx_pause_storm_error_events"


def parse_ethtool_stats(text: str) -> dict[str, int]:
    """Every 'name: count' line of `ethtool -S IF` (after 'NIC statistics:'; a
    grep'd excerpt without the header reads the same)."""
    return {m.group(1): int(m.group(2)) for m in map(_STAT.match, text.splitlines()) if m}


def pause_counters(stats: dict[str, int]) -> dict[str, int]:
    """The flow-control counters of an `ethtool -S` reading."""
    return {k: v for k, v in stats.items() if _PAUSE.match(k) or k in (STORM_WARNING, STORM_ERROR)}


def tx_pause_names(counters: dict[str, int]) -> list[str]:
    """'tx_prio3_pause', 'tx_global_pause': pause frames this NIC sent."""
    return sorted(k for k in counters if k.startswith("tx_") and k.endswith("_pause") and _PAUSE.match(k))


_TRUST = re.compile(r"^Priority trust state:\s*(\S+)", re.M)
_PFC_ENABLED = re.compile(r"^\s*enabled((?:\s+[01])+)\s*$", re.M)


def parse_trust(text: str) -> str:
    """'dscp' or 'pcp' from `mlnx_qos -i IF` ('Priority trust state: dscp')."""
    m = _TRUST.search(text)
    if not m:
        first = text.strip().splitlines()[:1]
        raise QosError(f"mlnx_qos: no 'Priority trust state' line (output starts {first!r})")
    return m.group(1).lower()


def parse_pfc_enabled(text: str) -> list[int]:
    """Priorities with PFC on, from the 'enabled' row under 'PFC configuration'."""
    m = _PFC_ENABLED.search(text)
    if not m:
        return []
    return [p for p, flag in enumerate(m.group(1).split()) if flag == "1"]
