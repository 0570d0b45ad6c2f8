"""`slurmqual rma NODE`: one JSON bundle a vendor can act on, built on the
head node from what slurmqual kept about the node (docs/REMEDIATION.md
"RMA bundle" documents the format). Reads only: the node's state file, its
Xid, counter and raw evidence files (rawevidence.py) under the state dir, the
event spool and the store."""

from __future__ import annotations

import glob
import os
import time

FORMAT = "slurmqual-rma/1"
COUNTER_SAMPLES = 200   # the newest readings per device and counter file


def _node_files(state_dir: str, sub: str, node: str, suffix: str) -> list[str]:
    """A check's files for the node: `<node><suffix>`, or `<node>-<tree hash><suffix>` for a node tree."""
    base = os.path.join(state_dir, sub)
    return sorted(set(glob.glob(os.path.join(glob.escape(base), f"{glob.escape(node)}{suffix}")))
                  | set(glob.glob(os.path.join(glob.escape(base), f"{glob.escape(node)}-*{suffix}"))))


def events_of(state_dir: str, store, node: str) -> list[dict]:
    """The node's events, oldest first: the store's and those still in the spool."""
    from . import events

    out = [dict(e) for e in (store.node_history(node) if store is not None else [])]
    out += [{"time": ev["time"], "kind": ev["kind"], "detail": ev.get("detail", ""), "run_id": None}
            for _p, ev in events.pending(state_dir) if ev.get("node") == node]
    return sorted(out, key=lambda e: float(e["time"]))


def bundle(config, node: str, store, now: float | None = None) -> dict:
    """Everything kept about `node`, as documented; raises StateError/ValueError on an unusable name."""
    from . import __version__
    from .nodestate import read

    state_dir = config["hooks"]["state_dir"]
    st = read(state_dir, node)
    history = events_of(state_dir, store, node)
    checks = list(st.checks.values()) if st is not None else []
    from . import counterwindow, rawevidence
    from .checks import xid

    xid_events, notes = [], []
    for path in _node_files(state_dir, "xid", node, ".json"):
        kept, note = xid.kept_events(path)
        xid_events += kept
        notes += [note] if note else []
    counters = {}
    for path in _node_files(state_dir, "counters", node, ".*.json"):
        readings, note = counterwindow.load(path)
        counters[os.path.basename(path)] = {dev: [[t, v] for t, v in samples[-COUNTER_SAMPLES:]]
                                            for dev, samples in readings.items()}
        notes += [note] if note else []
    raw = {"gpus": {}, "kernel_log": []}
    for path in _node_files(state_dir, "evidence", node, ".json"):
        kept, note = rawevidence.load(path)
        raw["gpus"].update(kept.get("gpus", {}))
        raw["kernel_log"] += kept.get("kernel_log", [])
        notes += [note] if note else []
    raw["kernel_log"].sort(key=lambda e: float(e.get("time", 0)))
    burnin = {}
    if store is not None:
        burnin = {"baselines": store.all_baselines([node]).get(node, {}),
                  "last": store.last_burnin([node]).get(node),
                  "gpus": store.gpu_history(node) if hasattr(store, "gpu_history") else []}
    ladder = st.remediation if st is not None else []
    return {
        "format": FORMAT,
        "node": node,
        "created": time.time() if now is None else now,
        "slurmqual": __version__,
        "hardware": st.hardware if st is not None else {},
        "swap": st.swap if st is not None else None,
        "versions": st.versions if st is not None else {},
        "failing_checks": [c for c in checks if c.get("status") in ("fail", "warn", "error")],
        "checks": checks,
        "evidence": [{"time": h["time"], "check": h.get("check"), "results": h["evidence"]}
                     for h in ladder if h.get("evidence")],
        "xid_events": sorted(xid_events, key=lambda e: e["time"]),
        "counter_history": counters,
        "raw_outputs": raw,
        "burnin": burnin,
        "remediation": ladder,
        "drain_history": [e for e in history if e["kind"] not in ("requalify",)],
        "requalify_history": [e for e in history if e["kind"] == "requalify"],
        "notes": notes,   # files that could not be read (their part of the bundle is missing)
    }
