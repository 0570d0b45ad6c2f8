"""Slurm's view of this node that `[[groups]]` match on: its partitions and
features, kept in `<state_dir>/facts/<node>.json` so hooks need no slurmctld
call to know them.

Why a file: partition membership and features live in slurmctld (slurm.conf
NodeName/PartitionName lines, NodeSets, `scontrol update node features=`); a
prolog asking slurmctld before every job is what this project avoids. So a
hook reads the file and asks Slurm (one `scontrol show node NAME`, or the
REST node list) only when there is no file (any hook), or it is older than
hooks.node_facts_max_age_s (epilog and health check, never the prolog); after
a failed ask, hooks wait RETRY_S before the next. SLURM_JOB_PARTITION is not
used: a group describes the node, and the prolog (which has a job) and the
health check (which has none) must judge a node by the same settings.

The file steers which settings apply, so it is read and written only where the
state dir is root-only (the hooks' rule for the state dir); elsewhere groups
on partition/feature are not applied and the hook says so.
Format: {"node", "time" (when Slurm said so; 0: never), "tried" (last ask),
"partitions": [...], "features": [...], "error"}.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

FACTS_DIR = "facts"
RETRY_S = 300.0
MAX_BYTES = 64 << 10


@dataclass(frozen=True)
class Facts:
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    time: float = 0.0        # when Slurm said so; 0: never known
    tried: float = 0.0       # last time we asked
    error: str = ""          # why the last ask failed

    @property
    def known(self) -> bool:
        return self.time > 0


def facts_path(state_dir: str, node: str) -> str:
    return os.path.join(state_dir, FACTS_DIR, f"{node}.json")


def read(state_dir: str, node: str) -> Facts | None:
    """The node's facts file, or None when missing or unreadable (a bad file
    only means asking Slurm again)."""
    from .fsroot import load_json_text, read_regular

    try:
        doc = load_json_text(read_regular(facts_path(state_dir, node), MAX_BYTES, nofollow=True))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("node") != node:
        return None
    t, tried = doc.get("time"), doc.get("tried")
    if not isinstance(t, (int, float)) or not isinstance(tried, (int, float)):
        return None
    from .slurm.schema.nodes import name_list

    return Facts(name_list(doc.get("partitions")), name_list(doc.get("features")), float(t), float(tried),
                 str(doc.get("error") or ""))


def write(state_dir: str, node: str, facts: Facts) -> None:
    from .atomic import ensure_dir, write_text

    path = facts_path(state_dir, node)
    ensure_dir(os.path.dirname(path))
    write_text(path, json.dumps({"node": node, "time": facts.time, "tried": facts.tried,
                                 "partitions": list(facts.partitions), "features": list(facts.features),
                                 "error": facts.error}))


def fetch(config, node: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Ask Slurm, through the configured adapter (its timeouts and retries;
    the hooks' one: never pyslurm, see slurm.get_adapter)."""
    from .slurm import get_adapter

    adapter = get_adapter(config, hook=True)
    return adapter.node_facts(node)


def current(config, node: str, refresh_stale: bool, trusted: bool, log=None) -> Facts | None:
    """The node's facts: from the file; asked from Slurm when missing (or stale
    and refresh_stale), at most once per RETRY_S after a failure. None: unknown."""
    state_dir = config["hooks"]["state_dir"]
    if not trusted:
        return None
    facts = read(state_dir, node)
    now = time.time()
    stale = facts is None or not facts.known or (
        refresh_stale and now - facts.time > config["hooks"]["node_facts_max_age_s"])
    if stale and (facts is None or now - facts.tried >= RETRY_S or facts.tried > now):
        try:
            partitions, features = fetch(config, node)
            facts = Facts(partitions, features, now, now)
        except Exception as exc:  # noqa: BLE001 - Slurm down or odd output: keep what we knew, say why
            if log is not None:
                log.warning("node %s: cannot read its partitions/features from Slurm: %s", node, exc)
            old = facts or Facts()
            facts = Facts(old.partitions, old.features, old.time, now, str(exc)[:300])
        try:
            write(state_dir, node, facts)
        except OSError as exc:
            if log is not None:
                log.warning("node %s: cannot record its partitions/features: %s", node, exc)
    return facts if facts is not None and facts.known else None


def node_config(config, node: str, *, hook: str | None = None, trusted: bool = True, log=None):
    """The config this node sees (config.for_node), with its partitions and
    features when some group needs them. hook: the epilog and health check
    refresh stale facts; the prolog and commands only fetch missing ones."""
    partitions = features = None
    if config.needs_facts():
        facts = current(config, node, refresh_stale=hook in ("epilog", "healthcheck"), trusted=trusted, log=log)
        if facts is not None:
            partitions, features = set(facts.partitions), set(facts.features)
    merged = config.for_node(node, partitions, features)
    if merged.undecided and log is not None:
        why = "state dir not root-only" if not trusted else "partitions/features unknown"
        log.warning("node %s: groups %s not applied (%s)", node, ", ".join(merged.undecided), why)
    return merged
