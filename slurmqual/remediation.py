"""The repair ladder: which action a failing node gets, and the reasons that
say so. NVIDIA's NVSentinel and Lepton's gpud map fault classes to actions
with caps on repeats; this is the same idea on top of Slurm.

Actions, mildest first:
- `none`: warn (log, event), the node stays in service;
- `reset`: drain, then `nvidia-smi -r -i <gpu>` once no process uses the GPU;
- `reboot`: `scontrol reboot ASAP nextstate=RESUME reason="slurmqual: reboot: <check>: ..."`;
- `drain`: today's hook drain (the hooks resume it once the check passes);
- `rma`: drain `slurmqual: rma: <check>: ...`, evidence kept (`slurmqual rma`);
  only a person (or requalify) brings the node back.
Several failing checks: the node gets the most severe of their actions.

Caps: at most remediation.max_auto automatic actions (reset, reboot) per node
within remediation.window ("7d"; or window_s in seconds); the next failure *escalates* to a drain whose
reason carries the history (`slurmqual: xid: after 2 reboots in 7d; Xid 79 ...`).
An escalated drain is never resumed by a hook: a person decides.

The re-check after a reboot: slurmd runs HealthCheckProgram when it starts,
before it registers; the node is still REBOOT_ISSUED with our reason then.
If a check fails, the hook drains it there (policy.ladder_rebooting), so it
never takes a job; if all pass, Slurm gives it back as it registers
(nextstate=RESUME). Slurm clears the node's drain when a reboot completes,
whatever the reason, so no other way keeps a node out until checks pass; and
nextstate=DOWN is undone by ReturnToService=2. The reboot guard's record
ends when a hook next sees the node passing and in service.
After a reset the drain holds until a hook's checks all pass.

Who owns which reason is decided in policy.py from these helpers.
Imported by hooks on the failure path only (no pydantic, no heavy imports).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .slurm import reason as reasons

ACTIONS = ("none", "reset", "reboot", "drain", "rma")
SEVERITY = {a: i for i, a in enumerate(ACTIONS)}
AUTOMATIC = ("reset", "reboot")
LADDER_CATEGORIES = ("reset", "reboot")   # `slurmqual: reboot: <check>: ...`: the hooks resume it when all pass
RMA_CATEGORY = "rma"

# Per-check defaults: what fixes the fault class most of the time.
DEFAULT_CHECKS: dict[str, str] = {
    "gpu_count": "reboot",      # a GPU off the bus or not bound: the catalog's fix for Xid 79 is a reboot
    "gpu_memory": "reset",      # pending row remap / retirement: a GPU reset activates it
    "nvlink": "reset",
    "dcgm": "rma",              # the field diagnostic failed: vendor evidence
}
# Per-Xid defaults (NVIDIA's catalog, checks/xid.py CATALOG's actions).
DEFAULT_XID: dict[int, str] = {
    79: "reboot",                                   # fallen off the bus
    48: "reset", 63: "reset", 92: "reset", 94: "reset", 95: "reset", 140: "reset",
    61: "reset", 62: "reset", 119: "reset", 120: "reset", 74: "reset",
    **{x: "reset" for x in range(144, 151)},
    64: "rma",                                      # row remapper failure
}
# gpu_state: the driver's own recovery action (driver 550+).
_RECOVERY = {"reset": "reset", "drain and reset": "reset", "reboot": "reboot", "drain p2p": "drain"}
_RECOVERY_RE = re.compile(r"recovery action '([^']+)'")
_XID_RE = re.compile(r"Xid (\d+) on GPU ([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2})")
_ESCALATED_RE = re.compile(r"^after \d+ (?:resets?|reboots?)(?:, \d+ (?:resets?|reboots?))? in [0-9.]+[dhs](?:;|$)")


@dataclass(frozen=True)
class Plan:
    action: str            # one of ACTIONS (after the cap: an escalation is "drain")
    check: str             # the failing check the action is for
    detail: str            # its message
    gpus: tuple[str, ...]  # PCI addresses the action targets (reset)
    reason: str            # the drain/reboot reason to set ("" for none)
    escalated: str = ""    # "2 reboots in 7d" when the cap turned an automatic action into a drain


def xid_action(xid: int, text: str, cfg: dict) -> str:
    over = cfg.get("xid", {})
    if str(xid) in over:
        return over[str(xid)]
    if xid == 154:  # "GPU recovery action changed": the message names the action
        low = text.lower()
        return "reboot" if "reboot" in low else "reset" if "reset" in low else "drain"
    return DEFAULT_XID.get(xid, "drain")


def action_for(result, cfg: dict) -> tuple[str, tuple[str, ...]]:
    """(action, target GPUs) for one failing CheckResult."""
    over = cfg.get("checks", {})
    if result.name in over:
        return over[result.name], tuple(result.devices)
    if result.name == "xid":
        found = [(xid_action(int(x), result.message, cfg), pci) for x, pci in _XID_RE.findall(result.message)]
        if not found:
            return "drain", ()
        worst = max((a for a, _p in found), key=SEVERITY.__getitem__)
        return worst, tuple(dict.fromkeys(p for a, p in found if a == worst))
    if result.name == "gpu_state":
        m = _RECOVERY_RE.search(result.message)
        return (_RECOVERY.get(m.group(1).lower(), "drain") if m else "drain"), tuple(result.devices)
    return DEFAULT_CHECKS.get(result.name, "drain"), tuple(result.devices)


def recent(history: list[dict], window_s: float, now: float) -> dict[str, int]:
    """Automatic actions per kind within the window."""
    out: dict[str, int] = {}
    for h in history:
        try:
            if h.get("action") in AUTOMATIC and now - float(h["time"]) <= window_s:
                out[h["action"]] = out.get(h["action"], 0) + 1
        except (KeyError, TypeError, ValueError):
            continue
    return out


def history_text(counts: dict[str, int], window_s: float) -> str:
    """'2 reboots in 7d', '1 reset, 1 reboot in 7d'."""
    parts = [f"{n} {a}{'s' if n != 1 else ''}" for a, n in sorted(counts.items(), key=lambda kv: SEVERITY[kv[0]])]
    return f"{', '.join(parts)} in {duration(window_s)}"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """'7d' -> 604800.0; '1d12h', '90m', '2w' (units s, m, h, d, w): the
    config's `remediation.window`. ValueError saying the expected form."""
    t = text.strip().lower()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(t):
        if t[pos:m.start()].strip():
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if not t or t[pos:].strip() or pos == 0 or total <= 0:
        raise ValueError(f"expected a duration such as \"7d\", \"36h\" or \"1d12h\" (units s, m, h, d, w), "
                         "above zero")
    return total


