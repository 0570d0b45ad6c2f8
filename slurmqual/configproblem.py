"""What a hook leaves behind when it cannot use the site config (refused:
writable by others; or unreadable/invalid), so an admin learns why the node's
checks stopped judging. The hook's own log line goes to syslog or stderr, and
slurmd keeps a hook's stderr only at debug2: on a node without syslog nobody
would see it.

Nothing in such a config is read, not its state dir nor its log file, so the
record goes to the built-in defaults: `<DEFAULT_STATE_DIR>/config-problems/
<node>.json` and, without syslog, one line in DEFAULT_LOG_FILE, each only
where the directory exists (`slurmqual install` made it) and root alone can
write. `status` and `install --check` show a record newer than the node's
last judged hook (the node file's time): a fixed config needs no clean-up.
"""

from __future__ import annotations

import json
import os
import time

DEFAULT_STATE_DIR = "/var/lib/slurmqual/state"
DEFAULT_LOG_FILE = "/var/log/slurmqual/slurmqual.log"
# Where the records go: the defaults above. A test suite (or a packaging
# sandbox) that runs real hooks as root points them elsewhere with these
# variables, so a hook it starts never writes into the machine's own /var.
RECORD_STATE_DIR = os.environ.get("SLURMQUAL_PROBLEM_STATE_DIR") or DEFAULT_STATE_DIR
RECORD_LOG_FILE = os.environ.get("SLURMQUAL_PROBLEM_LOG_FILE") or DEFAULT_LOG_FILE
SUBDIR = "config-problems"
MAX_RECORD_BYTES = 64 << 10


def _safe_dir(path: str) -> bool:
    from .security import root_only_ok

    return os.path.isdir(path) and root_only_ok(path, "dir") is None


def report(hook: str, node: str | None, problem: str, now: float | None = None) -> list[str]:
    """Log the problem (syslog or stderr), and where slurmd would drop stderr
    also in the default log file; record it for `status`. Never raises.
    Returns where it was written besides the log (for tests and callers)."""
    from .hooklog import SYSLOG_SOCKET, clean, setup

    now = time.time() if now is None else now
    setup(None).error("hook %s: no checks run: %s", hook, problem)
    written = []
    log_file = RECORD_LOG_FILE
    if not os.path.exists(SYSLOG_SOCKET) and _safe_dir(os.path.dirname(log_file)):
        try:
            from .hooklog import open_log_file

            with open_log_file(log_file) as fh:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
                fh.write(f"{stamp} slurmqual[{os.getpid()}] ERROR {clean(f'hook {hook}: no checks run: {problem}')}\n")
            written.append(log_file)
        except OSError:
            pass
    if node and _safe_dir(RECORD_STATE_DIR):
        try:
            from .atomic import ensure_dir, write_text

            d = os.path.join(RECORD_STATE_DIR, SUBDIR)
            ensure_dir(d)
            path = os.path.join(d, f"{node}.json")
            write_text(path, json.dumps({"node": node, "hook": hook, "time": now, "problem": problem[:1000]}))
            written.append(path)
        except OSError:
            pass
    return written


def read_all(state_dirs: list[str], names: set[str] | None = None) -> dict[str, dict]:
    """node -> its latest record over these state dirs (unreadable ones skipped)."""
    from .fsroot import read_regular

    out: dict[str, dict] = {}
    for state_dir in dict.fromkeys(state_dirs):
        d = os.path.join(state_dir, SUBDIR)
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for entry in entries:
            node = entry[:-5] if entry.endswith(".json") and not entry.startswith(".") else None
            if node is None or (names is not None and node not in names):
                continue
            try:
                rec = json.loads(read_regular(os.path.join(d, entry), MAX_RECORD_BYTES))
            except (OSError, ValueError):
                continue
            if (isinstance(rec, dict) and isinstance(rec.get("time"), (int, float))
                    and isinstance(rec.get("problem"), str)
                    and rec["time"] > out.get(node, {}).get("time", float("-inf"))):
                out[node] = {"hook": str(rec.get("hook", "?")), "time": float(rec["time"]), "problem": rec["problem"]}
    return out


def current(records: dict[str, dict], last_judged: dict[str, float | None]) -> dict[str, dict]:
    """The records newer than the node's last hook that ran with a usable config."""
    return {n: r for n, r in records.items() if r["time"] > (last_judged.get(n) or 0.0)}


def line(node: str, rec: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec["time"]))
    return f"{node}: {rec['hook']} at {when}: {rec['problem']}"
