"""Per-rail tests: perftest output (real samples), rail measurement keys,
and what the analysis names (NIC, cable/route, switch) on measurements made
by the stand-in ib_write_bw (tests/fakebin) from a fabric model."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from slurmqual.burnin.judge.analyze import analyze, median_for
from slurmqual.burnin.records import Measurement, make_key, split_key
from slurmqual.burnin.read.perftest import client_argv, parse, server_argv
from slurmqual.burnin.judge.plan import rounds
from slurmqual.burnin.run.runner import drain_reason
from slurmqual.burnin.run.task import _rail_measurement
from slurmqual.burnin.judge.topology import parse as parse_topology
from slurmqual.commands.burnin import EXIT_GUARD, EXIT_SWITCH, exit_code

HERE = pathlib.Path(__file__).parent
REAL = HERE / "data" / "real" / "perftest"
FAKE = HERE / "fakebin" / "ib_write_bw"
RAILS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
NODES = [f"n{i:02d}" for i in range(16)]


# -- parsing real perftest output ---------------------------------------------------

@pytest.mark.parametrize("name, test, device, size, gbps", [
    ("ib_write_bw_report_gbits_NDR_CX7_392Gbps.txt", "ib_write_bw", "mlx5_0", 65536, 392.34),
    ("ib_read_bw_report_gbits_NDR_CX7_outstand_reads.txt", "ib_read_bw", "mlx5_0", 65536, 328.61),
    ("ib_send_bw_NDR_CX7_MiB_units_cpu_freq_warning.txt", "ib_send_bw", "mlx5_0", 65536, 46557.03 * 8 * 1048576 / 1e9),
    ("ib_write_bw_use_cuda_report_gbits_all_sizes_A100_2qp_client.txt", "ib_write_bw", "mlx5_0", 8388608, 80.96),
    ("ib_write_bw_loopback_8M_server_client_sequential.txt", "ib_write_bw", "ib0", 8388608, 24056.72 * 8 * 1048576 / 1e9),
    ("ib_write_bw_loopback_allsizes_server_client_interleaved.txt", "ib_write_bw", "ib0", 8388608,
     23240.68 * 8 * 1048576 / 1e9),
])
def test_real_perftest_samples(samples, name, test, device, size, gbps):
    r = parse((samples / "ib" / name).read_text())
    assert r.ok, r.problems
    assert (r.test, r.device) == (test, device)
    assert r.gbps() == (size, pytest.approx(gbps))


def test_real_all_sizes_sweep_keeps_every_size_once(samples):
    r = parse((samples / "ib" / "ib_write_bw_loopback_allsizes_server_client_interleaved.txt").read_text())
    assert [x.size for x in r.rows] == [2 << i for i in range(23)]  # the repeated last row counted once
    assert r.gbps(65536)[1] == pytest.approx(21167.79 * 8 * 1048576 / 1e9)


def test_real_roce_post_list_output():
    r = parse((REAL / "ib_write_bw_post_list_RoCE_report_gbits_8B_issue273_EXCERPT.txt").read_text())
    assert r.ok and r.link_type == "Ethernet" and r.gbps() == (8, 0.48)


def test_real_output_cut_mid_row_is_a_test_error():
    r = parse((REAL / "ib_write_bw_server_RoCE_MB_cut_mid_row_issue234_EXCERPT.txt").read_text())
    assert not r.ok and r.gbps() is None and "cut short" in r.problems[0]


@pytest.mark.parametrize("cut, words", [
    (lambda t: t.split(" #bytes")[0], "no result table"),                  # never got to the table
    (lambda t: t.rsplit("---", 1)[0].rstrip("-\n") + "\n", "not closed"),  # killed after the row
    (lambda t: "Couldn't connect to n01:18515\n", "Couldn't connect"),
    (lambda t: t + t.replace("392.34", "100.00"), "disagree"),
    (lambda t: t.replace("392.34 ", "9392.34 "), "beyond any NIC"),
])
def test_incomplete_or_broken_output_is_a_test_error(samples, cut, words):
    text = (samples / "ib" / "ib_write_bw_report_gbits_NDR_CX7_392Gbps.txt").read_text()
    r = parse(cut(text))
    assert not r.ok and any(words in p for p in r.problems), r.problems


def test_commands_one_port_per_rail_and_gpudirect():
    cfg = {"perftest_dir": "/usr/bin", "rail_port": 18515, "rail_bytes": 1048576, "rail_duration_s": 10,
           "rail_qps": 4, "rail_use_cuda": True, "launcher": "srun", "test_time_limit": "00:10:00"}
    s = server_argv(cfg, "mlx5_3", 3, "n01")
    c = client_argv(cfg, "mlx5_3", 3, "n01", "n02")
    assert s[:5] == ["srun", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=n01"]
    assert c[4] == "--nodelist=n02" and c[-1] == "n01"  # the client connects to the server's node
    for argv in (s, c):
        assert argv[argv.index("-d") + 1] == "mlx5_3" and argv[argv.index("-p") + 1] == "18518"
        assert "--report_gbits" in argv and "--use_cuda=3" in argv


# -- measurement lines ---------------------------------------------------------------

def test_rail_measurement_key_and_unknown_fields():
    m = Measurement.from_dict({"nodes": ["n1", "n2"], "busbw": 392.0, "size": 1048576, "test": "ib_write_bw",
                               "rail": "mlx5_3"})
    assert m.key == "ib_write_bw:rail:mlx5_3" == make_key("ib_write_bw", "rail", "mlx5_3")
    assert split_key(m.key) == ("ib_write_bw", "rail", "mlx5_3")
    assert Measurement.from_dict(m.to_dict()) == m
    with pytest.raises(ValueError, match="unknown field.*rial"):
        Measurement.from_dict({"nodes": ["n1", "n2"], "busbw": 1.0, "size": 1, "rial": "mlx5_3"})
    with pytest.raises(ValueError, match="'rail' must be"):
        Measurement.from_dict({"nodes": ["n1"], "busbw": 1.0, "size": 1, "rail": "mlx5_3"})
    with pytest.raises(ValueError, match="'rail' must be"):
        Measurement.from_dict({"nodes": ["n1", "n2"], "busbw": 1.0, "size": 1, "rail": "a:b"})


# -- the stand-in binary, and what the analysis makes of its output --------------------------

def fake_run(tmp_path, model: dict, nodes=NODES, rails=RAILS) -> list[dict]:
    """Every pair of 3 circle rounds on every rail, through the stand-in's
    client output and the task's own reader."""
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps({"noise": 0.01, **model}))
    env = {**os.environ, "SLURMQUAL_FABRIC_MODEL": str(path)}
    env.pop("SLURMD_NODENAME", None)
    cfg = {"rail_bytes": 1048576}
    out = []
    for r, pairs in enumerate(rounds(nodes, 3)):
        for a, b in pairs:
            for rail in rails:
                log = tmp_path / f"r{r}-{rail}-{a}-{b}.client.log"
                with open(log, "w") as fh:
                    rc = subprocess.run([sys.executable, str(FAKE), "-d", rail, "-p", "18515", "--report_gbits", "-F",
                                         "-s", "1048576", "-D", "10", "-q", "4", "--host", b, a],
                                        stdout=fh, stderr=subprocess.STDOUT, env=env).returncode
                out.append(_rail_measurement(cfg, [a, b], rail, str(log), None, rc, 0, r))
    return out


