"""The one place that decides "may slurmqual drain, re-reason or resume this
node". Hooks, the burn-in analysis, `slurmqual drain|resume`, requalify and
`status` all ask here, so the ownership rules cannot drift apart.

Who owns a drain is read from its reason:
- someone else's reason (admin, another tool, Slurm itself): never touched,
  except `resume --force` by an admin;
- `slurmqual: <check>: ...` where <check> is a node check: a *hook* drain; the
  hooks may re-reason it and resume it once the checks pass;
- any other `slurmqual: <what>: ...` (burnin, requalify, admin, internal): needs
  a person or requalify; hooks never replace or resume it.
- the repair ladder's (remediation.py) `slurmqual: reset|reboot: <check>: ...`
  is a hook drain too: the hooks resume it once every check passes; a drain
  the ladder's cap escalated (`slurmqual: <check>: after 2 reboots in 7d; ...`)
  the hooks may re-reason but never resume; `slurmqual: rma: ...` and
  `slurmqual: swap: ...` need a person or requalify.
Nodes Slurm or an admin is handling (down, rebooting, maintenance, powering)
are never drained, re-reasoned or resumed, except that a hook may drain a
node in the ladder's own reboot (`ladder_rebooting`) whose checks still fail.

Actors: "hook", "burnin", "requalify", "admin".

The fleet guards for hook drains and for the ladder's reboots live here too:
see `HookGuard` (and `reboot_guard`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from .slurm import reason as reasons

ACTORS = ("hook", "burnin", "requalify", "admin")


@dataclass(frozen=True)
class Decision:
    act: bool          # do the Slurm call
    why: str           # for logs and the admin ("" when act)
    noop: bool = False  # nothing to do (already in the wanted state): not a refusal

    def __bool__(self) -> bool:
        return self.act


def check_names() -> frozenset[str]:
    from .checks import REGISTRY

    return frozenset(REGISTRY)


def is_hook_reason(reason: str | None) -> bool:
    """A drain a node check made, directly or through the repair ladder's
    reset/reboot (the hooks own these; remediation.py)."""
    from . import remediation

    if remediation.is_ladder(reason):
        return remediation.inner_check(reason) in check_names()
    return reasons.check_of(reason) in check_names()


def precise_drain(info) -> bool:
    """Drained by slurmqual with a check's own reason (not an admin's
    `slurmqual: admin: ...`): a later actor (requalify) keeps that reason."""
    return info is not None and info.drained and reasons.check_of(info.reason) not in (None, "admin")


def drained_for(reason: str | None) -> str | None:
    """The check a slurmqual drain is for ('xid' for 'slurmqual: reboot: xid: ...')."""
    from . import remediation

    return remediation.inner_check(reason)


def is_escalated(reason: str | None) -> bool:
    """The ladder's cap drained the node after repeated automatic repairs: a person decides."""
    from . import remediation

    return remediation.is_escalated(reason)


_REBOOT_FLAGS = ("REBOOT_REQUESTED", "REBOOT_ISSUED")


def ladder_rebooting(info) -> bool:
    """In the ladder's own reboot (our `slurmqual: reboot: ...` reason, Slurm's
    reboot flags): the health check slurmd runs at start, before the node
    registers, is the re-check; if it fails the hook may drain the node, so it
    never takes a job. Any other reboot or down node is Slurm's or an admin's."""
    from . import remediation

    return (info is not None and remediation.category(info.reason) == "reboot"
            and bool(set(_REBOOT_FLAGS) & set(info.flags)))


# Slurm's own drain after a hook failed: requalify may replace it with the precise reason.
SLURM_HOOK_REASONS = ("Prolog error", "Epilog error")
_MAINT_FLAGS = ("MAINTENANCE", "RESERVED_MAINT")


def _hands_off(info, own_maintenance: bool) -> bool:
    """A requalify's own maintenance reservation does not make its nodes
    hands-off, nor does the ladder's own reboot (ladder_rebooting) to a hook that drains."""
    if ladder_rebooting(info):
        import dataclasses

        return dataclasses.replace(info, state="idle", flags=tuple(f for f in info.flags
                                                                   if f not in _REBOOT_FLAGS)).hands_off
    if own_maintenance and set(_MAINT_FLAGS) & set(info.flags):
        import dataclasses

        return dataclasses.replace(info, flags=tuple(f for f in info.flags if f not in _MAINT_FLAGS)).hands_off
    return info.hands_off


