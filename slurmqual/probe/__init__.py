"""Probes: read the node (through FsRoot) into small records. No judgement here."""

from __future__ import annotations

_NUMBER_CHARS = frozenset("0123456789.")


def leading_number(text: str, unit: str) -> str | None:
    """The digits and dots that start `text` when whitespace and then `unit`
    follow them (what `^([0-9.]+)\\s*UNIT` matched), else None.
    Without `re`: sysfs rates and link speeds are read before every job."""
    end = 0
    while end < len(text) and text[end] in _NUMBER_CHARS:
        end += 1
    if end and text[end:].lstrip().startswith(unit):
        return text[:end]
    return None
