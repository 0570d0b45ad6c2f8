"""Fleet version inventory: which driver / NIC firmware / kernel / NCCL each
node runs, and which nodes differ from the majority. Mismatched sets cause
loss spikes that look like hyperparameter problems, so name the odd ones out."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

FIELDS = ("driver", "nic_fw", "kernel", "nccl")


@dataclass
class Inventory:
    versions: dict[str, dict[str, str]]                  # node -> field -> version
    majority: dict[str, str | None] = field(default_factory=dict)
    outliers: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> field -> its version
    unreadable: list[str] = field(default_factory=list)  # state files we could not parse

    def to_dict(self) -> dict:
        return {"majority": self.majority, "outliers": self.outliers, "nodes": self.versions,
                "unreadable": self.unreadable}


def read_state_versions(state_dir: str) -> tuple[dict[str, dict[str, str]], list[str]]:
    """node -> versions the hooks recorded (nodestate.py), and the state files
    that could not be read."""
    from .nodestate import read_all

    states, bad = read_all(state_dir)
    return {node: {k: v for k, v in st.versions.items() if k in FIELDS} for node, st in states.items()}, bad


def judge(versions: dict[str, dict[str, str]]) -> tuple[dict[str, str | None], dict[str, dict[str, str]]]:
    """Majority value per field, and each node's fields that differ from it.
    A field a node did not report is not an outlier (unknown is not different)."""
    majority: dict[str, str | None] = {}
    outliers: dict[str, dict[str, str]] = {}
    for f in FIELDS:
        counts = Counter(v[f] for v in versions.values() if f in v)
        if not counts:
            majority[f] = None
            continue
        # Ties break on the version string so the answer does not depend on dict order.
        top = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
        majority[f] = top
        for node, v in versions.items():
            if f in v and v[f] != top:
                outliers.setdefault(node, {})[f] = v[f]
    return majority, outliers


def build(state_dir: str, nccl: dict[str, str] | None = None) -> Inventory:
    """Inventory from the state dir, with NCCL versions (from burn-in) merged in."""
    versions, bad = read_state_versions(state_dir)
    for node, ver in (nccl or {}).items():
        if ver:
            versions.setdefault(node, {})["nccl"] = ver
    majority, outliers = judge(versions)
    return Inventory(versions, majority, outliers, bad)


def render(inv: Inventory) -> str:
    lines = [f"{len(inv.versions)} nodes"]
    for f in FIELDS:
        lines.append(f"  {f:<7} majority: {inv.majority.get(f) or '-'}")
    if inv.outliers:
        lines.append("differ from the majority:")
        for node in sorted(inv.outliers):
            diffs = ", ".join(f"{k}={v} (majority {inv.majority[k]})" for k, v in sorted(inv.outliers[node].items()))
            lines.append(f"  {node}: {diffs}")
    else:
        lines.append("all nodes match the majority")
    for name in inv.unreadable:
        lines.append(f"warning: unreadable state file {name}")
    return "\n".join(lines)
