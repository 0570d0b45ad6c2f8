"""Slurm's wrapped numbers. From 23.02 (data_parser v0.0.39) a number that
may be unset or infinite is written as {"set": bool, "infinite": bool,
"number": N}; before, as a plain integer with NO_VAL sentinels."""

from __future__ import annotations

NO_VAL = 0xFFFFFFFE      # Slurm's "not set" for 32-bit fields
INFINITE = 0xFFFFFFFF


class Unset:
    """Marker type: the number is unset or infinite."""


def unwrap(value, *, field: str = "number") -> int | None:
    """Plain or wrapped number -> int, or None when unset/infinite/NO_VAL.
    Raises TypeError for anything else, so a decoder reports the shape."""
    if isinstance(value, dict):
        if set(value) - {"set", "infinite", "number"} or "number" not in value:
            raise TypeError(f"{field}: unexpected wrapped number {sorted(value)}")
        if not value.get("set", False) or value.get("infinite", False):
            return None
        value = value["number"]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field}: expected a number, got {type(value).__name__}")
    if value in (NO_VAL, INFINITE) or value < 0:
        return None
    return value


def time_limit_seconds(limit: str) -> int:
    """Slurm time limit "[D-]HH:MM:SS" / "MM:SS" / "M" -> seconds."""
    days = 0
    if "-" in limit:
        d, limit = limit.split("-", 1)
        days = int(d)
    parts = [int(x) for x in limit.split(":")]
    if len(parts) == 1:
        parts = [0, parts[0], 0]
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return days * 86400 + h * 3600 + m * 60 + s
