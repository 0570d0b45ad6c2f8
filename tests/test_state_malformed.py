"""Malformed state-dir files never crash a reader and are never half-trusted:
node state files (nodestate.py, their one reader and writer) against status,
inventory, requalify and the hooks; event spool files against history.

Every file starts as what our own code writes (nodestate.record_run,
events.record) and is then broken one way."""

from __future__ import annotations

import ast
import json
import os

import pytest

from slurmqual import cli, events, nodestate
from slurmqual.config import load
from slurmqual.requalify import Requalify
from slurmqual.result import CheckResult, Status
from slurmqual.slurm.adapter import NodeInfo
from slurmqual.testing import FakeAdapter

BREAKS = {
    "checks-not-objects": lambda d: json.dumps(dict(d, checks=["x"])),
    "versions-a-list": lambda d: json.dumps(dict(d, versions=[])),
    "time-a-word": lambda d: json.dumps(dict(d, time="yesterday")),
    "drain-a-word": lambda d: json.dumps(dict(d, drain="yes")),
    "another-node": lambda d: json.dumps(dict(d, node="n9")),
    "not-an-object": lambda d: json.dumps([d]),
    "truncated": lambda d: json.dumps(d)[:25],
    "empty": lambda d: "",
}


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A config, a FakeAdapter with n1 and n2, and n1's real state file (failing peermem)."""
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/sq.db"\n')
    adapter = FakeAdapter.with_nodes([NodeInfo("n1", "idle"), NodeInfo("n2", "idle")])
    monkeypatch.setattr("slurmqual.slurm.get_adapter", lambda _config: adapter)
    state = str(tmp_path / "state")
    for n in ("n1", "n2"):
        nodestate.record_run(state, n, "healthcheck", [CheckResult("peermem", Status.FAIL, "not loaded")],
                             {"driver": "550.54.15"}, now=1000.0)
    return cfg, state


def break_node_file(state: str, node: str, how: str) -> None:
    path = nodestate.path(state, node)
    with open(path) as fh:
        doc = json.load(fh)
    with open(path, "w") as fh:
        fh.write(BREAKS[how](doc))


@pytest.mark.parametrize("how", BREAKS)
def test_reader_refuses_and_update_replaces_with_a_warning(site, how):
    _cfg, state = site
    break_node_file(state, "n1", how)
    with pytest.raises(nodestate.StateError, match="n1.json"):
        nodestate.read(state, "n1")
    states, bad = nodestate.read_all(state)
    assert bad == ["n1.json"] and set(states) == {"n2"}
    warned = []
    nodestate.record_run(state, "n1", "epilog", [CheckResult("peermem", Status.PASS, "ok")], {}, warn=warned.append)
    assert nodestate.read(state, "n1").status == "pass"
    assert len(warned) == 1 and "replacing unusable node state file" in warned[0] and "n1.json" in warned[0]


@pytest.mark.parametrize("how", BREAKS)
def test_status_names_the_file_and_shows_the_others(site, how, capsys):
    cfg, state = site
    break_node_file(state, "n1", how)
    assert cli.main(["status", "--config", str(cfg), "--json"]) == 0
    out = capsys.readouterr()
    rows = {r["node"]: r for r in json.loads(out.out)["nodes"]}
    assert rows["n1"]["failing_checks"] == [] and rows["n2"]["failing_checks"] == ["peermem"]
    assert "malformed node state files" in out.err and "n1.json" in out.err


@pytest.mark.parametrize("how", BREAKS)
def test_inventory_lists_the_file_as_unreadable(site, how, capsys):
    cfg, state = site
    break_node_file(state, "n1", how)
    assert cli.main(["inventory", "--config", str(cfg), "--json"]) == 0
    inv = json.loads(capsys.readouterr().out)
    assert inv["unreadable"] == ["n1.json"] and set(inv["nodes"]) == {"n2"}


