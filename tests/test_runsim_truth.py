"""The issue 22 generator's ground truth (bench/runsim.py truth()), decided
from the fabric and who met whom before any analysis: what it holds a run
to must be something a measurement can show."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import runsim  # noqa: E402  (the issue 22 generator)


def first_round(f: runsim.Fabric) -> list[dict]:
    """Every node paired with every other on the whole-node key and each rail (valid lines)."""
    out = []
    for i, a in enumerate(f.nodes):
        for b in f.nodes[i + 1:]:
            out.append({"nodes": [a, b], "ok": True, "busbw": 1.0})
            out += [{"nodes": [a, b], "ok": True, "busbw": 1.0, "rail": r} for r in f.rails]
    return out


def test_a_nic_behind_its_own_slower_or_as_slow_leaf_is_not_held_to_never_pass():
    # 8 nodes, 2 rails, scalable units of 4: su0-rail1 at 0.82 is the rail-1 leaf of gpu00000-3.
    f = runsim.rail_fabric(8, 2, 4)
    f.switch["su0-rail1"] = 0.82
    f.nic[("gpu00000", "mlx5_1")] = 0.8   # 0.98 of its leaf-mates: nothing shows it
    f.nic[("gpu00001", "mlx5_1")] = 0.5   # 0.61 of its leaf-mates: it shows
    f.nic[("gpu00004", "mlx5_1")] = 0.8   # behind a healthy leaf: it shows
    t = runsim.truth(f, first_round(f))
    assert "gpu00000" not in t.never_pass
    assert {"gpu00001", "gpu00004"} <= t.never_pass
    assert "gpu00000" not in t.must_fail  # its leaf is slow: no clean partner on that rail


def test_a_gpu_15_percent_slow_with_a_first_round_number_must_be_drained_and_named():
    f = runsim.rail_fabric(8, 2, 4)
    f.gpus, f.gpu_noise = 8, 0.02
    f.gpu_slow[("gpu00002", 5)] = 0.85
    f.gpu_slow[("gpu00003", 1)] = 0.85
    first = first_round(f) + [{"nodes": ["gpu00002"], "gpu": 5, "test": "burn", "ok": True, "value": 297.5},
                              {"nodes": ["gpu00003"], "gpu": 1, "test": "burn", "ok": False, "value": None}]
    t = runsim.truth(f, first)
    assert t.must_gpu == {("gpu00002", 5)} and "gpu00002" in t.must_fail
    assert "gpu00003" not in t.must_fail  # its run failed: no number, nothing to judge it by
    assert {"gpu00002", "gpu00003"} <= t.never_pass and not {"gpu00002", "gpu00003"} & t.healthy


def whole_node_round(f: runsim.Fabric) -> list[dict]:
    return [m for m in first_round(f) if "rail" not in m]


def test_a_topology_conf_names_a_slow_rail_leaf_by_its_scalable_units_switch():
    # Slurm's topology.conf knows one switch per scalable unit: a slow rail leaf is named by it.
    f = runsim.rail_fabric(8, 2, 4)
    f.topo_kind = "conf"
    f.switch["su1-rail0"] = 0.75
    name, text = f.topology_text()
    topo = runsim.topology.parse(text, name)
    assert topo.node_switch["gpu00005"] == "su1" and topo.parent["su1"] == "spine"
    t = runsim.truth(f, first_round(f))
    assert t.must_switch == {"su1"} and t.slow_switches == {"su1"}


def test_without_a_topology_no_switch_is_asked_for_and_a_slow_leaf_makes_no_clean_fleet():
    f = runsim.rail_fabric(8, 2, 4)
    f.topo_kind = "none"
    assert f.topology_text() is None
    f.switch["su1-rail0"] = 0.75
    t = runsim.truth(f, first_round(f))
    assert t.must_switch == set() and not t.clean
    assert runsim.truth(runsim.rail_fabric(8, 2, 4), first_round(f)).clean


def test_a_slow_spine_plane_slows_only_paths_between_units_and_asks_for_no_switch():
    f = runsim.rail_fabric(8, 2, 4)
    f.spine["mlx5_1"] = 0.75
    assert f.rail_path("gpu00000", "gpu00004", "mlx5_1") == 0.75
    assert f.rail_path("gpu00000", "gpu00001", "mlx5_1") == 1.0
    f.nic[("gpu00000", "mlx5_1")] = 0.5
    t = runsim.truth(f, first_round(f))
    assert t.must_switch == set() and t.guard is None and not t.clean
    # the rail-1 leaves may be named (their uplinks read slow), rail 0's may not
    assert {"su0-rail1", "su1-rail1"} <= t.slow_switches and "su0-rail0" not in t.slow_switches
    # a partner across the slow spine is no clean partner: gpu00000's NIC rests on its own unit's three
    assert "gpu00000" in t.must_fail and ("gpu00000", "mlx5_1") in t.must_nic


def test_whole_node_tests_only_with_adaptive_routing_see_a_rail_leaf_a_rail_share_of_its_slowness():
    f = runsim.rail_fabric(8, 4, 4)
    f.switch["su1-rail0"] = 0.7      # (3 + 0.7) / 4 = 0.925 on the whole-node key: above the line
    f.combine = "mean"
    assert runsim.truth(f, whole_node_round(f)).must_switch == set()
    f.combine = "min"                # gated by its slowest rail: 0.7
    assert runsim.truth(f, whole_node_round(f)).must_switch == {"su1-rail0"}


def test_per_rail_tests_only_never_see_a_gpu_side_node():
    f = runsim.rail_fabric(8, 2, 4)
    f.gpu["gpu00003"] = 0.5
    f.whole_node = False
    t = runsim.truth(f, [m for m in first_round(f) if "rail" in m])
    assert "gpu00003" not in t.never_pass and "gpu00003" not in t.must_fail and "gpu00003" not in t.healthy


def test_a_slow_switch_the_run_has_no_topology_for_may_trip_the_guard():
    f = runsim.rail_fabric(8, 2, 4)
    f.switch["su1-rail0"] = 0.75
    assert runsim.truth(f, first_round(f)).guard is False   # with its map: named, no guard
    f.topo_kind = "none"
    assert runsim.truth(f, first_round(f)).guard is None


def test_whole_node_tests_only_tolerate_the_units_other_rail_leaves_named():
    f = runsim.rail_fabric(8, 2, 4)
    f.switch["su1-rail0"] = 0.75
    t = runsim.truth(f, whole_node_round(f))
    assert t.must_switch == {"su1-rail0"} and t.slow_switches == {"su1-rail0", "su1-rail1"}
    assert runsim.truth(f, first_round(f)).slow_switches == {"su1-rail0"}  # rails tested: they tell


def test_whole_node_tests_only_tolerate_every_leaf_of_a_unit_under_a_slow_spine_plane():
    f = runsim.rail_fabric(8, 2, 4)
    f.spine["mlx5_1"] = 0.75
    assert runsim.truth(f, whole_node_round(f)).slow_switches == {"su0-rail0", "su0-rail1", "su1-rail0", "su1-rail1"}
    assert "su0-rail0" not in runsim.truth(f, first_round(f)).slow_switches


def test_whole_node_tests_only_with_adaptive_routing_do_not_hold_a_nic_at_0_8_to_never_pass():
    f = runsim.rail_fabric(8, 8, 4)
    f.nic[("gpu00002", "mlx5_3")] = 0.8   # (7 + 0.8) / 8 = 0.975 on the whole-node key
    f.combine = "mean"
    assert "gpu00002" not in runsim.truth(f, whole_node_round(f)).never_pass
    assert "gpu00002" in runsim.truth(f, first_round(f)).never_pass   # its rail key shows it
    f.combine = "min"
    assert "gpu00002" in runsim.truth(f, whole_node_round(f)).never_pass


def test_a_leaf_the_map_has_no_row_for_is_not_asked_for_and_may_trip_the_guard():
    # The map omits unit 1 (gpu00004-7): its slow rail-0 leaf is in no row, the run cannot name it.
    f = runsim.rail_fabric(8, 2, 4)
    f.switch["su1-rail0"] = 0.75
    assert runsim.truth(f, first_round(f)).must_switch == {"su1-rail0"}
    f.unmapped = {"gpu00004", "gpu00005", "gpu00006", "gpu00007"}
    assert "su1-rail0" not in f.topology_text()[1]
    t = runsim.truth(f, first_round(f))
    assert t.must_switch == set() and "su1-rail0" not in t.slow_switches and t.guard is None
    f.unmapped = {"gpu00004"}                 # one node unmapped: the leaf is still in the map
    assert runsim.truth(f, first_round(f)).must_switch == {"su1-rail0"}


def test_a_topology_conf_with_pods_is_a_three_level_tree_the_run_reads():
    f = runsim.rail_fabric(16, 2, 2)           # 8 units of 2 nodes
    f.topo_kind, f.conf_pods = "conf", 4
    name, text = f.topology_text()
    topo = runsim.topology.parse(text, name)
    assert topo.node_switch["gpu00013"] == "su6" and topo.parent["su6"] == "pod1" and topo.parent["pod1"] == "spine"
    assert topo.parent["su3"] == "pod0"


def test_burnin_tests_with_alltoall_give_each_test_its_lines_at_its_level():
    f = runsim.rail_fabric(4, 2, 2)
    cfg = {"tests": ["all_reduce_perf", "alltoall_perf"], "rails": []}
    rounds = [[("gpu00000", "gpu00001"), ("gpu00002", "gpu00003")]]
    lines = runsim.task_lines(f, cfg, "0", f.nodes, rounds, runsim.random.Random(1))
    tests = [(m["test"], len(m["nodes"])) for m in lines]
    assert tests == [("all_reduce", 1)] * 4 + [("all_reduce", 2)] * 2 + [("alltoall", 1)] * 4 + [("alltoall", 2)] * 2
    a2a = [m["busbw"] for m in lines if m["test"] == "alltoall" and len(m["nodes"]) == 2]
    assert all(0.4 * f.base_pair < v < 0.6 * f.base_pair for v in a2a)
    # one test: the lines (and draws) of a run that lists all_reduce only, as before alltoall existed
    one = runsim.task_lines(f, {"tests": ["all_reduce_perf"], "rails": []}, "0", f.nodes, rounds, runsim.random.Random(1))
    assert one == lines[:6]
