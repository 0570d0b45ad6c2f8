"""slurmqual.records behaves like stdlib dataclasses for the subset the hot
path uses: each test builds the same class both ways and compares."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from slurmqual import records


def both(frozen: bool = False):
    """The same class body built by the stdlib and by slurmqual.records."""
    out = []
    for make, fld in ((dataclasses.dataclass, dataclasses.field), (records.dataclass, records.field)):
        class Point:
            x: int
            y: str = "a"
            tags: list[str] = fld(default_factory=list)

            @property
            def label(self) -> str:
                return f"{self.x}{self.y}"

        out.append(make(frozen=frozen)(Point))
    return out


def outcome(fn):
    """The value, or the exception type and message, of fn()."""
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - compared between the two builds
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("args,kwargs", [
    ((1,), {}), ((1, "b"), {}), ((1, "b", ["t"]), {}), ((), {"x": 2, "tags": ["u"]}), ((1,), {"y": "c"}),
    ((), {}), ((1, "b", [], 4), {}), ((1,), {"x": 2}), ((1,), {"z": 3}),
])
def test_init_repr_and_errors_match_the_stdlib(frozen, args, kwargs):
    std, rec = both(frozen)
    got_std = outcome(lambda: repr(std(*args, **kwargs)))
    got_rec = outcome(lambda: repr(rec(*args, **kwargs)))
    assert got_rec == got_std


def test_missing_arguments_are_named_like_python_does():
    def triple(make):
        class Triple:
            a: int
            b: int
            c: int

        return make(Triple)

    std, rec = triple(dataclasses.dataclass), triple(records.dataclass)
    assert outcome(rec) == outcome(std)
    assert outcome(lambda: rec(1)) == outcome(lambda: std(1))
    assert "'a', 'b', and 'c'" in outcome(rec)[1]


@pytest.mark.parametrize("frozen", [False, True])
def test_equality_defaults_and_hashing_match_the_stdlib(frozen):
    std, rec = both(frozen)
    a, b, c = rec(1), rec(1), rec(2)
    assert (a == b, a == c, a == std(1)) == (True, False, False)
    assert a.tags is not b.tags  # a fresh default per instance
    assert a.label == "1a" and a.__match_args__ == std.__match_args__ == ("x", "y", "tags")
    assert "tags" not in rec.__dict__ and rec.y == std.y == "a"
    if frozen:
        assert hash(rec(1, "b", ())) == hash(rec(1, "b", ()))
        with pytest.raises(AttributeError):
            a.x = 5
        with pytest.raises(records.FrozenInstanceError):
            del a.y
        assert a.x == 1
    else:
        assert rec.__hash__ is None and std.__hash__ is None
        a.x = 5
        assert a.x == 5 and a != b


def test_unsupported_features_are_refused_not_ignored():
    with pytest.raises(ValueError):
        @records.dataclass
        class Mutable:
            items: list = []  # noqa: RUF012 - the point of the test

    with pytest.raises(TypeError):
        @records.dataclass
        class Order:
            a: int = 0
            b: int

    with pytest.raises(TypeError):
        @records.dataclass
        class Post:
            a: int

            def __post_init__(self):
                pass

    with pytest.raises(TypeError):
        records.dataclass(order=True)


def test_the_prolog_path_does_not_import_dataclasses():
    """What this module is for: the hot-path modules build their classes without it."""
    code = ("import sys; import slurmqual.result, slurmqual.nodestate, slurmqual.probe.pci, slurmqual.probe.rdma, "
            "slurmqual.probe.nvidia, slurmqual.checks.nic_link, slurmqual.checks.gpu_nic_affinity; "
            "print('dataclasses' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
