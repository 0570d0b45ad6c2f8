"""Status is not an Enum (the prolog would import `enum` for it before every
job) but behaves as the `class Status(str, Enum)` it replaced: compared here
with that class, member by member."""

from __future__ import annotations

import copy
import json
import pickle
from enum import Enum

import pytest

from slurmqual.result import CheckResult, Status, exit_code, worst


class EnumStatus(str, Enum):  # the class Status was before
    PASS = "pass"
    NA = "na"
    SKIP = "skip"
    WARN = "warn"
    ERROR = "error"
    FAIL = "fail"


PAIRS = list(zip(Status, EnumStatus))


def test_same_members_in_the_same_order():
    assert len(Status) == len(EnumStatus) == 6
    assert [(s.name, s.value) for s in Status] == [(e.name, e.value) for e in EnumStatus]
    assert all(getattr(Status, e.name) is s for s, e in PAIRS)


@pytest.mark.parametrize("s,e", PAIRS, ids=[e.name for e in EnumStatus])
def test_member_behaves_as_the_enum_member(s, e):
    assert (str(s), repr(s), format(s), f"{s:>20}", f"{s!s}", "%s" % s) == \
           (str(e).replace("EnumStatus", "Status"), repr(e).replace("EnumStatus", "Status"),
            format(e).replace("EnumStatus", "Status"), f"{e:>20}".replace("EnumStatus", "    Status"),
            f"{e!s}".replace("EnumStatus", "Status"), ("%s" % e).replace("EnumStatus", "Status"))
    assert s == e.value and s == e and hash(s) == hash(e) == hash(e.value)
    assert isinstance(s, str) and type(s.value) is str and s.value == e.value
    assert Status(e.value) is s and Status(s) is s
    assert json.dumps(s) == json.dumps(e) and json.dumps({s: [s]}) == json.dumps({e: [e]})
    assert pickle.loads(pickle.dumps(s)) is s and copy.copy(s) is s and copy.deepcopy({"k": s})["k"] is s
    assert {s: 1}[e.value] == 1 and e.value in {s}
    with pytest.raises(AttributeError):
        s.value = "other"


def test_ordering_as_strings_and_rank_as_before():
    for (s1, e1) in PAIRS:
        for (s2, e2) in PAIRS:
            assert (s1 < s2) == (e1 < e2) and (s1 == s2) == (e1 == e2)
    assert [s.rank for s in Status] == [0, 0, 0, 1, 2, 3]


@pytest.mark.parametrize("bad", ["PASS", "Pass", "", "ok", None, 0, ["pass"]])
def test_unknown_value_is_a_value_error_as_for_the_enum(bad):
    with pytest.raises(ValueError) as mine:
        Status(bad)
    with pytest.raises(ValueError) as theirs:
        EnumStatus(bad)
    assert str(mine.value) == str(theirs.value).replace("EnumStatus", "Status")


def test_verdict_helpers_and_record_form():
    results = [CheckResult("a", Status.PASS, ""), CheckResult("b", Status.WARN, ""), CheckResult("c", Status.NA, "")]
    assert worst(results) is Status.WARN and exit_code(worst(results)) == 0
    assert worst(results + [CheckResult("d", Status("error"), "")]) is Status.ERROR
    assert exit_code(Status.FAIL) == 1 and exit_code(Status.ERROR) == 2 and worst([]) is Status.PASS
    d = CheckResult("d", Status.FAIL, "m", ["x"]).to_dict()
    assert d["status"] == "fail" and type(d["status"]) is str and json.loads(json.dumps(d))["status"] == "fail"