@pytest.mark.parametrize("how", BREAKS)
def test_requalify_reads_no_reason_from_a_malformed_file(site, how):
    cfg, state = site
    rq = Requalify(load(str(cfg), use_cache=False), FakeAdapter(), ["n1", "n2"], 0, out=lambda _m: None)
    assert rq._from_state_file("n1", 900.0) == "peermem: not loaded"
    break_node_file(state, "n1", how)
    assert rq._from_state_file("n1", 900.0) is None
    assert rq._from_state_file("n2", 900.0) == "peermem: not loaded"


EVENT_BREAKS = {
    "time-a-word": lambda d: json.dumps(dict(d, time="x")),
    "bad-node-name": lambda d: json.dumps(dict(d, node="n1 n2")),
    "unknown-kind": lambda d: json.dumps(dict(d, kind="explode")),
    "detail-an-object": lambda d: json.dumps(dict(d, detail={"a": 1})),
    "not-an-object": lambda d: json.dumps([d]),
    "truncated": lambda d: json.dumps(d)[:10],
}


@pytest.mark.parametrize("how", EVENT_BREAKS)
def test_history_skips_and_names_a_malformed_event_file(site, how, capsys):
    cfg, state = site
    bad = events.record(state, "n1", "drain", "checks failed: peermem", when=2000.0)
    events.record(state, "n1", "resume", "checks pass", when=3000.0)
    with open(bad) as fh:
        doc = json.load(fh)
    with open(bad, "w") as fh:
        fh.write(EVENT_BREAKS[how](doc))
    assert cli.main(["history", "n1", "--config", str(cfg), "--json"]) == 0
    out = capsys.readouterr()
    assert [e["kind"] for e in json.loads(out.out)["events"]] == ["resume"]
    assert "malformed event files" in out.err and os.path.basename(bad) in out.err
    assert os.path.exists(bad)   # kept for a person to look at


def test_status_shows_requalify_markers_and_ignores_stray_files(site, capsys):
    cfg, state = site
    nodestate.mark_requalify(state, ["n2"], "r1")
    with open(os.path.join(nodestate.requalify_dir(state), "n1 n2.json"), "w") as fh:
        fh.write("{}")
    assert nodestate.requalify_pending(state) == {"n2"}
    assert cli.main(["status", "--config", str(cfg), "--json"]) == 0
    rows = {r["node"]: r for r in json.loads(capsys.readouterr().out)["nodes"]}
    assert rows["n2"]["qualification"] == "pending" and rows["n1"]["qualification"] != "pending"
    nodestate.unmark_requalify(state, ["n2"])
    assert nodestate.requalify_pending(state) == set()


def test_only_nodestate_opens_node_state_files():
    """Nothing else in the package names the nodes/ or requalify/ directories of the state dir."""
    pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "slurmqual")
    offenders = []
    for d, _, files in os.walk(pkg):
        for f in files:
            path = os.path.join(d, f)
            if not f.endswith(".py") or path.endswith(os.path.join("slurmqual", "nodestate.py")):
                continue
            for node in ast.walk(ast.parse(open(path).read())):
                if isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value in ("nodes", "requalify")
                                                      for a in node.args) and "join" in ast.unparse(node.func):
                    offenders.append(f"{os.path.relpath(path, pkg)}:{node.lineno}")
    assert offenders == []


# -- burn-in run directories (burnin/results/rundir.py, their one reader and writer) ----------------------

RUN_BREAKS = {
    "plan.json": {
        "bad-node-name": lambda d: json.dumps(dict(d, scope=["n1", "n1 n2"])),
        "groups-a-word": lambda d: json.dumps(dict(d, groups="n1,n2")),
        "rounds-of-three": lambda d: json.dumps(dict(d, rounds=[[["n1", "n2", "n3"]]])),
        "truncated": lambda d: json.dumps(d)[:30],
    },
    "results/task-0.json": {
        "measurements-an-object": lambda d: json.dumps(dict(d, measurements={})),
        "versions-a-list": lambda d: json.dumps(dict(d, versions=["2.21.5"])),
        "not-an-object": lambda d: json.dumps([d]),
    },
}


