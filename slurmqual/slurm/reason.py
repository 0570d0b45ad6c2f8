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


def make(check: str, detail: str, others: list[str] | tuple[str, ...] = ()) -> str:
    """Too long: keep the leading clauses that fit (cut at ", " or "; "), so the
    reason still reads as a sentence; failing that, cut with "...".
    `others`: the other failing checks; their count always survives the cap
    ("(+4 more: a,b,c,d)", shortened to "(+4 more: a,...)" or "(+4 more)")."""
    check = sanitize(check)
    reason = f"{PREFIX} {check}: {sanitize(detail)}"
    if not others:
        return _fit(reason, MAX_LEN, check)
    names = [sanitize(o) for o in others]
    n = len(names)
    tails = (f"(+{n} more: {','.join(names)})", f"(+{n} more: {names[0]},...)", f"(+{n} more)")
    for tail in tails:
        if len(reason) + 1 + len(tail) <= MAX_LEN:
            return f"{reason} {tail}"
        room = MAX_LEN - 1 - len(tail)
        if room >= len(PREFIX) + len(check) + 22:  # still some detail left
            return f"{_fit(reason, room, check)} {tail}"
    return f"{_fit(reason, MAX_LEN - 1 - len(tails[-1]), check)} {tails[-1]}"


def _fit(reason: str, limit: int, check: str) -> str:
    if len(reason) <= limit:
        return reason
    head = reason[:limit]
    cut = max(head.rfind(", "), head.rfind("; "))
    if cut > len(PREFIX) + len(check) + 12:
        return head[:cut]
    return reason[: limit - 3].rstrip() + "..."


def is_ours(reason: str | None) -> bool:
    return bool(reason) and reason.startswith(PREFIX)


def check_of(reason: str | None) -> str | None:
    """'slurmqual: peermem: ...' -> 'peermem'; None if not ours."""
    if not is_ours(reason):
        return None
    rest = reason[len(PREFIX):].strip()
    return rest.split(":", 1)[0].strip() or None
