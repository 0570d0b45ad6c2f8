"""Per-node state files: `<state_dir>/nodes/<node>.json`, the one reader and
writer for them.

Hooks of different levels run different checks (the prolog the fast ones, the
healthcheck the standard ones), so a write *merges*: each check keeps its own
latest result (with when and by which hook it was judged), versions keep every
value some check recorded, and a hook never erases what another hook learnt.
The file also remembers slurmqual's own hook drain of the node, so a passing
epilog/healthcheck needs no slurmctld call unless we drained the node.

Writers hold an flock on a sidecar lock file (prolog, epilog and healthcheck
may overlap on one node); readers never lock: the file is replaced atomically.
Also the requalify markers (`<state_dir>/requalify/<node>.json`, while
requalify runs on the node; `status` shows it "pending") and its background logs.
Format (JSON object): node, time, hook, status, checks (list), versions,
drain ({reason, time, hook} or null), error_since (float or null),
drain_known (whether `drain` reflects what Slurm said; a new file does not know),
remediation (the repair ladder's actions on the node, oldest first, each
{time, action, check, detail, gpus, hook}; kept REMEDIATION_KEEP_S),
hardware (the node's hardware identity: hwid.py) and swap (a detected part
swap not yet requalified: {time, changes, failed} or null; failed: the last
requalify since the swap failed, {time, reason}, or absent) and preflight
(the last `slurmqual preflight` outcome on the node: {time, job, verdict,
reason, score, drained}, or null).
"""

from __future__ import annotations

import os
import time
from .leanjson import dumps, loads  # the prolog reads and writes this file before every job: no `import json`
from .records import dataclass, field

TYPE_CHECKING = False  # as in checks/__init__.py: collections.abc imports collections (~1.5 ms a prolog)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

_RANK = {"pass": 0, "na": 0, "skip": 0, "warn": 1, "error": 2, "fail": 3}
VERSION_FIELDS = ("driver", "nic_fw", "kernel", "nccl")


class StateError(ValueError):
    """A state file exists but cannot be read."""


@dataclass
class NodeState:
    node: str
    time: float = 0.0                       # last write
    hook: str = ""                          # hook of the last write
    checks: dict[str, dict] = field(default_factory=dict)   # name -> result dict (+ time, hook)
    versions: dict[str, str] = field(default_factory=dict)
    drain: dict | None = None               # our own hook drain: {reason, time, hook}
    error_since: float | None = None        # first run where an error held our drain
    drain_known: bool = False               # a hook has asked Slurm since this file began
    remediation: list[dict] = field(default_factory=list)   # ladder actions, oldest first
    hardware: dict = field(default_factory=dict)            # identity: hwid.py
    swap: dict | None = None                                # detected swap awaiting requalify
    preflight: dict | None = None                           # last `slurmqual preflight` outcome here

    @property
    def status(self) -> str:
        worst = "pass"
        for c in self.checks.values():
            if _RANK.get(c.get("status", "pass"), 0) > _RANK[worst]:
                worst = c["status"]
        return worst

    @property
    def failing(self) -> list[str]:
        return [n for n, c in self.checks.items() if c.get("status") == "fail"]

    def failing_since(self, since: float) -> list[dict]:
        """Failing checks judged at or after `since`."""
        return [c for c in self.checks.values() if c.get("status") == "fail" and c.get("time", self.time) >= since]

    def to_dict(self) -> dict:
        return {"node": self.node, "time": self.time, "hook": self.hook, "status": self.status,
                "checks": list(self.checks.values()), "versions": dict(self.versions), "drain": self.drain,
                "error_since": self.error_since, "drain_known": self.drain_known,
                "remediation": list(self.remediation), "hardware": dict(self.hardware), "swap": self.swap,
                "preflight": self.preflight}

    @classmethod
    def from_dict(cls, data: dict) -> "NodeState":
        """A state read back from its file; StateError naming the first field
        whose shape is wrong (such a file is never half-trusted)."""
        if not isinstance(data, dict) or not isinstance(data.get("node"), str) or not data["node"]:
            raise StateError("not a node state object")
        t = _number(data, "time", 0.0)
        hook = data.get("hook") or ""
        raw_checks = data.get("checks", [])
        if not isinstance(hook, str):
            raise StateError("'hook' is not a string")
        if not isinstance(raw_checks, list):
            raise StateError("'checks' is not a list")
        checks: dict[str, dict] = {}
        for c in raw_checks:
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("status"), str):
                raise StateError(f"a check entry is not {{name, status, ...}}: {str(c)[:60]!r}")
            checks[c["name"]] = dict(c, time=_number(c, "time", t), hook=str(c.get("hook", hook)))
        versions = data.get("versions", {})
        if not isinstance(versions, dict):
            raise StateError("'versions' is not an object")
        drain = data.get("drain")
        if drain is not None and not isinstance(drain, dict):
            raise StateError("'drain' is neither an object nor null")
        err = data.get("error_since")
        return cls(data["node"], t, hook, checks, {k: str(v) for k, v in versions.items() if v not in (None, "")},
                   drain, float(err) if isinstance(err, (int, float)) and not isinstance(err, bool) else None,
                   data.get("drain_known") is True, *_ladder_fields(data), _preflight_field(data))

    def merge(self, hook: str, results: Iterable, versions: dict | None, now: float) -> None:
        """Record one hook run: its checks replace the same checks, others stay."""
        for r in results:
            d = r.to_dict() if hasattr(r, "to_dict") else dict(r)
            self.checks[d["name"]] = dict(d, time=now, hook=hook)
        for k, v in (versions or {}).items():
            if v not in (None, ""):
                self.versions[k] = str(v)
        self.time = now
        self.hook = hook


