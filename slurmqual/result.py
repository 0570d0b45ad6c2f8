"""Check outcomes: the verdict half of probe -> check -> verdict -> action."""

from __future__ import annotations

from .records import dataclass, field


class _StatusType(type):
    """Iteration and len() over the members, as for an Enum class."""

    def __iter__(cls):
        return iter(cls._members)

    def __len__(cls):
        return len(cls._members)


class Status(str, metaclass=_StatusType):
    """A check's verdict. Behaves as the `class Status(str, Enum)` it was
    (members, Status("fail") lookup, .name, .value, str/repr/format, equal to
    and hashing as its value, JSON as its value) without importing `enum`,
    which the prolog would pay for before every job (tests/test_result.py
    compares it with an Enum of the same members)."""

    __slots__ = ()
    _members: tuple = ()
    _by_value: dict = {}

    def __new__(cls, value):
        try:
            return cls._by_value[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__name__}") from None

    @classmethod
    def _member(cls, name: str, value: str) -> Status:
        member = str.__new__(cls, value)
        cls._by_value[value] = member
        cls._members += (member,)
        setattr(cls, name, member)
        return member

    @property
    def name(self) -> str:
        return _NAMES[self]

    @property
    def value(self) -> str:
        return str.__str__(self)

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self.value!r}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __reduce__(self):
        return type(self), (self.value,)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot set {name!r} of a {type(self).__name__}")

    # Members (declared for type checkers; _member makes them).
    PASS: Status
    NA: Status
    SKIP: Status
    WARN: Status
    ERROR: Status
    FAIL: Status


_NAMES = {}
for _name, _value in (("PASS", "pass"),
                      ("NA", "na"),          # not applicable on this node (e.g. dcqcn on InfiniBand)
                      ("SKIP", "skip"),      # switched off by config or level
                      ("WARN", "warn"),
                      ("ERROR", "error"),    # the check could not judge (bad input, hung command)
                      ("FAIL", "fail")):     # the node is bad: drain it
    _NAMES[Status._member(_name, _value)] = _name
del _name, _value

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
