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
    """Too long: keep the leading clauses that fit (cut at ", " or "; "), so the
    reason still reads as a sentence; failing that, cut with "..."."""
    reason = f"{PREFIX} {sanitize(check)}: {sanitize(detail)}"
    if len(reason) <= MAX_LEN:
        return reason
    head = reason[:MAX_LEN]
    cut = max(head.rfind(", "), head.rfind("; "))
    if cut > len(PREFIX) + len(check) + 12:
        return head[:cut]
    return reason[: MAX_LEN - 3].rstrip() + "..."


def is_ours(reason: str | None) -> bool:
    return bool(reason) and reason.startswith(PREFIX)


def check_of(reason: str | None) -> str | None:
    """'slurmqual: peermem: ...' -> 'peermem'; None if not ours."""
    if not is_ours(reason):
        return None
    rest = reason[len(PREFIX):].strip()
    return rest.split(":", 1)[0].strip() or None