def duration(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g}d"
    if seconds >= 3600:
        return f"{seconds / 3600:g}h"
    return f"{seconds:g}s"


def plan(failed: list, history: list[dict], cfg: dict, now: float) -> Plan:
    """The action for this failure: the most severe of the failing checks'
    actions, capped by the node's recent automatic actions."""
    best = None
    for r in failed:
        action, gpus = action_for(r, cfg)
        if best is None or SEVERITY[action] > SEVERITY[best[0]]:
            best = (action, gpus, r)
    action, gpus, r = best
    detail = r.message
    if action in AUTOMATIC:
        counts = recent(history, cfg["window_s"], now)
        if not cfg["max_auto"]:  # automatic actions switched off: a plain drain
            return Plan("drain", r.name, detail, gpus, reason_for("drain", r.name, detail))
        if sum(counts.values()) >= cfg["max_auto"]:
            hist = history_text(counts, cfg["window_s"])
            return Plan("drain", r.name, detail, gpus, reasons.make(r.name, f"after {hist}; {detail}"), hist)
    return Plan(action, r.name, detail, gpus, reason_for(action, r.name, detail))


def reason_for(action: str, check: str, detail: str) -> str:
    if action in LADDER_CATEGORIES or action == RMA_CATEGORY:
        return reasons.make(f"{action}: {check}", detail)
    if action == "drain":
        return reasons.make(check, detail)
    return ""


# -- reading reasons (policy.py decides ownership with these) --------------------

def category(reason: str | None) -> str | None:
    """'reboot' for 'slurmqual: reboot: xid: ...'; the check otherwise; None if not ours."""
    return reasons.check_of(reason)


def inner_check(reason: str | None) -> str | None:
    """The check a drain is for: 'xid' for 'slurmqual: reboot: xid: ...' and for 'slurmqual: xid: ...'."""
    first = reasons.check_of(reason)
    if first in LADDER_CATEGORIES or first == RMA_CATEGORY:
        rest = reason[len(reasons.PREFIX):].strip().split(":", 2)
        return rest[1].strip() or None if len(rest) > 1 else None
    return first


def is_ladder(reason: str | None) -> bool:
    """A reset or reboot the ladder started (the hooks resume the node once every check passes)."""
    return category(reason) in LADDER_CATEGORIES


def is_escalated(reason: str | None) -> bool:
    """A drain the cap escalated: never resumed by a hook."""
    if not reasons.is_ours(reason):
        return False
    rest = reason[len(reasons.PREFIX):].strip().split(":", 1)
    return len(rest) == 2 and bool(_ESCALATED_RE.match(rest[1].strip()))


# -- lemon nodes (`status --lemons`) ---------------------------------------------

# Checks whose failure is the hardware's (not a setting, a module or a version).
HARDWARE_CHECKS = frozenset({"gpu_count", "gpu_memory", "gpu_state", "xid", "nvlink", "dcgm", "pcie_link",
                             "pcie_aer", "nic_link", "ib_counters", "fabric_manager"})
_COUNTED_ACTIONS = ("reset", "reboot", "rma")


def hardware_faults(events: list[dict]) -> list[dict]:
    """The events that count for a lemon: the ladder's automatic actions and
    RMA drains, and hook drains for a hardware check (an escalation is one of
    those). Each event: {time, kind, detail} as `history` keeps them
    (detail 'hook: slurmqual: xid: ...')."""
    out = []
    for ev in events:
        kind = ev.get("kind")
        if kind in _COUNTED_ACTIONS:
            out.append(ev)
        elif kind == "drain":
            reason = str(ev.get("detail") or "").split(": ", 1)[-1]
            if reasons.check_of(reason) in HARDWARE_CHECKS:
                out.append(ev)
    return out


def lemons(events_by_node: dict[str, list[dict]], count: int, window_s: float, now: float) -> list[dict]:
    """Nodes with `count` or more hardware faults within the window, worst first:
    [{node, faults, kinds: {kind: n}, last, last_detail}]."""
    out = []
    for node, events in events_by_node.items():
        recent = [e for e in hardware_faults(events) if now - float(e.get("time", 0)) <= window_s]
        if len(recent) >= count:
            kinds: dict[str, int] = {}
            for e in recent:
                kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
            last = max(recent, key=lambda e: float(e["time"]))
            out.append({"node": node, "faults": len(recent), "kinds": kinds, "last": float(last["time"]),
                        "last_detail": str(last.get("detail") or "")})
    return sorted(out, key=lambda r: (-r["faults"], -r["last"], r["node"]))
