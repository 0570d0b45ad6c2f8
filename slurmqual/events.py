"""Per-node event spool: hooks and requalify record drains, resumes, guard
holds and requalify outcomes as small files under `<state_dir>/events/`, which
`slurmqual history` moves into the store. Hooks run on compute nodes that have
no store (and must not open SQLite before every job); a file per event needs
no lock and survives a crash between writing and ingesting.
"""

from __future__ import annotations

import json
import os
import secrets
import time

KINDS = ("drain", "resume", "guard_hold", "error_hold", "requalify")


def spool_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "events")


def record(state_dir: str, node: str, kind: str, detail: str, when: float | None = None,
           source: str = "hook") -> str:
    """Spool one event; returns its path. Raises OSError (callers log and go on)."""
    from .atomic import ensure_dir, write_text

    if not node or "/" in node or node.startswith("."):
        raise ValueError(f"unusable node name {node!r}")
    when = time.time() if when is None else when
    d = spool_dir(state_dir)
    ensure_dir(d)
    path = os.path.join(d, f"{when:.6f}-{node}-{secrets.token_hex(3)}.json")
    write_text(path, json.dumps({"node": node, "time": when, "kind": kind, "detail": f"{source}: {detail}"}))
    return path


def pending(state_dir: str) -> list[tuple[str, dict]]:
    """Spooled events, oldest first; unreadable files are skipped (and kept for a person to look at)."""
    d = spool_dir(state_dir)
    try:
        names = sorted(e for e in os.listdir(d) if e.endswith(".json") and not e.startswith("."))
    except OSError:
        return []
    out = []
    for name in names:
        try:
            with open(os.path.join(d, name), encoding="utf-8") as fh:
                ev = json.load(fh)
            if not isinstance(ev, dict) or not {"node", "time", "kind"} <= set(ev):
                continue
            out.append((os.path.join(d, name), ev))
        except (OSError, ValueError):
            continue
    return out


def ingest(store, state_dir: str) -> int:
    """Move spooled events into the store (one transaction), then delete their files."""
    items = pending(state_dir)
    if not items:
        return 0
    store.add_events([(str(ev["node"]), float(ev["time"]), str(ev["kind"]), str(ev.get("detail") or ""), None)
                      for _p, ev in items])
    for path, _ev in items:
        try:
            os.unlink(path)
        except OSError:
            pass
    return len(items)
