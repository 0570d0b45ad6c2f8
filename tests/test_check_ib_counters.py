"""ib_counters: port error counters judged as increases within a window, so a
node recovers by itself once a fixed link stays clean."""

import json
import os

from conftest import T0
from nodes import check, config, context, tree
from slurmqual import counterwindow
from slurmqual.checks import REGISTRY, run_one
from slurmqual.checks.ib_counters import judge
from slurmqual.nodetree import set_port_attr
from slurmqual.result import Status

LIMITS = {"symbol_error": 100, "link_downed": 0}


def test_judge_pure():
    assert judge({"mlx5_0/1": {"symbol_error": 100, "link_downed": 0}}, LIMITS, {}, T0).status is Status.PASS
    r = judge({"mlx5_0/1": {"symbol_error": 101, "link_downed": 0}, "mlx5_1/1": {"symbol_error": 0, "link_downed": 1}},
              LIMITS, {"mlx5_0/1": None, "mlx5_1/1": T0 - 600}, T0)
    assert r.status is Status.FAIL and r.devices == ["mlx5_0/1", "mlx5_1/1"]
    assert "symbol_error +101 (limit 100) since the driver loaded (first reading)" in r.message
    assert "link_downed +1 (limit 0) in 10 min" in r.message
    assert judge({}, LIMITS, {}, T0).status is Status.NA


def test_ib_counters_high_example_fails_on_first_reading(tmp_path, clock):
    root = tree(tmp_path, "ib-counters-high")
    r = check(root, "ib_counters")
    assert r.status is Status.FAIL and r.devices == ["mlx5_1/1"] and "symbol_error +5021" in r.message
    loose = config(checks={"ib_counters": {"limits": {"symbol_error": 10000, "link_downed": 5}}})
    assert check(root, "ib_counters", loose).status is Status.PASS


def test_link_flap_drains_for_one_window_then_the_node_recovers(tmp_path, clock):
    root = tree(tmp_path, "h100-ib-healthy")
    assert check(root, "ib_counters").status is Status.PASS
    clock[0] = T0 + 60
    set_port_attr(root, 2, "counters/link_downed", "1")     # one flap (e.g. a cable reseat)
    r = check(root, "ib_counters")
    assert r.status is Status.FAIL and "mlx5_2/1: link_downed +1 (limit 0) in 1 min" in r.message
    clock[0] = T0 + 1800                                       # still within the hour
    assert check(root, "ib_counters").status is Status.FAIL
    clock[0] = T0 + 3700                                       # flat for a whole window
    r = check(root, "ib_counters")
    assert r.status is Status.PASS, r.message
    clock[0] = T0 + 3800
    set_port_attr(root, 2, "counters/link_downed", "2")     # it flaps again: fails again
    assert check(root, "ib_counters").status is Status.FAIL


def test_counter_reset_counts_its_whole_value(tmp_path, clock):
    root = tree(tmp_path, "h100-ib-healthy")
    set_port_attr(root, 0, "counters/symbol_error", "90")
    assert check(root, "ib_counters").status is Status.PASS       # +90 <= 100
    clock[0] = T0 + 7200
    assert check(root, "ib_counters").status is Status.PASS       # flat
    clock[0] = T0 + 7300
    set_port_attr(root, 0, "counters/symbol_error", "50")       # driver reloaded: 0 -> 50
    r = check(root, "ib_counters", config(checks={"ib_counters": {"limits": {"symbol_error": 40}}}))
    assert r.status is Status.FAIL and "symbol_error +50" in r.message


def test_history_stays_small_however_often_the_hook_runs(tmp_path, clock):
    root = tree(tmp_path, "h100-ib-healthy")
    ctx = context(root)
    for i in range(200):
        clock[0] = T0 + 60 * i
        set_port_attr(root, 0, "counters/symbol_error", str(i // 10))
        assert run_one(REGISTRY["ib_counters"], context(root)).status is Status.PASS
    path = ctx.state_path(f"counters/{ctx.node_key()}.ib_counters.json")
    samples = json.load(open(path))["devices"]["mlx5_0/1"]
    assert 2 <= len(samples) <= 20 and samples[-1][0] >= T0 + 60 * 199 - 900   # flat readings: every 15 min
    assert samples[-1][1]["symbol_error"] == 19


def test_corrupt_or_unwritable_history_is_noted_never_fatal(tmp_path, clock):
    root = tree(tmp_path, "ib-counters-high")
    ctx = context(root)
    path = ctx.state_path(f"counters/{ctx.node_key()}.ib_counters.json")
    os.makedirs(os.path.dirname(path))
    open(path, "w").write('{"devices": {"mlx5_1/1": [[1, "x"]]}}')
    r = run_one(REGISTRY["ib_counters"], ctx)
    assert r.status is Status.FAIL and "unreadable" in r.message and "started afresh" in r.message
    assert json.load(open(path))["version"] == 1                  # rewritten, readable again
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    r = run_one(REGISTRY["ib_counters"], context(root, state_dir=str(blocked)))
    assert r.status is Status.FAIL and "counter history not saved" in r.message


def test_window_arithmetic():
    s = counterwindow.updated([], T0, {"a": 5}, 3600)
    assert s == [(T0, {"a": 0}), (T0, {"a": 5})]
    assert counterwindow.increases(s, T0 + 10, {"a": 5}, 3600) == ({"a": 5}, T0)
    assert counterwindow.increases(s, T0 + 3600, {"a": 5}, 3600) == ({"a": 0}, T0)
    future = counterwindow.updated([(T0 + 999, {"a": 1})], T0, {"a": 1}, 3600)   # clock went back
    assert all(t <= T0 for t, _ in future)


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


def _no_pma(root, dev):
    """What the kernel prints for every port counter of a device without a PMA
    (iWARP: drivers/infiniband/core/sysfs.c show_pma_counter)."""
    counters = os.path.realpath(f"{root}/sys/class/infiniband/{dev}/ports/1/counters")
    for name in os.listdir(counters):
        with open(os.path.join(counters, name), "w") as fh:
            fh.write("N/A (no PMA)\n")


def test_counters_without_a_pma_are_na_for_that_port_not_an_error(tmp_path, clock):
    root = tree(tmp_path)
    _no_pma(root, "mlx5_3")
    r = check(root, "ib_counters")
    assert r.status is Status.PASS and r.message.startswith("7 ports within error limits"), r
    assert "(counters N/A, no PMA: mlx5_3/1)" in r.message
    # A bad port beside it is still found.
    set_port_attr(root, 0, "counters/link_downed", "3")
    r = check(root, "ib_counters")
    assert r.status is Status.FAIL and r.devices == ["mlx5_0/1"] and "no PMA: mlx5_3/1" in r.message
    # Every port without a PMA: nothing to judge, not an error.
    for n in range(8):
        _no_pma(root, f"mlx5_{n}")
    r = check(root, "ib_counters")
    assert r.status is Status.NA and "no port with error counters" in r.message and "mlx5_7/1" in r.message
