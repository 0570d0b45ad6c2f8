"""Remediation cheat sheet: symptom -> cause -> what to do, per check.

Derived from the check modules' declarations (`SPEC.hint`, `SPEC.explain`):
HINTS holds the one-line hint printed with a failure; EXPLAIN the long form
shown by `slurmqual explain CHECK`.
"""

from __future__ import annotations

from .checks import REGISTRY

HINTS: dict[str, str] = {s.name: s.hint for s in REGISTRY.values()}

EXPLAIN: dict[str, str] = {s.name: s.explain for s in REGISTRY.values()}
