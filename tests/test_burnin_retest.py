"""Retest rounds (burnin/run/retest.py) and the switch-aware plan (burnin/judge/plan.py).

The run directory is made by the real `submit` (through an adapter that only
records sbatch lines: no Slurm here; tests/test_slurm_burnin.py runs it all on
real Slurm), its task results are what `rundir.write_result` writes for a
fleet's measurements (tests/fleet.py), and the analysis is the real one."""

from __future__ import annotations

import json
import os

import pytest

from fleet import H100, INTRA, Fabric, names, run, run_pairs
from slurmqual.burnin.run import retest, runner
from slurmqual.burnin.results import rundir
from slurmqual.burnin.judge.plan import groups, retest_plan, rounds
from slurmqual.burnin.results.rundir import write_result
from slurmqual.burnin.run.task import planned_group, planned_rounds
from slurmqual.config import load
from slurmqual.slurm import SlurmError
from slurmqual.testing import FakeAdapter

NODES = names(16)
BORDERLINE = Fabric(net={"gpu0003": 0.88}, noise=0.03)  # below the line, inside the noise margin: retest


class Recorder(FakeAdapter):
    """Records sbatch lines and cancels; `fail_at`: the submission (1-based) that fails or is interrupted."""

    def __init__(self, fail_at: int | None = None, exc: BaseException | None = None):
        super().__init__()
        self.fail_at, self.exc = fail_at, exc

    def submit(self, argv, script=None):
        if self.fail_at is not None and len(self.submitted) + 1 == self.fail_at:
            raise self.exc or SlurmError("sbatch: error: Invalid reservation name specified")
        return super().submit(argv, script)


def config(tmp_path, rounds=2):
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[burnin]\nrun_dir = "{tmp_path}/runs"\ngroup_size = 16\nmax_retest_rounds = {rounds}\n'
                   f'reservation = "burnin"\n[store]\npath = "{tmp_path}/sq.db"\n')
    return load(str(cfg), use_cache=False)


def new_run(tmp_path, cfg, fabric=BORDERLINE, seed=3, retest_on=True):
    out = runner.submit(cfg, Recorder(), NODES, None, None, retest=retest_on)
    ms = run(NODES, fabric, seed=seed)
    write_result(out["run_dir"], {"task": "0", "nodes": NODES, "complete": True,
                                  "measurements": [m.to_dict() for m in ms], "versions": {}})
    return out["run_dir"]


def analyse(cfg, run_dir, adapter, follow_up=True, stage=None):
    plan, raw, _versions = runner.load_run(run_dir)
    a = runner.judge(cfg, raw, plan["scope"], {})
    a.incomplete_tasks = runner.incomplete_tasks(run_dir)
    if stage is None:  # the analysis job of the latest round
        stage = max((s["round"] for s in rundir.submitted(run_dir)), default=0)
    a.retest = retest.settle(cfg, run_dir, plan, raw, a, stage if follow_up else None, lambda: adapter,
                             log=lambda _m: None)
    return a


def run_round(run_dir, stage, fabric, seed, errored=False):
    """What the round's task jobs measure: their planned pairs on this fabric
    (a retest task runs pairs only); `errored`: every test crashed."""
    rec = rundir.load_stage(run_dir, stage)
    for i, group in enumerate(rec["groups"]):
        tid = rundir.task_id(stage, i)
        nodes, rnds = rundir.task_plan(run_dir, tid)
        assert nodes == group
        ms = [dict(m.to_dict(), retest=stage) for m in run_pairs([[tuple(p) for p in r] for r in rnds], fabric, seed)
              if len(m.nodes) == 2]
        if errored:
            ms = [dict(m, ok=False, busbw=None, error="Test NCCL failure") for m in ms]
        write_result(run_dir, {"task": tid, "nodes": group, "complete": True, "measurements": ms, "versions": {}})


