"""Remediation cheat sheet: symptom -> cause -> what to do, per check.

Derived from the check modules' declarations (`SPEC.hint`, `SPEC.explain`):
HINTS holds the one-line hint printed with a failure; EXPLAIN the long form
shown by `slurmqual explain CHECK`.
"""

from __future__ import annotations

from .checks import REGISTRY
from .result import Status

HINTS: dict[str, str] = {s.name: s.hint for s in REGISTRY.values()}

ERROR_HINT = "slurmqual could not judge this check; see the message, fix the input or report a slurmqual bug"

EXPLAIN: dict[str, str] = {s.name: s.explain for s in REGISTRY.values()}


def hint_for(check: str, status: Status) -> str:
    if status is Status.ERROR:
        return ERROR_HINT
    return HINTS.get(check, "")
