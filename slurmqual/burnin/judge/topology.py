"""Which switch each node, or each NIC (rail) of a node, hangs off.

Three inputs, one result (`Topology`):

- Slurm's ``topology.conf`` (tree plugin: ``SwitchName=leaf1 Nodes=gpu[01-16]``,
  ``SwitchName=spine Switches=leaf[1-4]``; block plugin: ``BlockName=b1 Nodes=...``),
- Slurm's ``topology.yaml`` (25.05+; the ``cluster_default`` topology, else the
  first one, of type tree or block),
- a fabric map CSV ``node,rail,switch[,port]`` (what `slurmqual fabric map`
  writes from iblinkinfo or lldpctl): per NIC, for rail-optimised fabrics where
  every NIC of a node lands on a different leaf.

A malformed file is a `TopologyError` naming the file and line; it never
produces a partial map that would blame the wrong switch.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field


class TopologyError(ValueError):
    pass


@dataclass
class Topology:
    source: str
    # node -> the leaf (or block) the whole node hangs off (Slurm's files)
    node_switch: dict[str, str] = field(default_factory=dict)
    # (node, rail) -> the leaf that NIC hangs off (fabric map)
    rail_switch: dict[tuple[str, str], str] = field(default_factory=dict)
    # switch -> its parent switch (tree), for reports
    parent: dict[str, str] = field(default_factory=dict)

    # rail -> node -> leaf_of(node, rail), built once (leaves())
    _leaves: dict[str | None, dict[str, str]] = field(default_factory=dict, repr=False, compare=False)

    def leaf_of(self, node: str, rail: str | None = None) -> str | None:
        """The switch a measurement of `node` (on `rail`, if any) goes through first."""
        if rail is not None:
            sw = self.rail_switch.get((node, rail))
            if sw is not None:
                return sw
        return self.node_switch.get(node)

    def leaves(self, rail: str | None) -> dict[str, str]:
        """node -> leaf_of(node, rail) for every node that has one, as one
        dict: a switch search asks it of 16k nodes per key (a lookup, not a
        call). Built once, from the map as read (it is not changed after)."""
        if rail is None:
            return self.node_switch
        if not self._leaves:
            per: dict[str, dict[str, str]] = {}
            for (node, r), sw in self.rail_switch.items():
                per.setdefault(r, {})[node] = sw
            self._leaves.update({r: {**self.node_switch, **m} for r, m in per.items()})
        return self._leaves.get(rail, self.node_switch)


def switch_of(topology: Topology) -> dict[str, str]:
    """node -> switch: the node's leaf; for a per-rail map without node
    leaves, the leaf of the node's first rail (in a rail-optimised fabric
    the rail-0 leaf names the node's scalable unit)."""
    out = dict(topology.node_switch)
    for (node, rail), sw in sorted(topology.rail_switch.items()):
        out.setdefault(node, sw)
    return out