def test_a_retest_node_gets_a_round_submitted_pinned_to_exactly_its_pairs(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg)
    adapter = Recorder()
    a = analyse(cfg, run_dir, adapter)
    assert a.nodes["gpu0003"]["verdict"] == "retest" and a.drain == []
    assert a.retest["next"]["round"] == 1 and a.retest["final"] is False and a.retest["max_rounds"] == 2
    rec = rundir.load_stage(run_dir, 1)
    assert rec["state"] == "submitted" and rec["suspects"] == ["gpu0003"]
    pairs = [tuple(p) for rnd in rec["rounds"] for p in rnd]
    assert len(pairs) == 2 and all(p[0] == "gpu0003" and a.nodes[p[1]]["verdict"] == "pass" for p in pairs)
    met = retest.partners_met(runner.load_run(run_dir)[1])["gpu0003"]
    assert not {p[1] for p in pairs} & met  # new partners only
    (task_argv, task_script), (ana_argv, ana_script) = adapter.submitted
    assert f"--nodes={len(rec['groups'][0])}" in task_argv and "--reservation=burnin" in task_argv
    assert any(x.startswith("--nodelist=") for x in task_argv) and "SLURMQUAL_BURNIN_TASK=r1-0" in task_script
    assert "--dependency=afterany:101" in ana_argv and ana_script.endswith("--follow-up 1")
    assert not any(x.startswith("--reservation") for x in ana_argv)  # the analysis runs anywhere, as in round 0
    assert planned_group(run_dir, "r1-0") == rec["groups"][0]
    assert planned_rounds(run_dir, rec["groups"][0], 3, "r1-0") == [[tuple(p) for p in r] for r in rec["rounds"]]
    # Until its task wrote a result, the round's task is incomplete; a hand re-analysis submits nothing more.
    assert runner.incomplete_tasks(run_dir) == ["r1-0"]
    again = Recorder()
    b = analyse(cfg, run_dir, again, follow_up=False)
    assert again.submitted == [] and b.nodes["gpu0003"]["verdict"] == "retest"
    assert rundir.describe(rundir.current(run_dir)) == "retest round 1 of 2 submitted: task jobs 101, analysis job 102"


def test_the_retest_rounds_decide_the_node_with_all_measurements(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg)
    analyse(cfg, run_dir, Recorder())
    healthy = Fabric(noise=0.03)  # the first round's partners were the trouble: with new ones it is fine
    run_round(run_dir, 1, healthy, seed=4)
    a = analyse(cfg, run_dir, Recorder())
    raw = runner.load_run(run_dir)[1]
    assert {m.get("retest") for m in raw} == {None, 1}
    assert a.retest["round"] == 1
    if not a.retest["final"]:  # not yet (gpu0003 still retest, or its slow round-0 links measured again): round 2
        run_round(run_dir, 2, healthy, seed=5)
        a = analyse(cfg, run_dir, Recorder())
    assert a.retest["final"] is True and a.nodes["gpu0003"]["verdict"] in ("pass", "fail")
    assert not [n for n, v in a.nodes.items() if v["verdict"] == "retest"]


def test_still_ambiguous_after_the_last_round_is_untested_for_a_stated_reason(tmp_path):
    cfg = config(tmp_path, rounds=1)
    run_dir = new_run(tmp_path, cfg)
    analyse(cfg, run_dir, Recorder())
    # The retest round brings no evidence: every pair test of the suspect errored.
    run_round(run_dir, 1, Fabric(), seed=6, errored=True)
    adapter = Recorder()
    a = analyse(cfg, run_dir, adapter)
    v = a.nodes["gpu0003"]
    assert v["verdict"] == "untested" and v["why"] == "still below the line within the noise after 1 retest round(s)"
    assert a.retest["untested"] == {"gpu0003": v["why"]} and a.drain == [] and "gpu0003" not in a.would_drain
    assert adapter.submitted == [] and a.retest["final"] is True and a.retest_plan == []
    assert any(p.startswith("gpu0003: untested: still below the line") for p in a.problems)


def test_no_retest_keeps_the_printed_plan(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg, retest_on=False)
    adapter = Recorder()
    a = analyse(cfg, run_dir, adapter)
    assert json.load(open(os.path.join(run_dir, "plan.json")))["max_retest_rounds"] == 0
    assert adapter.submitted == [] and a.nodes["gpu0003"]["verdict"] == "retest" and a.retest_plan
    assert a.retest == {"round": 0, "max_rounds": 0, "next": None, "final": True, "untested": {}}


