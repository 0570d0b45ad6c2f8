"""Fabric map rows ``(node, rail, switch, port)`` from what the fabric says
about itself: ``iblinkinfo`` (InfiniBand, the whole subnet from one host) or
``lldpctl -f json`` (RoCE, one host's neighbours). Parsing only: running the
tools is `slurmqual fabric map`'s job; the rows become a CSV that
`burnin.topology` reads.

iblinkinfo names a host channel adapter by its node description, which
rdma-ndd sets to ``"<hostname> <device>"`` (``gpu-v100-3 HCA-1``,
``gpu017 mlx5_3``). A CA whose description is not two words (an aggregation
node, an unnamed CA) is no compute-node NIC: it is skipped and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# "      0xb88303ffff7f61c4      6    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       3    3[  ] "MF0;ibswitch254:MQM8700/U1" ( )"
_CA = re.compile(r"^CA:\s+(?P<desc>.*?):\s*$")
_SWITCH = re.compile(r"^Switch:\s+(?P<guid>0x[0-9a-fA-F]+)\s+(?P<desc>.*?):\s*$")
_LINK = re.compile(r"==\((?P<state>[^)]*)\)==>\s+(?P<lid>\d+)\s+(?P<port>\d+)\[[^\]]*\]\s+\"(?P<desc>[^\"]*)\"")
_LOCAL = re.compile(r"^\s*(?:0x[0-9a-fA-F]+\s+)?\d+\s+(?P<port>\d+)\[")


class FabricMapError(ValueError):
    pass


@dataclass
class MapResult:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _host_device(desc: str) -> tuple[str, str] | None:
    words = desc.split()
    return (words[0], words[1]) if len(words) == 2 else None


def from_iblinkinfo(text: str) -> MapResult:
    """Each CA port's switch, from the CA blocks and, for CAs listed only under
    a switch (iblinkinfo -S, or excerpts), from the switch blocks."""
    out = MapResult()
    seen: dict[tuple[str, str], tuple[str, str, str, str]] = {}
    switches = set()
    block: tuple[str, str] | None = None  # ("ca"|"switch", description)
    blocks = 0
    for line in text.splitlines():
        m = _CA.match(line)
        if m:
            block, blocks = ("ca", m["desc"].strip()), blocks + 1
            continue
        m = _SWITCH.match(line)
        if m:
            block, blocks = ("switch", m["desc"].strip()), blocks + 1
            switches.add(m["desc"].strip())
            continue
        link = _LINK.search(line)
        if not link or block is None or "Active" not in link["state"]:
            continue
        kind, desc = block
        if kind == "ca":
            hd = _host_device(desc)
            if hd is None:
                out.skipped.append(desc)
                continue
            seen[hd] = (hd[0], hd[1], link["desc"], link["port"])
        else:
            hd = _host_device(link["desc"])
            local = _LOCAL.match(line)
            if hd is not None and hd not in seen and local:
                seen[hd] = (hd[0], hd[1], desc, local["port"])
    if not blocks:
        raise FabricMapError("not iblinkinfo output: no 'CA:' or 'Switch:' block")
    # A "CA" row whose peer is no switch we saw is still a switch as far as the
    # CA knows (excerpts list few switch blocks); a CA-to-CA cable is not a switch.
    out.rows = sorted(r for r in seen.values() if r[2] not in {f"{h} {d}" for h, d in seen})
    out.skipped = sorted(set(out.skipped))
    return out


def from_lldpctl(text: str, node: str, rail_of: dict[str, str] | None = None) -> MapResult:
    """One host's `lldpctl -f json` (`lldpcli -f json show neighbors`): each
    interface's neighbour system name is the switch, its port id the port.
    `rail_of` maps a netdev to its RDMA device (ens1np0 -> mlx5_0) so rails
    read like the burn-in's; without it the netdev names the rail."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise FabricMapError(f"not lldpctl JSON: {exc}") from None
    lldp = doc.get("lldp") if isinstance(doc, dict) else None
    if not isinstance(lldp, dict):
        raise FabricMapError("not lldpctl JSON: no top-level 'lldp' object")
    ifaces = lldp.get("interface") or []
    # lldpd writes one interface as an object keyed by name, several as a list of those
    items = ifaces if isinstance(ifaces, list) else [ifaces]
    out = MapResult()
    seen: dict[str, tuple[str, str, str, str]] = {}
    for item in items:
        if not isinstance(item, dict):
            raise FabricMapError("lldp.interface: expected objects keyed by interface name")
        for ifname, info in item.items():
            if not isinstance(info, dict):
                raise FabricMapError(f"lldp.interface.{ifname}: not an object")
            chassis = info.get("chassis") or {}
            names = [k for k, v in chassis.items() if isinstance(v, dict)] if isinstance(chassis, dict) else []
            switch = names[0] if names else ((chassis.get("id") or {}).get("value") if isinstance(chassis, dict) else None)
            port = info.get("port") or {}
            pid = port.get("id") if isinstance(port, dict) else None
            port_name = (pid.get("value") if isinstance(pid, dict) else pid) or ""
            if not switch:
                out.skipped.append(ifname)
                continue
            rail = (rail_of or {}).get(ifname, ifname)
            if rail in seen and seen[rail][2] != switch:
                raise FabricMapError(f"{ifname}: two different neighbours ({seen[rail][2]}, {switch})")
            seen.setdefault(rail, (node, rail, str(switch), str(port_name)))
    out.rows = sorted(seen.values())
    return out


def netdev_rails(sysfs: str = "/sys/class/net") -> dict[str, str]:
    """netdev -> RDMA device on this host (ens1np0 -> mlx5_0), from sysfs."""
    import os

    out = {}
    try:
        names = os.listdir(sysfs)
    except OSError:
        return out
    for ifname in names:
        try:
            devs = os.listdir(os.path.join(sysfs, ifname, "device", "infiniband"))
        except OSError:
            continue
        if len(devs) == 1:
            out[ifname] = devs[0]
    return out