def load(path: str) -> Topology:
    """Any of the three forms, told apart by name and content."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(64 << 20)
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{path}: unreadable topology ({getattr(exc, 'strerror', None) or exc})") from None
    return parse(text, path)


def parse(text: str, where: str = "topology") -> Topology:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    if where.endswith((".yaml", ".yml")) or first == "---" or first.startswith("- topology"):
        topo = parse_yaml(text, where)
    elif where.endswith(".csv") or first.lower().replace(" ", "").startswith("node,rail,switch"):
        topo = parse_csv(text, where)
    else:
        topo = parse_conf(text, where)
    if not topo.node_switch and not topo.rail_switch:
        raise TopologyError(f"{where}: no node is attached to any switch")
    return topo


# -- hostlists ----------------------------------------------------------------

def _hosts(expr: str, where: str) -> list[str]:
    import hostlist

    try:
        names = hostlist.expand_hostlist(expr.strip())
    except hostlist.BadHostlist as exc:
        raise TopologyError(f"{where}: bad hostlist {expr!r}: {exc}") from None
    if not names:
        raise TopologyError(f"{where}: empty hostlist")
    return names


def _attach(topo: Topology, node: str, switch: str, where: str) -> None:
    old = topo.node_switch.get(node)
    if old is not None and old != switch:
        raise TopologyError(f"{where}: node {node} is under both {old} and {switch}")
    topo.node_switch[node] = switch


def _tree(topo: Topology, leaves: dict[str, tuple[list[str], str]], children: dict[str, tuple[list[str], str]]) -> None:
    """Leaves' nodes and parents' children, checked: every child switch exists."""
    known = set(leaves) | set(children)
    for sw, (nodes, where) in leaves.items():
        for n in nodes:
            _attach(topo, n, sw, where)
    for sw, (kids, where) in children.items():
        for k in kids:
            if k not in known:
                raise TopologyError(f"{where}: switch {sw} names child switch {k}, which is not defined")
            topo.parent[k] = sw


# -- topology.conf ----------------------------------------------------------------

_CONF_KEYS = {"switchname", "switches", "nodes", "linkspeed", "blockname", "blocksizes"}


def parse_conf(text: str, where: str = "topology.conf") -> Topology:
    """Slurm's topology.conf (keys are case-insensitive, like Slurm's parser)."""
    topo = Topology("topology.conf")
    leaves: dict[str, tuple[list[str], str]] = {}
    parents: dict[str, tuple[list[str], str]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        here = f"{where}:{lineno}"
        kv: dict[str, str] = {}
        for tok in line.split():
            k, eq, v = tok.partition("=")
            if not eq or not v:
                raise TopologyError(f"{here}: expected Key=Value, got {tok!r}")
            if k.lower() not in _CONF_KEYS:
                raise TopologyError(f"{here}: unknown key {k!r}")
            kv[k.lower()] = v
        name = kv.get("switchname") or kv.get("blockname")
        if name is None:
            if set(kv) == {"blocksizes"}:
                continue
            raise TopologyError(f"{here}: a line needs SwitchName= or BlockName=")
        if name in leaves or name in parents:
            raise TopologyError(f"{here}: switch {name} defined twice")
        if "nodes" in kv:
            leaves[name] = (_hosts(kv["nodes"], here), here)
        if "switches" in kv:
            parents[name] = (_hosts(kv["switches"], here), here)
    _tree(topo, leaves, parents)
    return topo


# -- topology.yaml -------------------------------------------------------------

def parse_yaml(text: str, where: str = "topology.yaml") -> Topology:
    """Slurm 25.05+ topology.yaml: the cluster_default topology (else the first);
    tree (switches: switch/children/nodes) or block (blocks: block/nodes)."""
    doc = _yaml(text, where)
    if not isinstance(doc, list) or not doc or not all(isinstance(t, dict) for t in doc):
        raise TopologyError(f"{where}: expected a list of topologies (- topology: NAME)")
    chosen = next((t for t in doc if t.get("cluster_default") is True), doc[0])
    name = chosen.get("topology", "?")
    topo = Topology(f"topology.yaml:{name}")
    here = f"{where}: topology {name}"
    if "tree" in chosen:
        tree = chosen["tree"]
        switches = tree.get("switches") if isinstance(tree, dict) else None
        switches = [switches] if isinstance(switches, dict) else switches
        if not isinstance(switches, list) or not all(isinstance(s, dict) and s.get("switch") for s in switches):
            raise TopologyError(f"{here}: tree.switches must be a list of {{switch: NAME, nodes|children: HOSTLIST}}")
        leaves = {s["switch"]: (_hosts(str(s["nodes"]), here), here) for s in switches if s.get("nodes")}
        parents = {s["switch"]: (_hosts(str(s["children"]), here), here) for s in switches if s.get("children")}
        _tree(topo, leaves, parents)
    elif "block" in chosen:
        block = chosen["block"]
        blocks = block.get("blocks") if isinstance(block, dict) else None
        blocks = [blocks] if isinstance(blocks, dict) else blocks
        if not isinstance(blocks, list) or not all(isinstance(b, dict) and b.get("block") and b.get("nodes")
                                                   for b in blocks):
            raise TopologyError(f"{here}: block.blocks must be a list of {{block: NAME, nodes: HOSTLIST}}")
        for b in blocks:
            for n in _hosts(str(b["nodes"]), here):
                _attach(topo, n, str(b["block"]), here)
    else:
        kinds = sorted(k for k in chosen if k not in ("topology", "cluster_default"))
        raise TopologyError(f"{here} is {'/'.join(kinds) or 'empty'}: only tree and block topologies name switches")
    return topo


def _scalar(s: str, where: str):
    s = s.strip()
    if s[:1] in "\"'":
        if len(s) < 2 or s[-1] != s[0]:
            raise TopologyError(f"{where}: unterminated quoted string")
        return s[1:-1]
    if s.startswith("["):
        if not s.endswith("]"):
            raise TopologyError(f"{where}: unterminated [list]")
        return [_scalar(x, where) for x in s[1:-1].split(",") if x.strip()]
    if s.startswith(("{", "&", "*", "!", "|", ">")):
        raise TopologyError(f"{where}: YAML feature {s[0]!r} not supported in topology.yaml")
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~", ""):
        return None
    return int(s) if re.fullmatch(r"-?\d+", s) else s


def _yaml(text: str, where: str):
    """The block-style YAML subset topology.yaml uses: mappings, sequences,
    plain/quoted scalars, [flow lists], comments. Anything else is an error."""
    lines = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise TopologyError(f"{where}:{lineno}: tab in indentation")
        body = re.sub(r"(^|\s)#.*$", "", raw) if "#" in raw else raw
        if not body.strip() or body.strip() in ("---", "..."):
            continue
        lines.append((len(body) - len(body.lstrip()), body.strip(), f"{where}:{lineno}"))
    pos = 0

    def block(indent: int):
        nonlocal pos
        if pos >= len(lines):
            return None
        if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
            out = []
            while pos < len(lines) and lines[pos][0] == indent and (lines[pos][1].startswith("- ") or lines[pos][1] == "-"):
                ind, body, here = lines[pos]
                rest = body[1:].lstrip()
                if not rest:
                    pos += 1
                    out.append(block(lines[pos][0]) if pos < len(lines) and lines[pos][0] > ind else None)
                    continue
                # "- key: v" starts a mapping whose other keys sit at ind + 2
                lines[pos] = (ind + 2, rest, here)
                out.append(block(ind + 2) if _is_key(rest) else _item(rest, here))
            return out
        out_map: dict = {}
        while pos < len(lines) and lines[pos][0] == indent and not lines[pos][1].startswith("- "):
            _ind, body, here = lines[pos]
            if not _is_key(body):
                raise TopologyError(f"{here}: expected 'key: value', got {body!r}")
            key, _, val = body.partition(":")
            key = key.strip().strip("\"'")
            if key in out_map:
                raise TopologyError(f"{here}: key {key!r} given twice")
            pos += 1
            if val.strip():
                out_map[key] = _scalar(val, here)
            elif pos < len(lines) and (lines[pos][0] > indent or
                                       (lines[pos][0] == indent and lines[pos][1].startswith("- "))):
                out_map[key] = block(lines[pos][0])
            else:
                out_map[key] = None
        if pos < len(lines) and lines[pos][0] > indent:
            raise TopologyError(f"{lines[pos][2]}: unexpected indentation")
        return out_map

    def _item(rest: str, here: str):
        nonlocal pos
        pos += 1
        return _scalar(rest, here)

    doc = block(lines[0][0]) if lines else None
    if pos < len(lines):
        raise TopologyError(f"{lines[pos][2]}: unexpected indentation")
    return doc


def _is_key(body: str) -> bool:
    return bool(re.match(r"""^("[^"]*"|'[^']*'|[^\s:"'][^:]*):(\s|$)""", body))