def test_a_failed_submission_is_a_problem_and_leaves_the_nodes_retest(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg)
    adapter = Recorder(fail_at=2)  # the task job went in, the analysis job did not
    a = analyse(cfg, run_dir, adapter)
    assert a.nodes["gpu0003"]["verdict"] == "retest" and a.drain == [] and a.retest["final"] is True
    assert "Invalid reservation" in a.retest["failed"]
    assert any(p.startswith("retest round 1 of 2 could not be submitted: sbatch: error: Invalid reservation")
               and "stay retest (not drained)" in p for p in a.problems)
    assert adapter.cancelled == ["101"] and adapter.cancelled_names  # the task job nobody would analyse
    rec = rundir.load_stage(run_dir, 1)
    assert rec["state"] == "failed" and rec["tasks"] == {"r1-0": "101"}
    assert runner.incomplete_tasks(run_dir) == []  # a failed round is not part of the run
    assert rundir.current(run_dir)["round"] == 0


def test_an_interrupted_submission_cancels_its_jobs_and_says_so(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg)
    adapter = Recorder(fail_at=2, exc=KeyboardInterrupt("signal 15"))
    with pytest.raises(KeyboardInterrupt):
        analyse(cfg, run_dir, adapter)
    rec = rundir.load_stage(run_dir, 1)
    assert rec["state"] == "cancelled" and rec["error"] == "signal 15" and "101" in adapter.cancelled
    assert rundir.current(run_dir)["round"] == 0 and runner.incomplete_tasks(run_dir) == []


def test_an_analysis_interrupted_after_submitting_cancels_the_round(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg)
    analyse(cfg, run_dir, Recorder())
    adapter = Recorder()
    retest.cancel_round(adapter, run_dir, rundir.load_stage(run_dir, 1), "the analysis that submitted it was interrupted")
    assert adapter.cancelled == ["101", "102"]
    stage = rundir.current(run_dir)
    assert stage["round"] == 1 and stage["state"] == "cancelled"  # watch: that round's analysis never ran
    assert rundir.planned_tasks(run_dir, json.load(open(os.path.join(run_dir, "plan.json")))) == ["0"]


def test_a_requeued_analysis_never_submits_the_same_round_twice(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg)
    analyse(cfg, run_dir, Recorder())
    adapter = Recorder()
    a = analyse(cfg, run_dir, adapter, stage=0)  # round 0's analysis job again (requeued)
    assert adapter.submitted == [] and a.retest["next"]["analysis"] == "102"


def test_decided_fails_drain_at_once_unless_the_final_count_could_trip_the_guard(tmp_path):
    cfg = config(tmp_path)
    slow = Fabric(net={"gpu0003": 0.88, "gpu0009": 0.6}, noise=0.03)
    run_dir = new_run(tmp_path, cfg, fabric=slow)
    a = analyse(cfg, run_dir, Recorder())
    assert a.drain == ["gpu0009"] and a.retest["next"]  # 1 fail + 1 retest <= the guard's 2
    tight = config(tmp_path)
    tight["burnin"]["guard_min"] = 1
    run_dir = new_run(tmp_path, tight, fabric=slow)
    a = analyse(tight, run_dir, Recorder())
    assert a.drain == [] and a.retest["held"] == ["gpu0009"]
    assert any("held until the retest rounds end" in p for p in a.problems)


def test_decided_fails_wait_while_nodes_the_budget_keeps_could_trip_the_guard(tmp_path):
    # One clear fail, four nodes at 0.89: the three whose estimate cannot
    # decide them stay `retest` (the budget's 2, and up to the guard's 3 for
    # those: before, the third was left `untested` below the line), one
    # passes; every later analysis judges them again and may fail them:
    # 1 + 3 could exceed a guard of 3, so the fail's drain waits for the
    # last round.
    cfg = config(tmp_path)
    cfg["burnin"]["guard_min"] = 3
    four = ("gpu0002", "gpu0005", "gpu0012", "gpu0015")
    run_dir = new_run(tmp_path, cfg, fabric=Fabric(net={"gpu0009": 0.6, **dict.fromkeys(four, 0.89)}, noise=0.03),
                      seed=4)
    a = analyse(cfg, run_dir, Recorder())
    verdicts = [a.nodes[n]["verdict"] for n in four]
    assert verdicts.count("retest") == 3 and verdicts.count("untested") == 0
    assert [n for n, v in a.nodes.items() if v["verdict"] == "fail"] == ["gpu0009"]
    assert a.drain == [] and a.retest["held"] == ["gpu0009"] and a.retest["next"]
    assert any("held until the retest rounds end" in p for p in a.problems)


