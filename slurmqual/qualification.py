"""A node's qualification state, judged from what the head node already has:
Slurm's view (sinfo), the node's last hook result (state dir) and its last
burn-in (store). Pure: no I/O here, so `status` can judge 4,096 nodes fast."""

from __future__ import annotations

from dataclasses import dataclass, field

from .slurm.reason import is_ours

QUALIFIED, FAILED, PENDING, STALE, UNKNOWN, DOWN = "qualified", "failed", "pending", "stale", "unknown", "down"
STATES = (QUALIFIED, FAILED, PENDING, STALE, UNKNOWN, DOWN)
# Slurm says the node cannot run jobs at all: whatever its last burn-in said, it is not qualified now.
_DOWN_STATES = ("down", "unknown", "future", "fail", "failing")
_DOWN_FLAGS = ("NOT_RESPONDING", "FAIL", "POWERED_DOWN", "POWERING_DOWN")


@dataclass
class NodeFacts:
    """Everything known about one node, gathered in bulk by the caller."""

    name: str
    slurm_state: str = "unknown"          # e.g. "idle", "allocated", "down"
    slurm_flags: list[str] = field(default_factory=list)  # e.g. ["DRAIN"]
    reason: str = ""
    requalify_pending: bool = False
    last_check_time: float | None = None
    failing_checks: list[str] = field(default_factory=list)
    burnin_time: float | None = None
    burnin_verdict: str | None = None     # pass | fail | retest | untested
    score: float | None = None
    median: float | None = None
    baseline: float | None = None
    retest_note: str = ""                 # "retest round 1 of 2 submitted ...": its burn-in is still deciding


def drained_by_us(f: NodeFacts) -> bool:
    draining = "DRAIN" in (x.upper() for x in f.slurm_flags) or f.slurm_state.lower().startswith("drain")
    return draining and is_ours(f.reason)


def slurm_down(f: NodeFacts) -> bool:
    return f.slurm_state.lower() in _DOWN_STATES or bool({x.upper() for x in f.slurm_flags} & set(_DOWN_FLAGS))


def judge(f: NodeFacts, now: float, max_age_s: float) -> str:
    """Map the facts to one of STATES. Order matters: an in-flight
    requalification wins, then anything that says the node is bad, then a
    node Slurm cannot reach (down, not responding: never `qualified`)."""
    if f.requalify_pending:
        return PENDING
    if drained_by_us(f):
        return FAILED
    if slurm_down(f):
        return DOWN
    if f.burnin_verdict is None or f.burnin_time is None:
        return UNKNOWN
    if f.burnin_verdict == "fail":
        return FAILED
    if f.burnin_verdict == "retest" and f.retest_note:
        return PENDING
    if f.burnin_verdict != "pass":
        return UNKNOWN
    # A failing hook check after the burn-in means the node is no longer known good.
    if f.failing_checks and f.last_check_time is not None and f.last_check_time >= f.burnin_time:
        return FAILED
    if now - f.burnin_time > max_age_s:
        return STALE
    return QUALIFIED


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference
