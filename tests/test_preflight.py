"""slurmqual preflight's engine and flow pieces without Slurm: the choice of
N nodes, the speed judgement (stored medians, the allocation's own, none)
through the burn-in's analysis, each node's outcome, the check step's
output, the pair plan, the drains under the hooks' rules. The whole command
runs on a real Slurm in test_slurm_preflight.py."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys

import pytest

from slurmqual.burnin.judge.analyze import Params
from slurmqual.burnin.judge.plan import rounds
from slurmqual.preflight import judge
from slurmqual.preflight.choose import choose, output_paths, rank, remove_outputs, write_exclude, write_outputs
from slurmqual.preflight.flow import (PreflightError, Request, allocation, drain_bad, partners, preflight,
                                      read_check_reports, rounds_for, speed_reason, Run)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = 8589934592


def pair_lines(nodes, factor, plan, base=400.0, noise=0.005, links=None, seed=1, rails=(), rail_factor=None):
    """Measurement lines as a preflight's pair rounds write them (task.py's
    fields): a pair runs at the slower end's speed, times a link's factor."""
    rng = random.Random(seed)
    out = []
    for rnd in plan:
        for a, b in rnd:
            f = min(factor.get(a, 1.0), factor.get(b, 1.0)) * (links or {}).get(frozenset((a, b)), 1.0)
            out.append({"nodes": [a, b], "busbw": round(base * f * (1 + rng.gauss(0, noise)), 2), "size": REF,
                        "test": "all_reduce", "ok": True, "round": 0})
            for rail in rails:
                rf = min((rail_factor or {}).get((a, rail), 1.0), (rail_factor or {}).get((b, rail), 1.0))
                out.append({"nodes": [a, b], "busbw": round(392 * rf * (1 + rng.gauss(0, noise)), 2),
                            "size": 1048576, "test": "ib_write_bw", "rail": rail, "ok": True})
    return out


def passing_reports(nodes):
    return {n: {"node": n, "status": "pass", "checks": [{"name": "peermem", "status": "pass", "message": "ok"}]}
            for n in nodes}


def nodes_of(k):
    return [f"n{i:02d}" for i in range(1, k + 1)]


# -- the choice ---------------------------------------------------------------------

def test_rank_best_score_first_and_unjudged_last():
    assert rank({"a": 0.95, "b": 1.02, "c": None, "d": 0.99}) == ["b", "d", "a", "c"]


def test_choose_takes_whole_switches_and_the_best_nodes():
    scores = {f"s1-{i}": 1.0 - i / 100 for i in range(4)} | {f"s2-{i}": 1.01 for i in range(3)} | \
        {f"s3-{i}": 0.99 for i in range(2)}
    leaf = {n: n.split("-")[0] for n in scores}
    # 6: s1 whole (4) and s3 whole (2, fills it exactly) rather than the 6 best by score
    got = choose(scores, 6, leaf)
    assert sorted(got) == sorted([*(f"s1-{i}" for i in range(4)), "s3-0", "s3-1"])
    # 3: s2 fits it exactly
    assert sorted(choose(scores, 3, leaf)) == ["s2-0", "s2-1", "s2-2"]
    # 5: s1 whole, then the best 1 from the switch with the fewest spare nodes that holds it
    assert set(choose(scores, 5, leaf)) >= {f"s1-{i}" for i in range(4)}
    # without a topology: the best by score; more than there are: all of them
    assert choose(scores, 3, None) == ["s2-0", "s2-1", "s2-2"]
    assert len(choose(scores, 20, leaf)) == len(scores)


def test_outputs_written_and_removed(tmp_path):
    paths = write_outputs(str(tmp_path), "77", ["n3", "n1", "n2"])
    assert open(paths["hosts"]).read() == "n3\nn1\nn2\n"
    assert open(paths["nodelist"]).read().strip() == "n[1-3]"
    assert open(paths["master"]).read().strip() == "n3"
    assert open(write_exclude(str(tmp_path), "77", ["n5", "n4"])).read().strip() == "n[4-5]"
    remove_outputs(str(tmp_path), "77")
    assert not any(os.path.exists(p) for p in output_paths(str(tmp_path), "77").values())


# -- the pair plan ---------------------------------------------------------------------

@pytest.mark.parametrize("k", [3, 4, 5, 6, 7, 8, 15, 16, 63, 64])
@pytest.mark.parametrize("switched", [False, True])
def test_every_node_meets_two_different_partners(k, switched):
    nodes = nodes_of(k)
    leaf = {n: f"leaf{i // 4}" for i, n in enumerate(nodes)} if switched else None
    plan = rounds_for(nodes, leaf, 2)
    got = partners(plan)
    assert set(got) == set(nodes)
    assert all(len(set(p)) >= 2 and len(set(p)) == len(p) for p in got.values()), got
    for rnd in plan:  # each round a matching: a node in at most one pair
        flat = [x for p in rnd for x in p]
        assert len(flat) == len(set(flat))


# -- the speed judgement -------------------------------------------------------------------

def test_a_small_allocation_is_judged_against_the_stored_fleet_median():
    nodes = nodes_of(3)
    plan = rounds_for(nodes, None, 2)
    raw = pair_lines(nodes, {"n02": 0.8}, plan)
    a, mode, notes = judge.analyse(raw, nodes, Params(), {}, {"all_reduce:pair": 400.0}, None, 4)
    assert mode == "fleet" and a["median"]["all_reduce:pair"] == 400.0
    out = judge.outcomes(nodes, passing_reports(nodes), raw, a, speed_reason)
    # two partners, both slow: left out (fail, or suspect: a burn-in would retest it)
    assert out["n02"].verdict in ("fail", "suspect") and out["n02"].score < 0.85, out["n02"]
    assert out["n01"].verdict == out["n03"].verdict == "pass"
    assert "n02" not in choose({n: o.score for n, o in out.items() if o.verdict == "pass"}, 2)
    # six nodes (fewer than min_own_median here): failed against the stored median, which the reason names
    nodes4 = nodes_of(6)
    raw4 = pair_lines(nodes4, {"n02": 0.8}, rounds_for(nodes4, None, 3))
    a4, m4, _n = judge.analyse(raw4, nodes4, Params(), {}, {"all_reduce:pair": 400.0}, None, 8)
    assert m4 == "fleet"
    out4 = judge.outcomes(nodes4, passing_reports(nodes4), raw4, a4, speed_reason)
    assert out4["n02"].verdict == "fail" and "< 90% of median 400" in out4["n02"].reason, out4["n02"]
    # the same measurements with no stored median: too few to judge against themselves
    a2, mode2, notes2 = judge.analyse(raw, nodes, Params(), {}, {}, None, 4)
    assert a2 is None and mode2 == "none" and "speed not judged" in notes2[0]
    out2 = judge.outcomes(nodes, passing_reports(nodes), raw, a2, speed_reason)
    assert all(o.verdict == "pass" and o.speed == "not judged" for o in out2.values())


def test_without_a_stored_median_the_allocation_judges_itself():
    nodes = nodes_of(6)
    plan = rounds_for(nodes, None, 3)
    raw = pair_lines(nodes, {"n04": 0.85}, plan, links={frozenset(("n01", "n02")): 0.6})
    a, mode, _ = judge.analyse(raw, nodes, Params(), {}, {}, None, 4)
    assert mode == "own"
    out = judge.outcomes(nodes, passing_reports(nodes), raw, a, speed_reason)
    assert out["n04"].verdict == "fail"
    # a slow link between two good nodes is not a slow node: named, neither end failed
    # or drained (an end it cannot clear yet is suspect: not chosen, as the job would cross it)
    assert a["suspect_links"] == [["n01", "n02"]]
    assert "fail" not in (out["n01"].verdict, out["n02"].verdict) and "pass" in (out["n01"].verdict, out["n02"].verdict)
    assert judge.drainable(out, a) == ["n04"]


def test_a_slow_nic_fails_its_node_naming_the_nic():
    nodes = nodes_of(5)
    plan = rounds_for(nodes, None, 2)
    raw = pair_lines(nodes, {}, plan, rails=("mlx5_0", "mlx5_1"), rail_factor={("n03", "mlx5_1"): 0.45})
    a, mode, _ = judge.analyse(raw, nodes, Params(), {}, {}, None, 4)
    out = judge.outcomes(nodes, passing_reports(nodes), raw, a, speed_reason)
    assert out["n03"].verdict == "fail" and out["n03"].reason.startswith("mlx5_1 (rail 1)"), out["n03"]
    assert [n for n, o in out.items() if o.verdict != "pass"] == ["n03"]


def test_a_slow_switch_is_not_a_slow_node_against_stored_medians(tmp_path):
    from slurmqual.burnin.judge.topology import from_config, switch_of

    nodes = nodes_of(12)
    conf = tmp_path / "topology.conf"
    conf.write_text("".join(f"SwitchName=leaf{s} Nodes={','.join(nodes[4 * s:4 * s + 4])}\n" for s in range(3))
                    + "SwitchName=spine Switches=leaf[0-2]\n")
    topo = from_config(str(conf))
    leaf = switch_of(topo)
    plan = rounds_for(nodes, leaf, 3)
    slow = {n: 0.8 for n in nodes if leaf[n] == "leaf1"}
    raw = pair_lines(nodes, slow, plan)
    a, mode, _ = judge.analyse(raw, nodes, Params(), {}, {"all_reduce:pair": 400.0}, topo, 4)
    assert mode == "fleet" and a["suspect_switches"] == ["leaf1"], a["problems"]
    out = judge.outcomes(nodes, passing_reports(nodes), raw, a, speed_reason)
    assert not [n for n, o in out.items() if o.verdict == "fail"], {n: o.to_dict() for n, o in out.items()}
    assert judge.drainable(out, a) == []
    assert any("behind suspect switch leaf1" in " ".join(o.notes) for o in out.values())


def test_check_outcomes_fail_missing_and_error():
    nodes = nodes_of(4)
    plan = rounds_for(nodes, None, 2)
    raw = pair_lines(nodes, {}, plan)
    reports = passing_reports(nodes)
    reports["n01"] = {"node": "n01", "status": "fail", "checks": [
        {"name": "peermem", "status": "fail", "message": "nvidia_peermem not loaded"},
        {"name": "nic_link", "status": "fail", "message": "mlx5_3 down"}]}
    reports["n02"] = {"node": "n02", "status": "error", "checks": [{"name": "dcgm", "status": "error", "message": "x"}]}
    del reports["n03"]
    out = judge.outcomes(nodes, reports, raw, None, speed_reason)
    assert out["n01"].verdict == "fail" and out["n01"].reason == "peermem: nvidia_peermem not loaded (+1 more: nic_link)"
    assert out["n02"].verdict == "pass" and "could not judge" in out["n02"].notes[0]
    assert out["n03"].verdict == "untested" and out["n04"].verdict == "pass"
    assert judge.check_outcome({"checks": "nonsense"}) == ("missing", [])
    assert judge.drainable(out, None) == ["n01"]


def test_a_node_without_a_valid_pair_is_untested_never_failed():
    nodes = nodes_of(6)
    plan = rounds_for(nodes, None, 2)
    raw = pair_lines(nodes, {}, plan)
    for m in raw:
        if "n05" in m["nodes"]:
            m.update(ok=False, busbw=None, error="timed out after 10s", problems=["timed out after 10s"])
    a, _mode, _ = judge.analyse(raw, nodes, Params(), {}, {}, None, 4)
    out = judge.outcomes(nodes, passing_reports(nodes), raw, a, speed_reason)
    assert out["n05"].verdict == "untested" and "n05" not in judge.drainable(out, a)


def test_a_one_node_allocation_is_judged_on_its_checks_and_gpu_tools():
    """One node has no partner: not `untested` for that. Its GPU lines are
    the burn-in task's (gputask.lines_of) of the real H200 logs; a run with
    no number leaves it untested, compare errors fail it."""
    from slurmqual.burnin.read.gpuparse import parse_file
    from slurmqual.burnin.run.gputask import lines_of

    real = os.path.join(REPO, "tests", "data", "real", "device")
    node = ["vm"]
    burn = parse_file(os.path.join(real, "h200_gpu_burn_2026_tc_20s_task_log.txt"), "gpu_burn")
    nvb = parse_file(os.path.join(real, "h200_nvbandwidth_v0.8_task_log.txt"), "nvbandwidth")
    good = lines_of("gpu_burn", "vm", burn, 1, None, "g.log") + lines_of("nvbandwidth", "vm", nvb, 1, None, "n.log")
    assert good and all(d["ok"] for d in good)
    out = judge.outcomes(node, passing_reports(node), [], None, speed_reason)
    assert out["vm"].verdict == "pass" and "no link to measure" in out["vm"].notes[0]
    out = judge.outcomes(node, passing_reports(node), good, None, speed_reason)
    assert out["vm"].verdict == "pass" and "gpu_burn, nvbandwidth" in out["vm"].notes[0]
    hung = lines_of("gpu_burn", "vm", burn.__class__("gpu_burn"), 1, None, "g.log", "timed out after 20s")
    out = judge.outcomes(node, passing_reports(node), hung + good[1:], None, speed_reason)
    assert out["vm"].verdict == "untested" and "timed out after 20s" in out["vm"].notes[0]
    bad = [dict(good[0], errors=3)] + good[1:]
    out = judge.outcomes(node, passing_reports(node), bad, None, speed_reason)
    assert out["vm"].verdict == "fail" and out["vm"].reason == "gpu_burn GPU 0 burn: 3 compare errors"
    # two nodes, one failed its checks: the other's missing pair is still untested
    two = nodes_of(2)
    reports = passing_reports(two)
    reports["n02"]["checks"][0]["status"] = "fail"
    assert judge.outcomes(two, reports, [], None, speed_reason)["n01"].verdict == "untested"


# -- the flow's pieces -------------------------------------------------------------------------

def test_check_reports_read_from_the_real_node_reports_interleaved(tmp_path):
    """Two nodes' real `preflight --node-report` outputs (what the checks
    step runs on each node), their short lines interleaved as srun merges
    them, with srun's own noise; a node with a piece lost is left out."""
    from slurmqual.nodetree import build

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[node]\ngpus = 8\nroot = "{tmp_path}/{{node}}"\n[fabric]\nnics = 8\nrate_gbps = 400\n'
                   f'[hooks]\nstate_dir = "{tmp_path}/state"\nlog_file = "{tmp_path}/l.log"\nsyslog = false\n')
    outputs = {}
    for node, example in (("n1", "h100-roce-healthy"), ("n2", "no-peermem"), ("n3", "nic-down")):
        build(example, str(tmp_path / node))
        p = subprocess.run([sys.executable, "-m", "slurmqual", "preflight", "--node-report", "--level", "fast",
                            "--config", str(cfg)], env=dict(os.environ, SLURMD_NODENAME=node),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        outputs[node] = p.stdout.splitlines()
        assert len(outputs[node]) > 1 and all(len(x) < 1000 for x in outputs[node])  # one report: several short lines
    outputs["n3"] = outputs["n3"][:-1]  # a piece lost (the node died mid-way)
    merged, rng = ["srun: warning: something", "garbage {"], random.Random(4)
    queues = [list(v) for v in outputs.values()]
    while any(queues):
        q = rng.choice([q for q in queues if q])
        merged.append(q.pop(0))
    got = read_check_reports("\n".join(merged), ["n1", "n2", "n3", "n4"])
    assert set(got) == {"n1", "n2"}
    assert judge.check_outcome(got["n2"])[0] == "fail" and judge.check_outcome(got["n1"])[0] != "fail"
    assert [c["name"] for c in judge.check_outcome(got["n2"])[1]] == ["peermem"]


def test_preflight_refuses_outside_a_job(tmp_path):
    with pytest.raises(PreflightError, match="inside a Slurm job"):
        allocation({})
    assert allocation({"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-3]"}) == ("5", ["n1", "n2", "n3"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    p = subprocess.run([sys.executable, "-m", "slurmqual", "preflight", "--need", "2", "--config",
                        os.path.join(REPO, "config", "slurmqual.toml")], env=env, capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert p.returncode == 2 and "inside a Slurm job" in p.stderr


def _config(tmp_path):
    from slurmqual.config import load

    path = tmp_path / "c.toml"
    path.write_text(f"[hooks]\nstate_dir = \"{tmp_path}/state\"\nguard_min = 1\nguard_fraction = 0.1\n")
    return load(str(path), use_cache=False)


def test_drains_follow_the_hooks_rules_and_guard(tmp_path):
    from slurmqual.slurm import NodeInfo
    from slurmqual.testing import FakeAdapter

    config = _config(tmp_path)
    run = Run("9", ["a", "b", "c", "d"], "fast", 60, None)
    for n in run.nodes:
        run.outcomes[n] = judge.NodeOutcome(n, verdict="fail", checks="fail", failed_checks=["peermem"],
                                            reason="peermem: nvidia_peermem not loaded")
    run.outcomes["d"] = judge.NodeOutcome("d", verdict="suspect", checks="pass")
    adapter = FakeAdapter.with_nodes([NodeInfo("a", "allocated"), NodeInfo("b", "allocated", ("DRAIN",), "admin: cable"),
                                      NodeInfo("c", "allocated"), NodeInfo("d", "allocated")])
    drain_bad(config, run, adapter, log=lambda m: None)
    assert adapter.drains == [(("a",), "slurmqual: preflight: peermem: nvidia_peermem not loaded")]
    assert "someone else" in run.not_drained["b"]          # an admin's drain is never replaced
    assert "guard" in run.not_drained["c"]                  # guard_min = 1: the second hook drain is held
    assert "d" not in run.not_drained and "d" not in run.drained  # a suspect is never drained


def test_preflight_in_a_job_whose_steps_cannot_start_reports_every_node_untested(tmp_path, monkeypatch):
    """No srun on PATH (or a launcher that dies): nothing passes, nothing is
    drained, exit 3, the report says why; no node list."""
    config = _config(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    env = {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "n[1-4]"}
    with pytest.raises(PreflightError, match="cannot start the checks step"):
        preflight(config, Request(need=2, out_dir=str(tmp_path)), lambda: None, log=lambda m: None, env=env)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\necho 'srun: error: Unable to create step' >&2\nexit 1\n")
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    run = preflight(config, Request(need=2, out_dir=str(tmp_path), time_s=20), lambda: None, log=lambda m: None,
                    env=env)
    assert run.exit_code == judge.EXIT_NOT_ENOUGH and not run.chosen
    assert all(o.verdict == "untested" for o in run.outcomes.values())
    assert not os.path.exists(output_paths(str(tmp_path), "12")["nodelist"])
    rep = json.load(open(output_paths(str(tmp_path), "12")["json"]))
    assert rep["exit_code"] == 3 and rep["outcomes"]["n1"]["checks"] == "missing"


def _fake_tools(tmp_path, **scripts) -> str:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for name, body in scripts.items():
        (fake / name).write_text("#!/bin/sh\n" + body)
        (fake / name).chmod(0o755)
    return str(fake)


def test_a_hung_squeue_never_pushes_the_preflight_past_its_time(tmp_path, monkeypatch):
    """A slow slurmctld (squeue hangs): each squeue call is cut to the time
    left, so the preflight ends within --time plus a second, not 15 s per
    call past it; the report says the steps could not be listed; nothing
    is drained."""
    import time

    config = _config(tmp_path)
    monkeypatch.setenv("PATH", _fake_tools(tmp_path, squeue=f"exec {shutil.which('sleep')} 60\n",
                                           srun="echo 'srun: error: Unable to create step' >&2\nexit 1\n"))
    env = {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "n[1-4]"}
    drains = []
    t = time.monotonic()
    run = preflight(config, Request(need=2, out_dir=str(tmp_path), time_s=6), lambda: drains.append(1),
                    log=lambda m: None, env=env)
    took = time.monotonic() - t
    assert took < 6 + 2.5, took
    assert run.exit_code == judge.EXIT_NOT_ENOUGH and not drains
    assert any("cannot be listed" in n and "timed out" in n for n in run.notes), run.notes


def test_leftover_steps_are_cancelled_within_the_deadline(tmp_path, monkeypatch):
    """A leftover step is cancelled; a scancel or squeue that hangs is cut
    at the deadline, and the step is reported as left."""
    import time

    from slurmqual.preflight.flow import end_leftover_steps

    config = _config(tmp_path)
    log = []
    sleep, touch = shutil.which("sleep"), shutil.which("touch")
    monkeypatch.setenv("PATH", _fake_tools(tmp_path, squeue="echo 12.0; echo 12.3\n", scancel=f"exec {sleep} 60\n"))
    t = time.monotonic()
    left = end_leftover_steps(config, "12", {"12.0"}, log.append, until=time.monotonic() + 2)
    assert left == ["12.3"] and time.monotonic() - t < 4
    assert "could not cancel leftover step(s) 12.3" in log[-1] and "timed out" in log[-1]
    marker = tmp_path / "cancelled"
    monkeypatch.setenv("PATH", _fake_tools(tmp_path, scancel=f"{touch} {marker}\n"))
    t = time.monotonic()
    left = end_leftover_steps(config, "12", {"12.0"}, log.append, wait_s=20, until=time.monotonic() + 2)
    assert left == ["12.3"] and marker.exists() and time.monotonic() - t < 4   # the step never ends: the wait is cut
    assert "12.3 still ending after 2s" in log[-1], log


def test_a_malformed_preflight_entry_in_a_state_file_is_a_state_error():
    from slurmqual.nodestate import NodeState, StateError

    assert NodeState.from_dict({"node": "n1", "preflight": {"time": 1.0, "verdict": "fail"}}).preflight["verdict"] == "fail"
    with pytest.raises(StateError, match="preflight"):
        NodeState.from_dict({"node": "n1", "preflight": "fail"})


def test_the_checks_step_runs_the_hooks_list_for_the_level(tmp_path):
    from slurmqual.preflight.flow import check_argv

    config = _config(tmp_path)
    fast = check_argv(config, ["n1", "n2", "n3"], "fast")
    assert fast[:5] == ["srun", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--nodelist=n[1-3]"]
    assert fast[fast.index("--only") + 1].split(",") == config.checks_for("prolog")
    std = check_argv(config, ["n1"], "standard")
    assert std[std.index("--only") + 1].split(",") == config.checks_for("healthcheck")
    assert "--only" not in check_argv(config, ["n1"], "slow")  # every check
    assert fast[fast.index("--config") + 1] == config.path


def test_settings_judge_at_the_reference_size_only_and_gpu_tools_on_request(tmp_path):
    from slurmqual.config import load
    from slurmqual.preflight.flow import settings

    path = tmp_path / "c.toml"
    path.write_text('[burnin]\ngpu_tests = ["gpu_burn"]\nrails = ["mlx5_0"]\nreference_size = 1073741824\n'
                    '[preflight]\nrail_duration_s = 2\n')
    config = load(str(path), use_cache=False)
    cfg = settings(config, Request())
    assert cfg["min_bytes"] == cfg["max_bytes"] == "1073741824" and cfg["rail_duration_s"] == 2
    assert cfg["gpu_tests"] == [] and cfg["rails"] == ["mlx5_0"] and cfg["tests"] == ["all_reduce_perf"]
    assert settings(config, Request(gpu_tools=True))["gpu_tests"] == ["gpu_burn"]


def test_outcomes_recorded_in_history_status_and_metrics(tmp_path):
    from slurmqual import events, nodestate
    from slurmqual.config import load
    from slurmqual.preflight.flow import record

    path = tmp_path / "c.toml"
    path.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\nmetrics_dir = "{tmp_path}/metrics"\n')
    config = load(str(path), use_cache=False)
    run = Run("31", ["a", "b"], "fast", 60, None)
    run.outcomes = {"a": judge.NodeOutcome("a", verdict="pass", checks="pass", score=1.01),
                    "b": judge.NodeOutcome("b", verdict="fail", checks="pass", score=0.52,
                                           reason="mlx5_1 (rail 1) 176 Gb/s < 90% of median 392")}
    run.drained = {"b": "slurmqual: preflight: mlx5_1 (rail 1) 176 Gb/s < 90% of median 392"}
    record(config, run, log=lambda m: None)
    spooled = [ev for _p, ev in events.pending(f"{tmp_path}/state")]
    assert {(e["node"], e["kind"]) for e in spooled} == {("a", "preflight"), ("b", "preflight"), ("b", "drain")}
    assert any(e["detail"] == "preflight: job 31: fail: mlx5_1 (rail 1) 176 Gb/s < 90% of median 392 "
               "(score 0.52 of median)" for e in spooled), spooled
    st = nodestate.read(f"{tmp_path}/state", "b")
    assert st.preflight["verdict"] == "fail" and st.preflight["job"] == "31" and st.preflight["drained"] is True
    prom = open(f"{tmp_path}/metrics/slurmqual_preflight_node_b.prom").read()
    assert 'slurmqual_preflight_passed{job="31",node="b",verdict="fail"} 0.0' in prom
    assert 'slurmqual_preflight_score_ratio{node="b"} 0.52' in prom


def test_a_user_who_cannot_write_the_state_dir_gets_a_note_not_a_failure(tmp_path):
    from slurmqual.config import load
    from slurmqual.preflight.flow import record

    (tmp_path / "state").write_text("not a directory")
    path = tmp_path / "c.toml"
    path.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\n')
    config = load(str(path), use_cache=False)
    run = Run("32", ["a"], "fast", 60, None)
    run.outcomes = {"a": judge.NodeOutcome("a", verdict="pass", checks="pass")}
    record(config, run, log=lambda m: None)
    assert any(n.startswith(f"outcomes not recorded in {tmp_path}/state") for n in run.notes), run.notes