def judge(raw, topology=None):
    return analyze([Measurement.from_dict(d) for d in raw], topology=topology).to_dict()


def leaves(per=4):
    """4 leaves of 4 nodes, every rail of a node on its leaf (a fabric map)."""
    rows = [f"{n},{r},leaf{i // per}" for i, n in enumerate(NODES) for r in RAILS]
    return parse_topology("node,rail,switch\n" + "\n".join(rows) + "\n", "map.csv")


def test_one_slow_nic_drains_its_node_naming_the_nic(tmp_path):
    raw = fake_run(tmp_path, {"rails": {"n05": {"mlx5_3": 0.45}}})
    assert all(m["ok"] for m in raw) and {m["rail"] for m in raw} == set(RAILS)
    a = judge(raw, leaves())
    assert a["drain"] == ["n05"] and a["nodes"]["n05"]["failed_nics"] == ["mlx5_3"]
    assert all(a["nodes"][n]["failed_nics"] == [] for n in NODES if n != "n05")
    assert median_for(a, "n05") == ("ib_write_bw:rail:mlx5_3", a["median"]["ib_write_bw:rail:mlx5_3"])
    reason = drain_reason(a, "n05", a["nodes"]["n05"]["score"])
    assert reason.startswith("slurmqual: burnin: mlx5_3 (rail 3) 17") and "< 90% of median 39" in reason
    assert len(reason) <= 80 and a["suspect_switches"] == [] and exit_code(a) == 0


def test_a_node_slow_on_every_rail_is_the_part_to_replace_not_each_nic(tmp_path):
    raw = fake_run(tmp_path, {"rail_nodes": {"n05": 0.6}, "rails": {"n09": {"mlx5_1": 0.45, "mlx5_2": 0.45}}})
    a = judge(raw, leaves())
    assert a["drain"] == ["n05", "n09"]
    assert a["nodes"]["n05"]["failed_nics"] == [] and a["nodes"]["n09"]["failed_nics"] == ["mlx5_1", "mlx5_2"]
    reason = drain_reason(a, "n05", a["nodes"]["n05"]["score"])
    assert re.fullmatch(r"slurmqual: burnin: all 4 rails slow: mlx5_\d 2\d\d Gb/s < 90% of median 39\d", reason), reason
    assert drain_reason(a, "n09", a["nodes"]["n09"]["score"]).startswith("slurmqual: burnin: mlx5_1 (rail 1) ")


def test_requalify_drains_a_failed_nic_with_the_burn_ins_reason_naming_it(tmp_path):
    """The analysis leaves a node inside requalify's maintenance reservation
    alone; requalify drains it, with the reason the burn-in would have given."""
    from slurmqual.requalify import Requalify

    raw = fake_run(tmp_path, {"rails": {"n05": {"mlx5_3": 0.45}}, "fail": ["n09"]})
    a = judge(raw, leaves())
    reason = Requalify._burnin_reason(a, "n05", a["nodes"]["n05"])
    assert reason == drain_reason(a, "n05", a["nodes"]["n05"]["score"])
    assert reason.startswith("slurmqual: burnin: mlx5_3 (rail 3) ")
    assert a["nodes"]["n09"]["verdict"] == "untested"
    assert Requalify._burnin_reason(a, "n09", a["nodes"]["n09"]) == "slurmqual: requalify: burn-in untested, score None"


def test_slow_route_on_one_rail_between_good_nics_is_a_link(tmp_path):
    a_, b_ = rounds(NODES, 3)[1][2]
    raw = fake_run(tmp_path, {"rail_links": {f"{a_},{b_}": {"mlx5_2": 0.5}}})
    a = judge(raw, leaves())
    assert a["suspect_links"] == [sorted([a_, b_]) + ["mlx5_2"]]
    assert a["drain"] == [] and a["suspect_switches"] == []


@pytest.mark.parametrize("model, kind", [
    ({"switches": {"leaf1": 0.8}}, "switch"),                                   # a leaf 20% slow
    ({"switches": {"leaf2": 0.75}, "rails": {"n00": {"mlx5_1": 0.45}}}, "switch"),  # ... with a bad NIC elsewhere
])
def test_slow_leaf_is_named_and_none_of_its_nodes_drained(tmp_path, model, kind):
    model = {**model, "leaf": {n: f"leaf{i // 4}" for i, n in enumerate(NODES)}}
    raw = fake_run(tmp_path, model)
    plain = judge(raw)  # without a topology no switch can be named: its nodes look slow
    assert plain["suspect_switches"] == [] and any(v["verdict"] != "pass" for v in plain["nodes"].values())
    a = judge(raw, leaves())
    slow = next(iter(model["switches"]))
    assert a["suspect_switches"] == [slow]
    assert {f["kind"] for f in a["switch_findings"]} == {kind}
    behind = {n for i, n in enumerate(NODES) if f"leaf{i // 4}" == slow}
    assert not behind & set(a["would_drain"])
    assert all(a["nodes"][n]["behind_suspect_switch"] == [slow] for n in behind)
    assert a["drain"] == (["n00"] if "rails" in model else [])
    assert exit_code(a) == EXIT_SWITCH


def test_broken_rail_output_is_a_test_error_not_a_verdict(tmp_path):
    raw = fake_run(tmp_path, {"truncate": ["n03"], "fail": ["n07"]})
    bad = [m for m in raw if not m["ok"]]
    assert bad and all({"n03", "n07"} & set(m["nodes"]) for m in bad)
    assert all(m["busbw"] is None and m["error"] for m in bad)
    a = judge(raw)
    assert a["drain"] == [] and any("test error" in p for p in a["problems"])


def test_exit_codes_guard_wins_over_switch():
    assert exit_code({"guard_tripped": True, "suspect_switches": ["x"]}) == EXIT_GUARD == 3
    assert exit_code({"suspect_switches": ["x"]}) == EXIT_SWITCH == 4
    assert exit_code({"suspect_switches": []}) == 0


# -- at fleet scale, from the simulated rail fabric (tests/fleet.py RailFabric) ------------

from fleet import rail_fleet  # noqa: E402