def may_drain(info, reason: str, actor: str, own_maintenance: bool = False) -> Decision:
    """`info` is the node's NodeInfo, or None when Slurm does not know it.
    own_maintenance: the node is in a slurmqual requalify's reservation."""
    if actor not in ACTORS:
        raise ValueError(f"unknown actor {actor!r}")
    if info is None:
        return Decision(True, "")
    if actor == "requalify":
        own_maintenance = True
    hands_off = _hands_off(info, own_maintenance)
    if info.drained:
        if actor == "requalify" and info.reason in SLURM_HOOK_REASONS:
            return Decision(True, "")
        if not reasons.is_ours(info.reason):
            return Decision(False, f"already drained by someone else ({info.reason!r}); left alone")
        if info.reason == reason:
            return Decision(False, "already drained with this reason", noop=True)
        if actor == "hook" and not is_hook_reason(info.reason):
            return Decision(False, f"drained by slurmqual for {reasons.check_of(info.reason)} ({info.reason!r}); "
                                   "a hook never replaces it")
        if actor == "hook" and is_escalated(info.reason):
            return Decision(False, f"drained after repeated automatic repairs ({info.reason!r}); a person decides")
        if hands_off:
            return Decision(False, f"node is {_state(info)}; left alone")
        return Decision(True, "")
    if hands_off:
        return Decision(False, f"node is {_state(info)}; left alone")
    return Decision(True, "")


def may_resume(info, actor: str, force: bool = False) -> Decision:
    if actor not in ACTORS:
        raise ValueError(f"unknown actor {actor!r}")
    if info is None:
        return Decision(False, "unknown to Slurm")
    if not info.drained:
        return Decision(False, f"not drained ({info.state})", noop=True)
    if info.hands_off and not (actor == "admin" and force):
        return Decision(False, f"node is {_state(info)}; left alone")
    if not reasons.is_ours(info.reason):
        if actor == "admin" and force:
            return Decision(True, "")
        return Decision(False, f"drained by someone else ({info.reason!r})")
    if actor == "hook" and not is_hook_reason(info.reason):
        return Decision(False, f"drained by slurmqual for {reasons.check_of(info.reason)}: needs requalify or an admin")
    if actor == "hook" and is_escalated(info.reason):
        return Decision(False, "drained after repeated automatic repairs: needs `slurmqual resume` or requalify")
    return Decision(True, "")


def _state(info) -> str:
    return "+".join([info.state, *[f.lower() for f in info.flags]])


# -- fleet guard for hook drains ----------------------------------------------

def guard_limit(fleet: int, fraction: float, minimum: int) -> int:
    """Most hook drains allowed within the window: max(minimum, fraction of the fleet)."""
    return max(minimum, int(fleet * fraction))


@dataclass(frozen=True)
class GuardVerdict:
    allowed: bool
    recent: int        # hook drains within the window (other nodes)
    limit: int
    fleet: int


