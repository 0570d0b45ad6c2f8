"""Which component is slow, end to end on a real local Slurm (issue #16): a
burn-in with per-rail tests and a topology, where one node's rail 3 is slow,
one leaf switch's nodes are slow on every path and one node's first-round
evidence is ambiguous. The task jobs run the stand-in all_reduce_perf and
ib_write_bw (tests/fakebin, real output formats, one fabric model); the
analysis job drains the NIC's node naming the NIC, names the switch and
keeps its nodes in service, and retests the ambiguous node in an automatic
retest round of the same run."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from test_slurm_burnin import drained, sq, stage, submit, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_once]  # version-independent: conftest.once_version
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = [f"n{i}" for i in range(1, 9)]
RAILS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
LEAVES = {"leaf1": ["n1", "n2", "n3"], "leaf2": ["n4", "n5", "n6"], "leaf3": ["n7", "n8"]}
LEAF_OF = {n: s for s, ns in LEAVES.items() for n in ns}
SLOW_NIC_NODE, SLOW_LEAF, BORDERLINE = "n2", "leaf2", "n7"
KEYS = ["all_reduce:pair", *(f"ib_write_bw:rail:{r}" for r in RAILS)]  # the keys a slow leaf shows on


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("burnincomp", len(NODES))
    tools = os.path.join(c.base, "nccl-tests")  # beside fabric.json, which the stand-ins read
    shutil.copy(os.path.join(REPO, "tests", "fakebin", "ib_write_bw"), tools)
    topology = os.path.join(c.base, "etc", "topology.conf")
    with open(topology, "w") as fh:  # Slurm's own tree topology file
        fh.write("".join(f"SwitchName={s} Nodes={','.join(ns)}\n" for s, ns in LEAVES.items()))
        fh.write(f"SwitchName=spine Switches={','.join(LEAVES)}\n")
    os.chmod(topology, 0o644)
    with open(c.sq_config) as fh:
        text = fh.read()
    c.set_sq_config(text.replace("[burnin]\n", f"[burnin]\nrails = {json.dumps(RAILS)}\nperftest_dir = \"{tools}\"\n"
                                 f"rail_duration_s = 1\nrail_server_wait_s = 0.5\ntopology = \"{topology}\"\n"
                                 "group_size = 8\n", 1))
    yield c
    stop_cluster(c)


def first_round_partners(node: str) -> list[str]:
    """`node`'s partners, round by round, in the switch-aware plan the
    submission makes (same code, same inputs; checked against plan.json)."""
    from slurmqual.burnin.judge.plan import groups, rounds

    (group,) = groups(NODES, 8, LEAF_OF)
    return [q for rnd in rounds(group, 3, LEAF_OF) for p in rnd for q in p if node in p and q != node]


def _analysis(run_dir: str) -> dict | None:
    try:
        with open(os.path.join(run_dir, "analysis.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def job_exit_code(cluster, job: str) -> str:
    out = cluster.run("scontrol", "show", "job", job).stdout
    return re.search(r"\bExitCode=(\d+:\d+)", out).group(1)


def node_record(cluster, node: str) -> dict:
    return cluster.nodes()[node]


def test_slow_nic_drained_slow_switch_named_borderline_node_decided_in_the_same_run(cluster):
    partners = first_round_partners(BORDERLINE)
    model = {
        "noise": 0.0, "seed": 11,
        # n7 slow with two of its three first-round partners, fine with the third: the
        # node or two links? Ambiguous (retest) until new partners decide it.
        "links": {f"{BORDERLINE},{p}": 0.7 for p in partners[:2]},
        "rails": {SLOW_NIC_NODE: {"mlx5_3": 0.45}},      # one NIC of one node
        "leaf": LEAF_OF, "switches": {SLOW_LEAF: 0.8},   # every path through leaf2: nccl-tests, every rail
    }
    run_dir = submit(cluster, model)
    with open(os.path.join(run_dir, "plan.json")) as fh:
        plan = json.load(fh)
    assert [q for rnd in plan["group_rounds"][0] for p in rnd for q in p if BORDERLINE in p and q != BORDERLINE] \
        == partners
    # The first analysis retests n7 in an automatic round of the same run, and
    # drains the NIC's node at once (it is decided; n7 is not, and is never drained undecided).
    first = wait_for(lambda: (x := stage(run_dir, 1)) and x["state"] == "submitted" and x, what="retest round 1")
    # n7 is the suspect and meets new partners. Its two links at 0.7 in a noiseless
    # fleet with no other low pair are clear on one measurement (aec9719): named
    # without a round, so neither is measured again and their passing ends meet no
    # one new; the NIC's drained node is never in the round.
    assert first["suspects"] == [BORDERLINE] and first["of"] == 2, first
    pairs = {frozenset(p) for rnd in first["rounds"] for p in rnd}
    assert not {frozenset((BORDERLINE, p)) for p in partners[:2]} & pairs, pairs
    new = {q for p in pairs if BORDERLINE in p for q in p} - {BORDERLINE, *partners[:2]}
    assert len(new) == 2 and not new & set(partners) and SLOW_NIC_NODE not in {q for p in pairs for q in p}
    a0 = wait_for(lambda: _analysis(run_dir), what="the first analysis.json")  # written after its drains
    if a0["retest"]["round"] == 0:  # (not yet overwritten by round 1's)
        assert a0["nodes"][SLOW_NIC_NODE]["verdict"] == "fail" and a0["nodes"][BORDERLINE]["verdict"] == "retest"
        assert a0["retest"]["next"]["round"] == 1 and a0["drain"] == [SLOW_NIC_NODE], a0["retest"]
        assert list(drained(cluster)) == [SLOW_NIC_NODE]
    row = json.loads(sq(cluster, "status", BORDERLINE, "--json").stdout)["nodes"][0]
    if row["qualification"] == "pending":  # the round may already be over on a fast machine
        assert any("retest round 1 of 2 submitted" in x for x in row["failing_checks"]), row
    else:
        assert stage(run_dir, 1) and os.path.exists(os.path.join(run_dir, "results", "task-r1-0.json"))
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "240", timeout=300)
    assert w.returncode == 0, w.stdout + w.stderr
    with open(os.path.join(run_dir, "analysis.json")) as fh:
        a = json.load(fh)

    # The retest round ran as part of the same run: its pairs (and its nodes' intra-node
    # test again: one intra run never convicts), each measurement marked with the round.
    with open(os.path.join(run_dir, "results", "task-r1-0.json")) as fh:
        res = json.load(fh)
    assert res["complete"] and {tuple(sorted(m["nodes"])) for m in res["measurements"] if len(m["nodes"]) == 2} == \
        {tuple(sorted(p)) for rnd in first["rounds"] for p in rnd}
    assert all(m["retest"] == 1 for m in res["measurements"])
    assert {m.get("rail") for m in res["measurements"]} == {None, *RAILS}  # its rails measured again too
    # Once n7 passes (round 1), its two links are what is left, and they are
    # settled: clear on one measurement in every analysis (noiseless, and no
    # clearly low pair in the fleet away from n7's own two), so round 1
    # decides the run and no round 2 measures them again (named below).
    assert a["retest"]["round"] == 1 and a["retest"]["final"] is True, a["retest"]
    assert stage(run_dir, 2) is None
    assert sorted(a["clear_links"]) == [sorted([BORDERLINE, p]) for p in sorted(partners[:2])]
    assert stage(run_dir, 1)["state"] == "submitted"
    assert a["nodes"][BORDERLINE]["verdict"] == "pass", a["nodes"][BORDERLINE]
    assert a["suspect_links"] == [sorted([BORDERLINE, p]) for p in sorted(partners[:2])]  # the links, not the node
    # One run in the store: the final verdicts replaced the first analysis'.
    db = sqlite3.connect(os.path.join(cluster.base, "slurmqual.db"))
    try:
        rows = db.execute("SELECT node, verdict FROM verdicts WHERE run_id = ? AND node IN (?, ?) ORDER BY node",
                          (os.path.basename(run_dir), SLOW_NIC_NODE, BORDERLINE)).fetchall()
    finally:
        db.close()
    assert rows == [(SLOW_NIC_NODE, "fail"), (BORDERLINE, "pass")]
    assert "retest round 1 of 2: tasks: 1 total" in w.stdout and "decided after 1 retest round(s) of 2" in w.stdout

    # The slow NIC: its node drained, the NIC and its rail named.
    assert a["drain"] == [SLOW_NIC_NODE] and not a["guard_tripped"], (a["problems"], a["would_drain"])
    assert a["nodes"][SLOW_NIC_NODE]["failed_nics"] == ["mlx5_3"]
    assert all(a["nodes"][n]["failed_nics"] == [] for n in NODES if n != SLOW_NIC_NODE)
    med = a["median"]["ib_write_bw:rail:mlx5_3"]
    assert med == pytest.approx(392.0, rel=0.02)
    reason = drained(cluster)
    assert list(reason) == [SLOW_NIC_NODE], reason
    m = re.fullmatch(r"slurmqual: burnin: mlx5_3 \(rail 3\) (\d+) Gb/s < 90% of median (\d+)", reason[SLOW_NIC_NODE])
    assert m and int(m.group(2)) == round(med) and int(m.group(1)) < 0.5 * med, reason
    summary = w.stdout[w.stdout.index("\nmedian: "):]
    assert re.search(rf"\n  {SLOW_NIC_NODE}: fail score [\d.]+ = 45% of the ib_write_bw:rail:mlx5_3 median; "
                     r"failed NIC\(s\) mlx5_3\n", summary), summary
    assert not re.search(r"\n  n[13-8]: ", summary), summary  # every other node passed: not listed

    # The slow switch: named, its nodes pass and stay in service.
    assert a["suspect_switches"] == [SLOW_LEAF], a["switch_findings"]
    assert {f["switch"] for f in a["switch_findings"]} == {SLOW_LEAF}
    assert {f["kind"] for f in a["switch_findings"]} == {"switch"}
    assert sorted(f["key"] for f in a["switch_findings"]) == KEYS  # the nccl-tests pairs and every rail
    assert all(f["factor"] == pytest.approx(0.8, abs=0.02) and f["nodes"] == 3 for f in a["switch_findings"])
    for n in LEAVES[SLOW_LEAF]:
        v = a["nodes"][n]
        assert v["verdict"] == "pass" and v["behind_suspect_switch"] == [SLOW_LEAF], (n, v)
        rec = node_record(cluster, n)
        assert "DRAIN" not in rec.get("state_flags", []) and not rec.get("reason"), (n, rec)
    line = [x for x in summary.splitlines() if f"SUSPECT SWITCH {SLOW_LEAF}:" in x]
    assert len(line) == 1 and all(k in line[0] for k in KEYS), summary  # one line, every key that showed it
    assert "every path through it slow (" in line[0] and "3 nodes behind it; none drained for it" in line[0]
    sinfo = cluster.run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")
    states = dict(line.split() for line in sinfo if line.strip())
    assert all(states[n] in ("idle", "mix", "alloc") for n in LEAVES[SLOW_LEAF]), states
    assert states[SLOW_NIC_NODE].startswith("drain"), states
    assert {n for n, v in a["nodes"].items() if v["verdict"] == "pass"} == set(NODES) - {SLOW_NIC_NODE}

    # Exit codes (docs/BURNIN.md): 4, a switch and not nodes, from both analysis jobs of the run.
    assert job_exit_code(cluster, first["analysis"]) == "4:0"
    with open(os.path.join(run_dir, "jobs.json")) as fh:
        assert job_exit_code(cluster, json.load(fh)["analysis"]) == "4:0"
    again = sq(cluster, "burnin", "analyze", run_dir, "--dry-run")
    assert again.returncode == 4, again.stdout + again.stderr

    # status: the NIC's node failed naming its NIC, the switch's nodes in service behind it, n7 qualified.
    st = json.loads(sq(cluster, "status", "--json").stdout)
    rows = {r["node"]: r for r in st["nodes"]}
    assert rows[SLOW_NIC_NODE]["qualification"] == "failed" and rows[SLOW_NIC_NODE]["failed_nics"] == ["mlx5_3"]
    for n in [*LEAVES[SLOW_LEAF], BORDERLINE]:
        assert rows[n]["qualification"] == "qualified" and rows[n]["slurm_state"] == "idle", rows[n]
        assert rows[n]["behind_suspect_switch"] == ([SLOW_LEAF] if n in LEAVES[SLOW_LEAF] else []), rows[n]
    (switch,) = st["components"]["switches"]
    assert (switch["switch"], switch["kind"], switch["nodes"]) == (SLOW_LEAF, "switch", LEAVES[SLOW_LEAF])
    assert sorted(switch["keys"]) == KEYS
    assert st["components"]["links"] == [{"a": a_, "b": b_, "rail": None} for a_, b_ in a["suspect_links"]]
    out = sq(cluster, "status").stdout
    text = {line.split()[0]: line for line in out.splitlines()[1:] if re.match(r"n\d ", line)}
    assert re.match(rf"{SLOW_NIC_NODE} +idle\+drain +failed .* 45% .*slurmqual: burnin: mlx5_3 \(rail 3\).*"
                    r"failed NIC mlx5_3", text[SLOW_NIC_NODE]), text
    for n in LEAVES[SLOW_LEAF]:
        assert re.match(rf"{n} +idle +qualified .*behind suspect switch {SLOW_LEAF}$", text[n]), text[n]
    assert re.match(rf"{BORDERLINE} +idle +qualified ", text[BORDERLINE]) and "suspect" not in text[BORDERLINE]
    assert re.search(rf"suspect switches \(burn-in {os.path.basename(run_dir)}, .*\): {SLOW_LEAF} \(every path at "
                     r"80%, 3 nodes behind it, none drained for it\)", out), out
    cluster.run("scontrol", "update", f"nodename={SLOW_NIC_NODE}", "state=resume")


def test_a_slow_node_behind_a_slow_switch_is_still_drained(cluster):
    """The switch's effect divided out, a node slow among its neighbours is a
    slow node (docs/BURNIN.md's table): drained, the switch named, its other
    nodes in service."""
    slow = LEAVES[SLOW_LEAF][1]
    run_dir = submit(cluster, {"noise": 0.0, "seed": 12, "leaf": LEAF_OF, "switches": {SLOW_LEAF: 0.8},
                               "nodes": {slow: 0.7}, "rail_nodes": {slow: 0.7}})
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "240", timeout=300)
    assert w.returncode == 0, w.stdout + w.stderr
    a = _analysis(run_dir)
    assert a["suspect_switches"] == [SLOW_LEAF] and a["drain"] == [slow], (a["problems"], a["switch_findings"])
    assert a["nodes"][slow]["verdict"] == "fail" and a["nodes"][slow]["behind_suspect_switch"] == [SLOW_LEAF]
    assert a["nodes"][slow]["failed_nics"] == []  # slow on every NIC: the node, not a NIC
    assert {n for n, v in a["nodes"].items() if v["verdict"] != "pass"} == {slow}
    reason = drained(cluster)
    assert list(reason) == [slow] and re.fullmatch(r"slurmqual: burnin: busbw \d+\.\d GB/s < 90% of median 39\d\.\d",
                                                   reason[slow]), reason  # its nccl-tests pairs judged it
    jobs = json.load(open(os.path.join(run_dir, "jobs.json")))
    assert job_exit_code(cluster, jobs["analysis"]) == "4:0"  # a switch named (a node drained too)
    cluster.run("scontrol", "update", f"nodename={slow}", "state=resume")
