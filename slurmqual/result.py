"""Check outcomes: the verdict half of probe -> check -> verdict -> action."""

from __future__ import annotations

from .records import dataclass, field
from enum import Enum


class Status(str, Enum):
    PASS = "pass"
    NA = "na"          # not applicable on this node (e.g. dcqcn on InfiniBand)
    SKIP = "skip"      # switched off by config or level
    WARN = "warn"
    ERROR = "error"    # the check could not judge (bad input, hung command)
    FAIL = "fail"      # the node is bad: drain it

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Status.PASS: 0, Status.NA: 0, Status.SKIP: 0, Status.WARN: 1, Status.ERROR: 2, Status.FAIL: 3}


@dataclass
class CheckResult:
    name: str
    status: Status
    message: str
    devices: list[str] = field(default_factory=list)
    hint: str = ""

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": self.status.value,
            "message": self.message,
            "devices": list(self.devices),
            "hint": self.hint,
        }


def worst(results: list[CheckResult]) -> Status:
    """Top-level status: the worst of the checks (pass when there are none)."""
    status = Status.PASS
    for r in results:
        if r.status.rank > status.rank:
            status = r.status
    return status


def exit_code(status: Status) -> int:
    """0 pass/warn, 1 fail, 2 error in the checker."""
    if status is Status.FAIL:
        return 1
    if status is Status.ERROR:
        return 2
    return 0