class HookGuard:
    """A wrong pin in a shared config fails every node at once; the hooks must
    not drain the fleet for it. Each hook drain leaves a record in the shared
    state dir (`<state_dir>/guard/drains/<node>.json`); before a new drain a hook
    takes the guard lock, counts the other nodes' records within the window and
    either records its own and drains, or is *held*: it records
    `guard/held/<node>.json`, logs critically and leaves the node in service.
    The guard stays tripped while held records are younger than the window, so
    it clears by itself once the nodes stop failing (or when an admin deletes
    `<state_dir>/guard`). Fleet size: the node state files in the same dir
    (every node that ran a hook). The guard needs the shared state dir that
    `status` reads; on a node-local state dir it sees one node and never trips.
    """

    def __init__(self, state_dir: str, window_s: float, fraction: float, minimum: int,
                 records: str = "drains", held: str = "held", in_flight: bool = False):
        self.dir = os.path.join(state_dir, "guard")
        self.state_dir = state_dir
        self.window_s = window_s
        self.fraction = fraction
        self.minimum = minimum
        self.records = records      # subdirectory of the counted records
        self.held_kind = held       # ... and of the held ones
        self.in_flight = in_flight  # release() also ends the node's record (a reboot that finished)

    @classmethod
    def from_config(cls, config) -> "HookGuard":
        h = config["hooks"]
        return cls(h["state_dir"], h.get("guard_window_s", 3600.0), h.get("guard_fraction", 0.1),
                   h.get("guard_min", 2))

    def _records(self, kind: str, now: float) -> dict[str, dict]:
        d = os.path.join(self.dir, kind)
        out = {}
        try:
            entries = os.listdir(d)
        except OSError:
            return out
        for e in entries:
            if not e.endswith(".json") or e.startswith("."):
                continue
            try:
                with open(os.path.join(d, e), encoding="utf-8") as fh:
                    rec = json.load(fh)
                if now - float(rec["time"]) <= self.window_s:
                    out[e[:-5]] = rec
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def fleet_size(self) -> int:
        from .nodestate import node_count

        return node_count(self.state_dir)

    def _write(self, kind: str, node: str, rec: dict) -> None:
        from .atomic import ensure_dir, write_text

        ensure_dir(os.path.join(self.dir, kind))
        write_text(os.path.join(self.dir, kind, f"{node}.json"), json.dumps(rec))

    def request_drain(self, node: str, reason: str, now: float | None = None) -> GuardVerdict:
        """Ask to drain `node` for a hook; records the drain or the hold."""
        import fcntl

        from .atomic import ensure_dir

        now = time.time() if now is None else now
        ensure_dir(self.dir)
        fd = os.open(os.path.join(self.dir, ".lock"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            drains = self._records(self.records, now)
            held = self._records(self.held_kind, now)
            drains.pop(node, None)
            held.pop(node, None)
            fleet = max(self.fleet_size(), len(drains) + 1)
            limit = guard_limit(fleet, self.fraction, self.minimum)
            if len(drains) >= limit or held:
                self._write(self.held_kind, node, {"node": node, "time": now, "reason": reason,
                                                   "recent": len(drains), "limit": limit, "fleet": fleet})
                return GuardVerdict(False, len(drains), limit, fleet)
            self._write(self.records, node, {"node": node, "time": now, "reason": reason})
            try:
                os.unlink(os.path.join(self.dir, self.held_kind, f"{node}.json"))
            except OSError:
                pass
            return GuardVerdict(True, len(drains), limit, fleet)
        finally:
            os.close(fd)

    def release(self, node: str) -> None:
        """The node passed again: it no longer counts as held (its drain record
        ages out; an in-flight record, a reboot, ends now)."""
        for kind in (self.held_kind, *((self.records,) if self.in_flight else ())):
            try:
                os.unlink(os.path.join(self.dir, kind, f"{node}.json"))
            except OSError:
                pass

    def status(self, now: float | None = None) -> dict:
        """For `slurmqual status`: recent hook drains, held nodes, whether tripped."""
        now = time.time() if now is None else now
        drains = self._records(self.records, now)
        held = self._records(self.held_kind, now)
        fleet = max(self.fleet_size(), len(drains))
        return {"tripped": bool(held), "limit": guard_limit(fleet, self.fraction, self.minimum), "fleet": fleet,
                "window_s": self.window_s, "recent_drains": sorted(drains), "held": sorted(held),
                "held_reasons": {n: r.get("reason", "") for n, r in sorted(held.items())}}


def reboot_guard(config) -> HookGuard:
    """The ladder's reboots in flight, capped fleet-wide like hook drains (its
    own records and limit: `<state_dir>/guard/reboots/`, `guard/reboots-held/`):
    a fault every node shares must not reboot the fleet."""
    r = config["remediation"]
    return HookGuard(config["hooks"]["state_dir"], r["reboot_window_s"], r["reboot_guard_fraction"],
                     r["reboot_guard_min"], records="reboots", held="reboots-held", in_flight=True)
