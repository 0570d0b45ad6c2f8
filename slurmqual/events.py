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

KINDS = ("drain", "resume", "guard_hold", "error_hold", "requalify",
         # the repair ladder (remediation.py) and hardware swaps (hwid.py)
         "warn", "reset", "reset_wait", "reboot", "reboot_hold", "escalate", "rma", "swap",
         # a job's own preflight (preflight/flow.py)
         "preflight")


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


def _valid(ev: object) -> bool:
    """The shape record() writes: a node name, a numeric time, a known kind, a text detail."""
    from .names import why_bad

    return (isinstance(ev, dict) and why_bad(ev.get("node")) is None and ev.get("kind") in KINDS
            and isinstance(ev.get("time"), (int, float)) and not isinstance(ev.get("time"), bool)
            and isinstance(ev.get("detail", ""), str))


def _spool(state_dir: str) -> tuple[list[tuple[str, dict]], list[str]]:
    d = spool_dir(state_dir)
    try:
        names = sorted(e for e in os.listdir(d) if e.endswith(".json") and not e.startswith("."))
    except OSError:
        return [], []
    out, bad = [], []
    for name in names:
        try:
            with open(os.path.join(d, name), encoding="utf-8") as fh:
                ev = json.load(fh)
        except (OSError, ValueError):
            ev = None
        if _valid(ev):
            out.append((os.path.join(d, name), ev))
        else:
            bad.append(name)
    return out, bad


def pending(state_dir: str) -> list[tuple[str, dict]]:
    """Spooled events, oldest first; unreadable or malformed files are skipped
    (and kept for a person to look at: see malformed())."""
    return _spool(state_dir)[0]


def malformed(state_dir: str) -> list[str]:
    """Spool files that are not events record() wrote (history names them)."""
    return _spool(state_dir)[1]


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