def test_no_good_partner_leaves_untested_with_the_reason(tmp_path):
    cfg = config(tmp_path)
    run_dir = new_run(tmp_path, cfg)
    plan, raw, _v = runner.load_run(run_dir)
    a = runner.judge(cfg, raw, plan["scope"], {})
    for v in a.nodes.values():
        if v["verdict"] == "pass":
            v["verdict"] = "fail"  # nobody proven good to pair with
    a.guard_tripped = False
    a.retest_plan = []
    a.retest = retest.settle(cfg, run_dir, plan, raw, a, 0, Recorder, log=lambda _m: None)
    assert a.nodes["gpu0003"] == dict(a.nodes["gpu0003"], verdict="untested", why="no proven-good node to pair it with")
    # No round follows: the run ends here, and says so with the reason (not as "undecided").
    assert a.retest["final"] and a.retest["untested"]["gpu0003"] == "no proven-good node to pair it with"
    assert "undecided" not in a.retest


# -- switch-aware plan -------------------------------------------------------------

SWITCH = {n: f"leaf{i // 8}" for i, n in enumerate(names(32))}


def is_matching(rnd):
    seen = [n for p in rnd for n in p]
    return len(seen) == len(set(seen))


def test_groups_hold_two_switch_halves_and_rounds_go_within_then_across():
    gs = groups(names(32), 16, SWITCH)
    assert [len(g) for g in gs] == [16, 16] and all(len({SWITCH[n] for n in g}) == 2 for g in gs)
    used = set()
    for g in gs:
        rs = rounds(g, 3, SWITCH)
        assert len(rs) == 3 and all(len(r) == 8 and is_matching(r) for r in rs)  # perfect matchings
        assert all(SWITCH[a] == SWITCH[b] for a, b in rs[0])                      # within the switch first
        assert all(SWITCH[a] != SWITCH[b] for r in rs[1:] for a, b in r)          # then across: its uplinks
        pairs = [frozenset(p) for r in rs for p in r]
        assert len(pairs) == len(set(pairs)) and not used & set(pairs)
        used |= set(pairs)


def test_odd_switches_still_pair_every_node_but_one():
    sw = {n: f"leaf{i % 3}" for i, n in enumerate(names(11))}
    (g,) = groups(names(11), 16, sw)
    rs = rounds(g, 4, sw)
    assert len(rs) == 4 and all(len(r) == 5 and is_matching(r) for r in rs)
    assert len({frozenset(p) for r in rs for p in r}) == 20
    assert sum(sw[a] == sw[b] for a, b in rs[0]) >= 4


def test_without_a_map_the_plan_is_unchanged():
    assert groups(names(33), 16, {}) == groups(names(33), 16) and rounds(names(8), 3, None) == rounds(names(8), 3)
    assert groups(names(3), 2) == [names(3)]  # never a group of one


def test_retest_partners_are_new_and_under_a_new_switch():
    sw = {"s1": "a", "g1": "a", "g2": "a", "g3": "b", "g4": "c"}
    plan = retest_plan(["s1"], ["g1", "g2", "g3", "g4"], met={"s1": {"g1"}}, switch_of=sw)
    partners = [p[1] for rnd in plan for p in rnd]
    assert partners == ["g3", "g4"]  # not g1 (met), not g2 (under the switch it met g1 on)


def test_submit_with_a_switch_map_records_each_groups_rounds(tmp_path):
    cfg = config(tmp_path)
    out = runner.submit(cfg, Recorder(), names(32), None, None, switch_of=SWITCH)
    plan = json.load(open(os.path.join(out["run_dir"], "plan.json")))
    assert len(plan["groups"]) == 2 and len(plan["group_rounds"]) == 2
    got = planned_rounds(out["run_dir"], plan["groups"][1], 3, "1")
    assert got == [[tuple(p) for p in r] for r in rounds(plan["groups"][1], 3, SWITCH)]


def test_the_site_topology_feeds_the_plan_and_a_broken_one_is_a_clear_problem(tmp_path):
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=leaf0 Nodes=gpu[0001-0008]\nSwitchName=leaf1 Nodes=gpu[0009-0016]\n"
                    "SwitchName=spine Switches=leaf[0-1]\n")
    cfg = config(tmp_path)
    cfg["burnin"]["topology"] = str(topo)
    sw = runner.switch_map(cfg)
    assert sw["gpu0001"] == "leaf0" and sw["gpu0016"] == "leaf1"
    out = runner.submit(cfg, Recorder(), NODES, None, None, switch_of=sw)
    plan = json.load(open(os.path.join(out["run_dir"], "plan.json")))
    assert all(sw[a] == sw[b] for a, b in plan["group_rounds"][0][0])
    topo.write_text("SwitchName=leaf0 Nodes=gpu[0001-\n")
    with pytest.raises(runner.BurninError, match="burnin.topology"):
        runner.switch_map(cfg)
    problems = []
    assert runner.switch_map(cfg, log=problems.append) is None and "retest partners chosen without it" in problems[0]