@pytest.fixture
def run(tmp_path):
    """A run directory as `burnin submit` (runner.submit, FakeAdapter) and a task's checkpoint write it."""
    from fleet import Fabric, run as fleet_run
    from slurmqual.burnin.results import rundir
    from slurmqual.burnin.run.runner import submit

    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[burnin]\nrun_dir = "{tmp_path}/runs"\ngroup_size = 4\n[store]\npath = "{tmp_path}/sq.db"\n'
                   f'[hooks]\nstate_dir = "{tmp_path}/state"\n')
    nodes = ["n1", "n2", "n3", "n4"]
    sub = submit(load(str(cfg), use_cache=False), FakeAdapter(), nodes, None, None)
    ms = [m.to_dict() for m in fleet_run(nodes, Fabric(noise=0.01), seed=1)]
    rundir.write_result(sub["run_dir"], {"task": "0", "nodes": nodes, "complete": True, "measurements": ms,
                                         "versions": {"n1": {"nccl": "2.21.5"}}})
    return cfg, sub["run_dir"]


def break_run_file(run_dir: str, name: str, how: str) -> None:
    path = os.path.join(run_dir, name)
    with open(path) as fh:
        doc = json.load(fh)
    with open(path, "w") as fh:
        fh.write(RUN_BREAKS[name][how](doc))


@pytest.mark.parametrize("name,how", [(n, h) for n, hs in RUN_BREAKS.items() for h in hs])
def test_malformed_run_files_are_clear_errors(run, name, how, capsys):
    from slurmqual.burnin.run.task import planned_group
    from slurmqual.requalify import progress

    cfg, run_dir = run
    assert progress(run_dir) == f"tasks 1/1 done, {len(json.load(open(os.path.join(run_dir, 'results/task-0.json')))['measurements'])} measurements so far"
    break_run_file(run_dir, name, how)
    rc = cli.main(["burnin", "analyze", run_dir, "--dry-run", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err and name.split("/")[-1] in err
    assert ("not a burn-in run directory" if name == "plan.json" else "unreadable task result") in err
    # requalify's progress line and the task's plan lookup go on without the bad file
    assert progress(run_dir).startswith("tasks 0/" if name != "plan.json" else "tasks 1/0")
    assert planned_group(run_dir, "0") == (None if name == "plan.json" else ["n1", "n2", "n3", "n4"])


@pytest.mark.parametrize("content,why", [('{"tasks": ["101"]}', "'tasks' is not a map"),
                                         ('{"tasks": {"0": "101"}, "analysis": "x; rm"}', "'analysis' is not a job id"),
                                         ("{", "not JSON")])
def test_watch_names_a_malformed_jobs_file(run, content, why, capsys):
    cfg, run_dir = run
    with open(os.path.join(run_dir, "jobs.json"), "w") as fh:
        fh.write(content)
    assert cli.main(["burnin", "watch", run_dir, "--config", str(cfg)]) != 0
    err = capsys.readouterr().err
    assert "unreadable jobs.json" in err and why in err


def test_history_before_any_burn_in_or_event_is_empty_not_an_error(tmp_path, capsys):
    """A fresh cluster: no store file, nothing spooled. `history` answers "no
    history" (rc 0, JSON with no baseline and no events); a store file that is
    not a database is still an error (rc 2), never read as empty."""
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/sq.db"\n')
    assert cli.main(["history", "n5", "--config", str(cfg)]) == 0
    assert "n5: no history" in capsys.readouterr().out
    assert cli.main(["history", "n5", "--config", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"node": "n5", "baseline": None, "events": [], "gpus": []}
    assert not (tmp_path / "sq.db").exists()   # a reader creates no store
    (tmp_path / "sq.db").write_text("not a database\n")
    assert cli.main(["history", "n5", "--config", str(cfg), "--json"]) == 2
    assert "sq.db" in capsys.readouterr().err