def test_transient_congestion_names_no_cables_but_a_dead_one_still_shows():
    nodes, topo, ms, plan = rail_fleet(512, noise=0.02, transient=0.04)
    quiet = analyze(ms, nodes, topology=topo)
    assert quiet.drain == [] and quiet.suspect_switches == []
    assert quiet.suspect_links == []  # ~30 transient hits per rail: none is a cable to replace
    a_, b_ = plan[5][2][0]
    _n, _t, ms, _p = rail_fleet(512, noise=0.02, transient=0.04, link={(frozenset((a_, b_)), "mlx5_4"): 0.3})
    a = analyze(ms, nodes, topology=topo)
    assert a.suspect_links == [sorted([a_, b_]) + ["mlx5_4"]] and a.drain == []  # below every hit: a cable


def test_several_slow_leaves_are_each_named_once():
    nodes, topo, ms, _plan = rail_fleet(1024, noise=0.02, switches={"su3-r2": 0.8, "su7-r5": 0.75, "su20-r0": 0.8})
    a = analyze(ms, nodes, topology=topo)
    assert a.suspect_switches == ["su20-r0", "su3-r2", "su7-r5"] and a.drain == [] and not a.guard_tripped
    assert sorted(f["switch"] for f in a.switch_findings) == a.suspect_switches
    assert all(f["kind"] == "switch" and f["nodes"] == 32 for f in a.switch_findings)


def test_slow_pairs_to_one_other_leaf_name_neither_until_a_retest_tells_which():
    """leaf0's uplinks are slow, and the plan paired leaf0 across only with
    leaf1: either leaf's uplinks may be at fault, so neither is named (its
    nodes stay undecided); a retest round pairing their nodes under leaf2 and
    leaf3 tells which."""
    from fleet import RailFabric, run_rails
    from slurmqual.burnin.records import Params
    from slurmqual.burnin.judge.components import attribute
    from slurmqual.burnin.judge.plan import circle

    nodes = [f"n{i:02d}" for i in range(32)]
    leaf_of = {n: f"leaf{i // 8}" for i, n in enumerate(nodes)}
    fab = RailFabric(["mlx5_0"], {(n, "mlx5_0"): s for n, s in leaf_of.items()}, uplinks={"leaf0": 0.7}, noise=0.01)
    under = [nodes[i:i + 8] for i in range(0, 32, 8)]
    within = [[p for leaf in under for p in circle(leaf, 1)[0]]]
    across = [[(under[0][i], under[1][(i + k) % 8]) for i in range(8)]
              + [(under[2][i], under[3][(i + k) % 8]) for i in range(8)] for k in (0, 1)]
    first = run_rails([within + across], fab, seed=1)
    leaf = leaf_of.get
    _ms, found, _g = attribute("ib_write_bw:rail:mlx5_0", first, leaf, Params())
    assert found == []
    retest = [[(under[0][i], under[2][i]) for i in range(8)] + [(under[1][i], under[3][i]) for i in range(8)],
              [(under[0][i], under[3][(i + 1) % 8]) for i in range(8)]
              + [(under[1][i], under[2][(i + 1) % 8]) for i in range(8)]]
    both = first + run_rails([retest], fab, seed=2)
    _ms, found, _g = attribute("ib_write_bw:rail:mlx5_0", both, leaf, Params())
    assert [(f.switch, f.kind) for f in found] == [("leaf0", "uplinks")]


def test_rail_analysis_stays_near_linear():
    """2,048 nodes x 8 rails with a topology (24,576 lines) in well under
    5 s of CPU (about 0.3 s here; the quadratic size pick took minutes)."""
    import time

    nodes, topo, ms, _plan = rail_fleet(2048, noise=0.02, switches={"su3-r2": 0.8},
                                        nic={("gpu0100", "mlx5_3"): 0.5})
    t0 = time.process_time()
    a = analyze(ms, nodes, topology=topo)
    assert time.process_time() - t0 < 5
    assert a.drain == ["gpu0100"] and a.suspect_switches == ["su3-r2"]


def test_a_slow_node_with_one_nic_far_below_its_own_rails_names_that_nic(tmp_path):
    # n05 is slow on every rail (its node), and its mlx5_3 far slower still:
    # the technician is told about the NIC too (the stand-in's own output).
    raw = fake_run(tmp_path, {"rail_nodes": {"n05": 0.7}, "rails": {"n05": {"mlx5_3": 0.5}}})
    a = judge(raw, leaves())
    assert a["drain"] == ["n05"] and a["nodes"]["n05"]["failed_nics"] == ["mlx5_3"]
    assert drain_reason(a, "n05", a["nodes"]["n05"]["score"]).startswith("slurmqual: burnin: mlx5_3 (rail 3) ")