# -- fabric map CSV -------------------------------------------------------------

CSV_HEADER = ("node", "rail", "switch", "port")


def parse_csv(text: str, where: str = "fabric map") -> Topology:
    """``node,rail,switch[,port]`` (header required; '#' comment lines). An
    empty rail attaches the whole node."""
    from ...names import BadNodeName, check

    topo = Topology("fabric map")
    if '"' in text or "\r" in text or "\0" in text:
        rows = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].lstrip().startswith("#")]
    else:  # no quoting, no CR, no NUL: csv's rows are the lines split at commas (131,072 rows at 16k x 8)
        rows = [line.split(",") for line in text.split("\n") if line and not line.lstrip().startswith("#")]
    if not rows or [c.strip().lower() for c in rows[0][:3]] != list(CSV_HEADER[:3]):
        raise TopologyError(f"{where}: fabric map needs the header node,rail,switch[,port]")
    good: set[str] = set()  # names checked (a node has a row per rail: 131,072 rows at 16k x 8)
    rail_switch = topo.rail_switch
    for i, row in enumerate(rows[1:], 2):
        if len(row) not in (3, 4) or not row[0].strip() or not row[2].strip():
            raise TopologyError(f"{where}: row {i}: expected node,rail,switch[,port], got {','.join(row)!r}")
        node, rail, switch = row[0].strip(), row[1].strip(), row[2].strip()
        if node not in good:
            try:
                check(node)
            except BadNodeName as exc:
                raise TopologyError(f"{where}: row {i}: {exc}") from None
            good.add(node)
        if not rail:
            _attach(topo, node, switch, f"{where}: row {i}")
            continue
        old = rail_switch.get((node, rail))
        if old is not None and old != switch:
            raise TopologyError(f"{where}: row {i}: {node} {rail} is on both {old} and {switch}")
        rail_switch[(node, rail)] = switch
    return topo


def write_csv(rows: list[tuple[str, str, str, str]]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_HEADER)
    w.writerows(sorted(rows))
    return out.getvalue()


def from_config(path: str | None) -> Topology | None:
    """The `[burnin] topology` file, or None when none is configured."""
    if not path:
        return None
    if not os.path.exists(path):
        raise TopologyError(f"{path}: topology file not found")
    return load(path)
