"""Node names from files, measurements and the environment are never trusted.

A node name ends up in `scontrol update nodename=NAME`, in a hostlist, in a
file name under the state dir and in the store. Slurm reads a node
expression with its hostlist parser (src/common/hostlist.c), which splits on
whitespace and ',' and expands '[...]' ranges: a "name" such as
"gpu001 gpu002" or "gpu[001-512]" is *many* nodes to scontrol while it is one
string to us, so a guard counting our strings would not count what is
drained. slurm.conf's NodeName/NodeHostname are host names in practice
(`slurmd -N` and the node's hostname), so the rule is the host-name alphabet
(RFC 952/1123 letters, digits, '-' and '.', plus the '_' that Slurm sites use),
starting with a letter or digit: that excludes every hostlist metacharacter
(whitespace , [ ] ^), '=' (scontrol's key=value), '/' and a leading '.'
(path components), and all control characters. python-hostlist (already a
dependency) expands expressions but does not say whether a single name is
one; hence this small module.
"""

from __future__ import annotations

MAX_LEN = 128


def _plain(name: str) -> bool:
    """[A-Za-z0-9][A-Za-z0-9._-]* without `re` (the prolog checks its node name before every job)."""
    return name.isascii() and name[0].isalnum() and name.replace(".", "").replace("_", "").replace("-", "").isalnum()


class BadNodeName(ValueError):
    """Not a single Slurm node name; the message says why, with the name escaped."""


def why_bad(name: object) -> str | None:
    """None for a usable single node name, else the reason."""
    if not isinstance(name, str):
        return f"not a string ({type(name).__name__})"
    if not name:
        return "empty"
    if len(name) > MAX_LEN:
        return f"longer than {MAX_LEN} characters"
    if _plain(name):
        return None
    if any(c.isspace() for c in name) or "," in name:
        return "contains whitespace or ',' (Slurm would read several nodes)"
    if any(not c.isprintable() for c in name):
        return "contains control characters"
    if "[" in name or "]" in name:
        return "is a hostlist expression ('[...]'), not one node"
    if name[0] in ".-_":
        return f"starts with {name[0]!r}"
    return "has characters outside letters, digits, '-', '.', '_'"


def check(name: object, what: str = "node name") -> str:
    """Return name if it is one usable node name; raise BadNodeName otherwise."""
    reason = why_bad(name)
    if reason is not None:
        shown = repr(name)[:80] if isinstance(name, str) else type(name).__name__
        raise BadNodeName(f"unusable {what} {shown}: {reason}")
    return name  # type: ignore[return-value]


def check_all(names, what: str = "node name") -> list[str]:
    if not isinstance(names, (list, tuple)):
        raise BadNodeName(f"{what}s: expected a list, found {type(names).__name__}")
    return [check(n, what) for n in names]


_GOOD_NAMES: set[str] = set()  # node names that passed check_all in this process


def check_node_list(nodes) -> None:
    """A measurement's "nodes": a non-empty list of valid node names, else a
    clear ValueError. Names seen valid before are not checked again (a
    measurements file names the same nodes thousands of times)."""
    if type(nodes) is not list or not nodes:
        raise ValueError("'nodes' must be a non-empty list of node names")
    unseen = [n for n in nodes if type(n) is not str or n not in _GOOD_NAMES]
    if unseen:
        if not all(isinstance(n, str) and n for n in unseen):
            raise ValueError("'nodes' must be a non-empty list of node names")
        check_all(unseen)  # BadNodeName (a ValueError): "a b" or "gpu[1-9]" would drain many nodes as one
        if len(_GOOD_NAMES) > 1_000_000:
            _GOOD_NAMES.clear()
        _GOOD_NAMES.update(unseen)