def test_requalify_retest_meets_the_references_its_first_round_left_unpaired(tmp_path):
    """requalify reserves more reference nodes than its first round pairs with
    (`--reference 4`, 2 partners): the run's references are every non-swapped
    node of its scope, so the retest round pairs the borderline swapped node
    with the two it has not met (not the same two again, which decides nothing)."""
    from slurmqual.burnin.judge.analyze import analyze
    from slurmqual.requalify import pairing_rounds

    cfg = config(tmp_path)
    swapped, refs = "gpu0003", ["gpu0005", "gpu0004", "gpu0002", "gpu0001"]
    first = pairing_rounds([swapped], refs, 2)
    out = runner.submit(cfg, Recorder(), [swapped, *refs], None, "maint", explicit_rounds=first)
    fabric = Fabric(net={swapped: 0.86})  # inside the margin with 2 partners, judged at the fleet's level
    write_result(out["run_dir"], {"task": "0", "nodes": sorted([swapped, *refs]), "complete": True, "versions": {},
                                  "measurements": [m.to_dict() for m in run_pairs([[tuple(p) for p in r] for r in first],
                                                                                 fabric)]})
    plan, raw, _versions = runner.load_run(out["run_dir"])
    trusted = rundir.reference_nodes(plan)
    assert trusted == set(refs) and rundir.reference_nodes(rundir.read_plan(new_run(tmp_path, cfg))) == set()
    a = analyze([runner.Measurement.from_dict(d) for d in raw], plan["scope"], runner.params(cfg["burnin"]),
                fleet_level={"all_reduce:pair": fabric.base, f"all_reduce:intra:{H100}": fabric.base * INTRA[H100]},
                trusted=trusted)
    assert a.nodes[swapped]["verdict"] == "retest" and set(a.nodes) == {swapped}  # references are evidence only
    adapter = Recorder()
    a.retest = retest.settle(cfg, out["run_dir"], plan, raw, a, 0, lambda: adapter, trusted=trusted,
                             log=lambda _m: None)
    rec = rundir.load_stage(out["run_dir"], 1)
    met = {q for rnd in first for _s, q in rnd}
    assert rec["suspects"] == [swapped] and {q for rnd in rec["rounds"] for _s, q in rnd} == set(refs) - met


def test_a_node_no_round_re_measured_is_not_said_to_be_still_below_after_the_rounds(tmp_path):
    """Four nodes below the line within the noise and a budget of two: the
    two the budget leaves out of the round are not "still below the line
    after 1 retest round(s)" (no round measured them): the reason says
    that no round re-measured them."""
    cfg = config(tmp_path, rounds=1)
    slow = {"gpu0003": 0.88, "gpu0006": 0.875, "gpu0009": 0.88, "gpu0012": 0.87}
    run_dir = new_run(tmp_path, cfg, Fabric(net=slow, noise=0.03))
    a = analyse(cfg, run_dir, Recorder())
    retested = set(rundir.load_stage(run_dir, 1)["suspects"])
    left = {n for n in slow if a.nodes[n]["verdict"] == "untested"}
    assert retested and left and not retested & left
    run_round(run_dir, 1, Fabric(net=slow, noise=0.03), seed=6, errored=True)
    # the last round's analysis job, as the run's judges it: with the round state (rounds spent)
    plan, raw, _versions = runner.load_run(run_dir)
    adapter = Recorder()
    state = retest.round_state(run_dir, lambda: adapter, None, plan["scope"], [], 1)
    a = runner.judge(cfg, raw, plan["scope"], {}, None, state)
    a.retest = retest.settle(cfg, run_dir, plan, raw, a, 1, lambda: adapter, log=lambda _m: None, state=state)
    assert state.last and a.retest["final"] is True
    for n in left:
        assert a.nodes[n]["verdict"] == "untested"
        assert a.nodes[n]["why"].startswith("below the line within the noise; none of the 1 retest round(s) "
                                            "re-measured it"), a.nodes[n]["why"]
    for n in retested:
        assert a.nodes[n]["why"] == "still below the line within the noise after 1 retest round(s)"
