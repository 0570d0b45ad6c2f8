"""`scontrol show node [NAME] --oneliner` text.

Layout (src/api/node_info.c, 22.05-26.05): ``Key=value`` fields separated by
spaces, where some values hold spaces (OS=, Reason=, Comment=, Extra=). After
``Reason=<text> [user@time]`` come optional ``Comment=``, ``Extra=``,
``InstanceId=`` ``InstanceType=`` (23.11+), ``ReservationName=`` (23.02+),
``TLSCertTokenSet=``/``TLSCertLastRenewal=``, ``Topology=``, ``Parameters=``
(25.11+). The reason ends at its ``[user@time]`` stamp; without one, at the
first of those trailing keys. Our calls pin SLURM_TIME_FORMAT=standard so the
stamp has one known shape.
"""

from __future__ import annotations

import re

from .errors import FormatError
from .nodes import NodeInfo, node_state

TAIL_KEYS = ("Comment", "Extra", "InstanceId", "InstanceType", "ReservationName", "TLSCertTokenSet",
             "TLSCertLastRenewal", "Topology", "Parameters")
_TAIL = re.compile(r" (?:%s)=" % "|".join(TAIL_KEYS))
_STAMP = re.compile(r" \[[^\[\]@ ]+@(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|[^\[\]]+)\](?=$| (?:%s)=)" % "|".join(TAIL_KEYS))
_STATE = re.compile(r"(?:^| )State=(\S+)")
_VERSION = re.compile(r"(?:^| )Version=(\S+)")


def reason_of(line: str) -> str:
    """The Reason= text of one oneliner line, without the [user@time] stamp
    and without the fields that follow it."""
    at = line.find(" Reason=")
    if at < 0:
        return ""
    rest = line[at + len(" Reason="):]
    stamp = _STAMP.search(rest)
    if stamp:
        return rest[:stamp.start()].strip()
    tail = _TAIL.search(rest)
    return (rest[:tail.start()] if tail else rest).strip()


def parse_node_oneliner(text: str, source: str = "scontrol show node") -> list[NodeInfo]:
    """NodeInfo per `NodeName=` line. A line without a readable State= is a
    FormatError naming the node's Slurm version (its Version= field)."""
    out = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        name = line.split(None, 1)[0].split("=", 1)[1]
        ver = _VERSION.search(line)
        who = f"Slurm {ver.group(1)}" if ver else "this Slurm"
        m = _STATE.search(line)
        if not m:
            raise FormatError(f"{source} from {who}: no State= for {name}")
        try:
            base, flags = node_state(m.group(1).split("+"), f"node {name}")
        except ValueError as exc:
            raise FormatError(f"{source} from {who}: {exc}") from None
        out.append(NodeInfo(name, base, flags, reason_of(line)))
    if not out and text.strip():
        raise FormatError(f"{source}: unreadable output {text[:80]!r}")
    return out
