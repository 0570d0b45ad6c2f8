"""Drain reasons: ours are `slurmqual: <check>: <detail>`, one printable-ASCII
line of at most 80 characters, so `sinfo -R` shows them whole and nothing from
device data (quotes, newlines, escapes) reaches scontrol or a terminal."""

from __future__ import annotations

PREFIX = "slurmqual:"
MAX_LEN = 80


def sanitize(text: str) -> str:
    """Printable ASCII only; quotes and control characters become spaces, runs collapse."""
    out = []
    for ch in text:
        if ch in "\"'`\\" or not (32 <= ord(ch) < 127):
            ch = " "
        out.append(ch)
    return " ".join("".join(out).split())


def make(check: str, detail: str) -> str:
    reason = f"{PREFIX} {sanitize(check)}: {sanitize(detail)}"
    if len(reason) > MAX_LEN:
        reason = reason[: MAX_LEN - 3].rstrip() + "..."
    return reason


def is_ours(reason: str | None) -> bool:
    return bool(reason) and reason.startswith(PREFIX)


def check_of(reason: str | None) -> str | None:
    """'slurmqual: peermem: ...' -> 'peermem'; None if not ours."""
    if not is_ours(reason):
        return None
    rest = reason[len(PREFIX):].strip()
    return rest.split(":", 1)[0].strip() or None
