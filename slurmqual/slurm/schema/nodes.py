"""Node records -> NodeInfo, per generation.

- v0.0.36-v0.0.38 (22.05 `sinfo --json`, slurmrestd 22.05): ``state`` is one
  lower-case base state word, ``state_flags`` a list of flags.
- v0.0.39+ (23.02+ `scontrol show nodes --json`, slurmrestd 23.02+):
  ``state`` is a list of upper-case words, one base state plus flags.

Words are checked against Slurm's own state tables: an unknown base state is
a FormatError (it could be a drained node read as idle); an unknown flag is
kept and makes the node hands-off (see NodeInfo.hands_off).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import FormatError
from .version import SlurmVersion, check_known, generation_of

# src/common/slurm_protocol_defs.c and data_parser NODE_STATES, 22.05-26.05.
BASE_STATES = {"INVALID", "UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "END"}
FLAGS = {"PERFCTRS", "EXTERNAL", "RESERVED", "UNDRAIN", "CLOUD", "RESUME", "DRAIN", "COMPLETING", "NOT_RESPONDING",
         "POWERED_DOWN", "FAIL", "POWERING_UP", "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_CANCELED",
         "POWERING_DOWN", "DYNAMIC_FUTURE", "REBOOT_ISSUED", "PLANNED", "INVALID_REG", "POWER_DOWN", "POWER_UP",
         "POWER_DRAIN", "POWER_DOWN_ASAP", "POWER_DOWN_FORCE", "DYNAMIC_NORM", "BLOCKED"}
# Combined words some outputs use for a base state (sinfo's short forms).
ALIASES = {"DRAINED": ("IDLE", ("DRAIN",)), "DRAINING": ("ALLOCATED", ("DRAIN",)),
           "ALLOC": ("ALLOCATED", ()), "MIX": ("MIXED", ())}

HANDS_OFF_FLAGS = {"MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERING_DOWN", "POWERED_DOWN",
                   "POWER_DOWN", "POWERING_UP", "RESERVED_MAINT"}


@dataclass(frozen=True)
class NodeInfo:
    name: str
    state: str                                   # base state: idle, allocated, mixed, down, ...
    flags: tuple[str, ...] = field(default=())   # DRAIN, MAINTENANCE, REBOOT_REQUESTED, NOT_RESPONDING, ...
    reason: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags or self.state.startswith("drain")

    @property
    def hands_off(self) -> bool:
        """States an admin or Slurm is handling: never resume or re-reason these.
        A flag newer than slurmqual (a later Slurm) may mean anything: hands off."""
        unknown = set(self.flags) - FLAGS
        return self.state in ("down", "future", "unknown") or bool(HANDS_OFF_FLAGS & set(self.flags)) or bool(unknown)


def node_state(words: list[str], where: str) -> tuple[str, tuple[str, ...]]:
    """['IDLE', 'DRAIN'] -> ('idle', ('DRAIN',)). Raises ValueError naming an
    unknown or missing base state."""
    base, flags = None, []
    for raw in words:
        if not isinstance(raw, str):
            raise ValueError(f"{where}: state word {raw!r} is not a string")
        w = raw.upper().rstrip("*~#!%$@^-")
        if w in BASE_STATES and base is None:
            base = w
        elif w in ALIASES and base is None:
            base, extra = ALIASES[w]
            flags.extend(extra)
        elif w in FLAGS or w not in BASE_STATES:
            if w not in FLAGS and not w.replace("_", "").isalpha():
                raise ValueError(f"{where}: state word {raw!r} is not a Slurm state")
            flags.append(w)
        else:
            raise ValueError(f"{where}: two base states in {words}")
    if base is None:
        raise ValueError(f"{where}: no known base state in {words}")
    return base.lower(), tuple(dict.fromkeys(flags))


def decode_nodes(doc, source: str, version: SlurmVersion | None = None) -> list[NodeInfo]:
    """NodeInfo list from a node document: {"nodes": [...]} of `sinfo --json`
    (22.05), `scontrol show nodes --json` (23.02+) or slurmrestd."""
    who, gen = generation_of(doc, source, version)
    raw = doc.get("nodes")
    if not isinstance(raw, list):
        if "sinfo" in doc:
            raise check_known(who, gen, source, "nodes are grouped by state ('sinfo' key); "
                              "per-node records come from `scontrol show nodes --json`")
        raise check_known(who, gen, source, "no 'nodes' list")
    out: dict[str, NodeInfo] = {}
    for i, rec in enumerate(raw):
        try:
            name = rec["name"]
            if not isinstance(name, str) or not name:
                raise ValueError("node name missing")
            state = rec["state"]
            if gen <= 38:
                if not isinstance(state, str):
                    raise ValueError(f"'state' is {type(state).__name__}, this format has a word")
                # v0.0.36 has no state_flags at all: its drained node reads
                # as plain "idle", so refuse it rather than misread it.
                flags = rec["state_flags"]
                if not isinstance(flags, list):
                    raise ValueError("'state_flags' is not a list")
                base, flags = node_state([state, *flags], f"node {name}")
            else:
                if not isinstance(state, list):
                    raise ValueError(f"'state' is {type(state).__name__}, this format has a list")
                base, flags = node_state(state, f"node {name}")
            reason = rec.get("reason") or ""
            if not isinstance(reason, str):
                raise ValueError("'reason' is not a string")
        except (KeyError, TypeError, ValueError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise check_known(who, gen, source, f"node record {i}: {detail}") from None
        out[name] = NodeInfo(name, base, flags, reason)
    return list(out.values())


# -- partitions and features (for `[[groups]]`, see nodefacts.py) ------------------------------------

def _split(value: str) -> tuple[str, ...]:
    """A comma list as scontrol prints it; "(null)" is none."""
    return () if value in ("", "(null)") else tuple(v for v in value.split(",") if v)


def name_list(value: object) -> tuple[str, ...]:
    """The non-empty strings of a list (anything else: none)."""
    return tuple(v for v in value if isinstance(v, str) and v) if isinstance(value, list) else ()


def groups_from_oneliner(text: str, node: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(partitions, features) of `node` from `scontrol show node NAME --oneliner`.
    Features are AvailableFeatures (slurm.conf Features=, what the hardware is),
    not ActiveFeatures (what a node_features plugin switched on for now).
    Raises FormatError when the node's line or its features are missing."""
    for line in text.splitlines():
        if line.split(None, 1)[:1] != [f"NodeName={node}"]:
            continue
        fields = {}
        for tok in line.split():
            key, eq, value = tok.partition("=")
            if eq and key in ("AvailableFeatures", "Partitions") and key not in fields:
                fields[key] = value
        if "AvailableFeatures" not in fields:
            raise FormatError(f"scontrol show node {node}: no AvailableFeatures= field")
        return _split(fields.get("Partitions", "")), _split(fields["AvailableFeatures"])
    raise FormatError(f"scontrol show node {node}: no NodeName={node} line")


def groups_from_doc(doc: object, node: str, source: str = "node list") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(partitions, features) of `node` from a slurmrestd/`scontrol --json`
    node document: features are a comma string up to v0.0.38, a list after.
    Raises FormatError when the node is not in it."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    for rec in nodes if isinstance(nodes, list) else []:
        if isinstance(rec, dict) and rec.get("name") == node:
            feats = rec.get("features")
            features = _split(feats) if isinstance(feats, str) else name_list(feats)
            return name_list(rec.get("partitions")), features
    raise FormatError(f"{source}: node {node} not in the node list")
