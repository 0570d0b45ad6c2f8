"""ib_counters: port error counters vs configured limits."""

import os

from nodes import check, config, tree
from slurmqual.checks.ib_counters import judge
from slurmqual.result import Status

LIMITS = {"symbol_error": 100, "link_downed": 0}


def test_judge_pure():
    assert judge({"mlx5_0/1": {"symbol_error": 100, "link_downed": 0}}, LIMITS).status is Status.PASS
    r = judge({"mlx5_0/1": {"symbol_error": 101, "link_downed": 0}, "mlx5_1/1": {"symbol_error": 0, "link_downed": 1}},
              LIMITS)
    assert r.status is Status.FAIL and r.devices == ["mlx5_0/1", "mlx5_1/1"]
    assert "symbol_error=101 (limit 100)" in r.message and "link_downed=1 (limit 0)" in r.message
    assert judge({}, LIMITS).status is Status.NA


def test_ib_counters_high_example(tmp_path):
    root = tree(tmp_path, "ib-counters-high")
    r = check(root, "ib_counters")
    assert r.status is Status.FAIL and r.devices == ["mlx5_1/1"] and "symbol_error=5021" in r.message
    loose = config(checks={"ib_counters": {"limits": {"symbol_error": 10000, "link_downed": 5}}})
    assert check(root, "ib_counters", loose).status is Status.PASS


def test_counter_bad_input(tmp_path):
    root = tree(tmp_path)
    path = os.path.realpath(f"{root}/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error")
    with open(path, "w") as fh:
        fh.write("lots\n")
    r = check(root, "ib_counters")
    assert r.status is Status.ERROR and "mlx5_0/ports/1/counters/symbol_error" in r.message
    assert "expected an integer" in r.message
    os.unlink(path)
    os.makedirs(path)
    r = check(root, "ib_counters")
    assert r.status is Status.ERROR and "is a directory" in r.message