def _number(d: dict, key: str, default: float) -> float:
    v = d.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise StateError(f"'{key}' is not a number")
    return float(v)


def _preflight_field(data: dict) -> dict | None:
    """The last preflight's {time, job, verdict, reason, score, drained} (absent in older files)."""
    pf = data.get("preflight")
    if pf is not None and not (isinstance(pf, dict) and isinstance(pf.get("time"), (int, float))
                               and isinstance(pf.get("verdict"), str)):
        raise StateError("'preflight' is neither {time, verdict, ...} nor null")
    return pf


def _ladder_fields(data: dict) -> tuple[list[dict], dict, dict | None]:
    """remediation, hardware, swap of a state file (absent in older files)."""
    history = data.get("remediation", [])
    if not isinstance(history, list) or not all(isinstance(h, dict) and isinstance(h.get("time"), (int, float))
                                                 for h in history):
        raise StateError("'remediation' is not a list of {time, action, ...}")
    hardware = data.get("hardware", {})
    if not isinstance(hardware, dict):
        raise StateError("'hardware' is not an object")
    swap = data.get("swap")
    if swap is not None and not isinstance(swap, dict):
        raise StateError("'swap' is neither an object nor null")
    if swap is not None and not isinstance(swap.get("failed", {}), dict):
        raise StateError("'swap.failed' is not an object")
    return list(history), dict(hardware), swap


def nodes_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "nodes")


def path(state_dir: str, node: str) -> str:
    if not node or "/" in node or node.startswith("."):
        raise ValueError(f"unusable node name {node!r}")
    return os.path.join(nodes_dir(state_dir), f"{node}.json")


def read(state_dir: str, node: str) -> NodeState | None:
    """The node's state, None when it has none yet; StateError when unreadable
    or malformed (a file of another node included)."""
    target = path(state_dir, node)
    try:
        with open(target, encoding="utf-8") as fh:
            st = NodeState.from_dict(loads(fh.read()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:   # StateError is a ValueError
        raise StateError(f"{target}: {exc}") from None
    except RecursionError:
        raise StateError(f"{target}: JSON nested too deeply") from None
    if st.node != node:
        raise StateError(f"{target}: holds node {st.node!r}")
    return st


def read_all(state_dir: str, names: set[str] | None = None) -> tuple[dict[str, NodeState], list[str]]:
    """Every node's state (or those in `names`) and the names of the files we
    could not read or that are malformed (the callers say so: status,
    inventory, the burn-in's version pinning). The one way to list node files."""
    out: dict[str, NodeState] = {}
    bad: list[str] = []
    try:
        entries = sorted(os.listdir(nodes_dir(state_dir)))
    except OSError:
        return out, bad
    for entry in entries:
        if not entry.endswith(".json") or entry.startswith("."):
            continue
        if names is not None and entry[:-5] not in names:
            continue
        try:
            st = read(state_dir, entry[:-5])
        except ValueError:   # StateError, or a name nodestate.path refuses
            bad.append(entry)
            continue
        if st is not None:
            out[st.node] = st
    return out, bad


def node_count(state_dir: str) -> int:
    """How many nodes have a state file (the hook-drain guard's fleet size)."""
    try:
        return sum(1 for e in os.listdir(nodes_dir(state_dir)) if e.endswith(".json") and not e.startswith("."))
    except OSError:
        return 0


def update(state_dir: str, node: str, change: Callable[[NodeState], None], *, durable: bool = True,
           warn: Callable[[str], None] | None = None) -> NodeState:
    """Read (or start) the node's state, apply `change`, write it back, under the node's lock.
    An unreadable or malformed old file is replaced (and `warn` told why)
    rather than failing every later hook on the node. durable=False: no fsync (see record_run)."""
    import fcntl

    from .atomic import ensure_dir, write_text

    target = path(state_dir, node)
    ensure_dir(nodes_dir(state_dir))
    fd = os.open(os.path.join(nodes_dir(state_dir), f".{node}.lock"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            st = read(state_dir, node) or NodeState(node)
        except StateError as exc:
            if warn is not None:
                warn(f"replacing unusable node state file: {exc}")
            st = NodeState(node)
        change(st)
        write_text(target, dumps(st.to_dict()), durable=durable)
        return st
    finally:
        os.close(fd)  # closing releases the lock


def record_run(state_dir: str, node: str, hook: str, results: Iterable, versions: dict | None,
               now: float | None = None, warn: Callable[[str], None] | None = None) -> NodeState:
    """Merge one hook run's results. Every prolog writes this (before every
    job), so without an fsync: a job's start never waits on the disk behind
    the node's other I/O. A crash may lose the last results (or, on some
    filesystems, leave an empty file: read as unreadable, so the next hook
    asks Slurm again); drain records (`_set_drain` in hooks.py) stay durable."""
    now = time.time() if now is None else now
    results = list(results)
    return update(state_dir, node, lambda st: st.merge(hook, results, versions, now), durable=False, warn=warn)


REMEDIATION_KEEP_S = 90 * 86400.0   # longer than any cap or lemon window


def record_action(state_dir: str, node: str, entry: dict, now: float | None = None) -> NodeState:
    """Append one repair-ladder action (reset, reboot, escalate, rma, ...) to
    the node's history; durable (the caps count these)."""
    now = time.time() if now is None else now
    entry = dict(entry, time=entry.get("time", now))

    def change(st: NodeState) -> None:
        st.remediation = [h for h in st.remediation if now - float(h.get("time", 0)) <= REMEDIATION_KEEP_S]
        st.remediation.append(entry)

    return update(state_dir, node, change)


def record_hardware(state_dir: str, node: str, parts: dict[str, dict], now: float | None = None
                    ) -> tuple[NodeState, list[dict]]:
    """Compare the node's hardware identity with the kept one (hwid.py) and
    keep the new one; a swap (a part with another serial) is remembered in
    `swap` until requalify clears it. Returns the state and this run's swaps."""
    from . import hwid

    now = time.time() if now is None else now
    found: list[dict] = []

    def change(st: NodeState) -> None:
        found.extend(hwid.changes(st.hardware, parts) if st.hardware else [])
        if found:
            earlier = (st.swap or {}).get("changes", [])
            st.swap = {"time": now, "changes": earlier + found}
        st.hardware = hwid.merge(st.hardware, parts)

    return update(state_dir, node, change), found


def clear_swap(state_dir: str, node: str) -> NodeState:
    """Requalify passed the node: its swap is settled."""
    def change(st: NodeState) -> None:
        st.swap = None

    return update(state_dir, node, change)


def fail_swap(state_dir: str, node: str, reason: str, now: float | None = None) -> NodeState:
    """Requalify failed the swapped node, drained with `reason`: that reason now
    stands for the swap (hooks keep it), and `requalify --swapped` leaves the
    node to an admin until a new swap or a passing `requalify NODE`."""
    now = time.time() if now is None else now

    def change(st: NodeState) -> None:
        if st.swap is not None:
            st.swap = dict(st.swap, failed={"time": now, "reason": reason})

    return update(state_dir, node, change)


# -- requalify markers: `<state_dir>/requalify/<node>.json` while requalify runs on the node ----------

def requalify_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "requalify")


def mark_requalify(state_dir: str, nodes: list[str], run_id: str) -> None:
    """`status` shows these nodes "pending" until unmark_requalify."""
    from .atomic import ensure_dir, write_text

    ensure_dir(requalify_dir(state_dir))
    for n in nodes:
        path(state_dir, n)  # refuses a name that is not a file name
        write_text(os.path.join(requalify_dir(state_dir), f"{n}.json"),
                   dumps({"node": n, "id": run_id, "pid": os.getpid(), "time": time.time()}))


def unmark_requalify(state_dir: str, nodes: list[str]) -> None:
    for n in nodes:
        try:
            os.unlink(os.path.join(requalify_dir(state_dir), f"{n}.json"))
        except FileNotFoundError:
            pass


def requalifying(state_dir: str, node: str) -> bool:
    """Whether requalify runs on the node (inside its own maintenance reservation)."""
    return os.path.exists(os.path.join(requalify_dir(state_dir), f"{node}.json"))


def requalify_pending(state_dir: str) -> set[str]:
    """Nodes with a requalify marker (names that are not node names are ignored)."""
    from .names import why_bad

    try:
        entries = os.listdir(requalify_dir(state_dir))
    except OSError:
        return set()
    return {e[:-5] for e in entries if e.endswith(".json") and why_bad(e[:-5]) is None}


def requalify_log(state_dir: str, pid: int):
    """The log file of a background requalify (opened for appending)."""
    os.makedirs(requalify_dir(state_dir), exist_ok=True)
    return open(os.path.join(requalify_dir(state_dir), f"requalify-{pid}.log"), "a")
