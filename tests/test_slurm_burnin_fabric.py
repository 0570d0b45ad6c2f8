"""One model of the fabric behind every verdict (issue 22), end to end on a
real local Slurm: a rail-optimised stand-in fabric (three scalable units,
each rail its own leaf per unit) described only by the fabric map CSV that
`slurmqual fabric map` writes from iblinkinfo, whole-node nccl-tests pairs
and per-rail ib_write_bw both run (the stand-ins in tests/fakebin read one
fabric model: a whole-node run goes over every rail and its slowest rail
gates it, as NCCL's rings do).

- One rail leaf 20% slow and one node's NIC at 0.8: the leaf is named and
  every node behind it stays in service (on every key: the whole-node pairs
  of its nodes read 0.8 too); the NIC's node is drained naming the NIC; the
  run ends decided.
- The whole fabric 8% slower than when the baselines were taken, one node
  15% slower than the rest: that node, and only it, is below its baseline;
  no fleet-wide slowdown (its partners are not below theirs because they
  met it)."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from test_slurm_burnin import _logs, baselines, drained, finish, sq, submit

# Issue 22 names the versions (item 8): 22.05, 24.11 and the newest; 25.11 is spared
# (CI time: the burn-in job chain itself is test_slurm_burnin.py there). Each version's
# module is one 8-node cluster running two burn-ins with retest rounds, 57-65 s alone:
# queued as a module of 8 tests (slurm_weight), with the long ones, not last.
pytestmark = [pytest.mark.slurm, pytest.mark.slurm_on("22.05", "24.11", "newest"), pytest.mark.slurm_weight(4)]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = [f"n{i}" for i in range(1, 9)]
RAILS = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
UNITS = {"su1": ["n1", "n2", "n3"], "su2": ["n4", "n5", "n6"], "su3": ["n7", "n8"]}
UNIT_OF = {n: su for su, ns in UNITS.items() for n in ns}


def leaf_name(su: str, rail: str) -> str:
    """A rail leaf as iblinkinfo names a switch (its node description)."""
    return f"MF0;{su}-rail{RAILS.index(rail)}:MQM9700/U1"


LEAF = {n: {r: leaf_name(UNIT_OF[n], r) for r in RAILS} for n in NODES}  # the stand-ins' per-rail leaf map
SLOW_LEAF = leaf_name("su2", "mlx5_2")
NIC_NODE, NIC = "n2", "mlx5_1"
SLOW_NODE = "n7"


def iblinkinfo() -> str:
    """The subnet as `iblinkinfo` prints it: one block per CA (hostname and
    device, as rdma-ndd names it) and per leaf switch, 4X NDR links."""
    link = "==( 4X        106.25 Gbps Active/  LinkUp)==>"
    lids = {(n, r): 10 + 4 * i + j for i, n in enumerate(NODES) for j, r in enumerate(RAILS)}
    switches = sorted({sw for per in LEAF.values() for sw in per.values()})
    sw_lid = {sw: 200 + i for i, sw in enumerate(switches)}
    port: dict[tuple[str, str], int] = {}
    for sw in switches:
        for k, (n, r) in enumerate((n, r) for n in NODES for r in RAILS if LEAF[n][r] == sw):
            port[(n, r)] = k + 1
    out = []
    for n in NODES:
        for r in RAILS:
            out.append(f"CA: {n} {r}:")
            out.append(f"      0x{0xb88303ffff000000 + lids[(n, r)]:016x}    {lids[(n, r)]:3d}    1[  ] {link}"
                       f"     {sw_lid[LEAF[n][r]]:3d}   {port[(n, r)]:2d}[  ] \"{LEAF[n][r]}\" ( )")
    for sw in switches:
        out.append(f"Switch: 0x{0x0c42a10300b90000 + sw_lid[sw]:016x} {sw}:")
        for (n, r), p in sorted(port.items(), key=lambda x: x[1]):
            if LEAF[n][r] == sw:
                out.append(f"          {sw_lid[sw]:3d}   {p:2d}[  ] {link}     {lids[(n, r)]:3d}    1[  ] \"{n} {r}\" ( )")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster("burninfabric", len(NODES))
    tools = os.path.join(c.base, "nccl-tests")  # beside fabric.json, which the stand-ins read
    shutil.copy(os.path.join(REPO, "tests", "fakebin", "ib_write_bw"), tools)
    saved = os.path.join(c.base, "iblinkinfo.txt")
    with open(saved, "w") as fh:
        fh.write(iblinkinfo())
    fabric_map = os.path.join(c.base, "etc", "fabric-map.csv")
    p = sq(c, "fabric", "map", "--iblinkinfo", saved, "-o", fabric_map)
    assert p.returncode == 0, p.stderr
    assert f"{len(NODES) * len(RAILS)} NIC(s) of {len(NODES)} node(s) on 12 switch(es)" in p.stderr, p.stderr
    os.chmod(fabric_map, 0o644)
    with open(c.sq_config) as fh:
        text = fh.read()
    c.set_sq_config(text.replace("[burnin]\n", f"[burnin]\nrails = {json.dumps(RAILS)}\nperftest_dir = \"{tools}\"\n"
                                 f"rail_duration_s = 1\nrail_server_wait_s = 0.5\ntopology = \"{fabric_map}\"\n"
                                 "group_size = 8\n", 1))
    yield c
    stop_cluster(c)


def watched(cluster, run_dir: str) -> dict:
    """`burnin watch` to the end of the run (its retest rounds too); the final analysis."""
    w = sq(cluster, "burnin", "watch", run_dir, "--interval", "1", "--timeout", "240", timeout=300)
    assert w.returncode == 0, w.stdout + w.stderr + _logs(run_dir)
    with open(os.path.join(run_dir, "analysis.json")) as fh:
        return json.load(fh)


def job_exit_code(cluster, job: str) -> str:
    out = cluster.run("scontrol", "show", "job", job).stdout
    return re.search(r"\bExitCode=(\d+:\d+)", out).group(1)


def last_analysis_job(run_dir: str) -> str:
    """The job that wrote the final analysis: the last retest round's, else the first."""
    with open(os.path.join(run_dir, "analysis.json")) as fh:
        stage = json.load(fh)["retest"]["round"]
    if stage:
        with open(os.path.join(run_dir, f"retest-{stage}.json")) as fh:
            return json.load(fh)["analysis"]
    with open(os.path.join(run_dir, "jobs.json")) as fh:
        return json.load(fh)["analysis"]


def resume(cluster, nodes) -> None:
    for n in nodes:
        cluster.run("scontrol", "update", f"nodename={n}", "state=resume")


def first_round(run_dir: str) -> list[dict]:
    """The measurements the first round's tasks wrote (their result files)."""
    from slurmqual.burnin.results import rundir

    results, bad = rundir.read_results(run_dir)
    assert not bad, bad
    return [m for _path, res in results for m in res["measurements"] if not m.get("retest")]


def test_a_slow_rail_leaf_is_named_its_nodes_stay_in_service_and_a_nic_at_80_percent_is_drained(cluster):
    run_dir = submit(cluster, {"noise": 0.01, "seed": 21, "nccl_rails": True, "leaf": LEAF,
                               "switches": {SLOW_LEAF: 0.8}, "rails": {NIC_NODE: {NIC: 0.8}}})
    try:
        a = watched(cluster, run_dir)
        # Both tests ran on the planned pairs, each judged on its own key: the whole-node
        # nccl-tests pairs and ib_write_bw on every rail.
        ms = first_round(run_dir)
        whole = [m for m in ms if m["ok"] and len(m["nodes"]) == 2 and not m.get("rail")]
        per_rail = {r: [m for m in ms if m["ok"] and m.get("rail") == r] for r in RAILS}
        assert whole and all(per_rail.values()), (len(whole), {r: len(v) for r, v in per_rail.items()})
        assert {"all_reduce:pair", *(f"ib_write_bw:rail:{r}" for r in RAILS)} <= set(a["median"]), a["median"]
        # The leaf shows on the whole-node key too (the rings are gated by the slowest rail):
        # su2's whole-node pairs read about 0.8 of the rest, below the 90% line, so they pass
        # only because the leaf explains them.
        su2 = set(UNITS["su2"])
        behind = [m["busbw"] for m in whole if su2 & set(m["nodes"]) and NIC_NODE not in m["nodes"]]
        clean = [m["busbw"] for m in whole if not (su2 | {NIC_NODE}) & set(m["nodes"])]
        assert behind and clean and max(behind) < 0.9 * min(clean), (behind, clean)
        out = drained(cluster)
        why = (a["problems"], a["switch_findings"], {n: (v["verdict"], v.get("key"), v.get("score"))
                                                     for n, v in a["nodes"].items()})
        # The leaf: named, on the whole-node key too; none of its nodes drained for it.
        assert a["suspect_switches"] == [SLOW_LEAF], why
        found = {f["key"] for f in a["switch_findings"] if f["switch"] == SLOW_LEAF}
        assert {"all_reduce:pair", f"ib_write_bw:rail:{RAILS[2]}"} <= found, why
        assert not a["guard_tripped"], why
        # Judged, not waved through: the whole-node pairs' noise is the fabric's (1%), not the
        # leaf's and the NIC's slow pairs taken for noise (which would pass anything).
        assert a["noise"]["all_reduce:pair"] < 0.04, (a["noise"], why)
        for n in UNITS["su2"]:
            v = a["nodes"][n]
            assert v["verdict"] == "pass" and SLOW_LEAF in v["behind_suspect_switch"], (n, v, why)
            assert n not in out, (n, out)
        # The NIC: its node drained naming it (not sent to the node as a slow node).
        assert a["nodes"][NIC_NODE]["verdict"] == "fail" and a["nodes"][NIC_NODE]["failed_nics"] == [NIC], why
        assert list(out) == [NIC_NODE], (out, why)
        assert re.match(rf"slurmqual: burnin: {NIC} \(rail {RAILS.index(NIC)}\) \d+ Gb/s < 90% of median",
                        out[NIC_NODE]), out
        # Decided: every node pass or fail, no round left to run.
        assert a["retest"]["final"] is True, a["retest"]
        assert {n: v["verdict"] for n, v in a["nodes"].items() if v["verdict"] not in ("pass", "fail")} == {}, why
        assert {n for n, v in a["nodes"].items() if v["verdict"] == "fail"} == {NIC_NODE}, why
        # Exit 4 (a switch, not nodes) from the job that wrote the final analysis.
        assert job_exit_code(cluster, last_analysis_job(run_dir)) == "4:0"
    finally:
        resume(cluster, drained(cluster))


def test_a_fabric_slower_than_at_baseline_reports_the_one_slow_node_and_no_fleet_slowdown(cluster):
    healthy = {"noise": 0.01, "nccl_rails": True, "leaf": LEAF}
    first = finish(cluster, submit(cluster, dict(healthy, seed=31)))
    assert first["drain"] == [] and not first["fleet_slowdown"], first["problems"]
    base = baselines(cluster)
    assert {n for n, k in base if k == "all_reduce:pair"} == set(NODES), base
    # The whole fabric 8% slower (nccl-tests and every rail), one node 15% slower than the rest.
    run_dir = submit(cluster, dict(healthy, seed=32, base=400 * 0.92, rail_base=392 * 0.92,
                                   nodes={SLOW_NODE: 0.85}, rail_nodes={SLOW_NODE: 0.85}))
    try:
        a = finish(cluster, run_dir)
        below = {n: round(b["score"] / b["baseline"], 3) for n, b in a["below_baseline"].items()}
        assert list(below) == [SLOW_NODE], (below, a["problems"])
        assert 0.74 < below[SLOW_NODE] < 0.82, below  # 0.92 x 0.85 of its own baseline
        assert not a["fleet_slowdown"] and not a["guard_tripped"], a["problems"]
        assert not any("fleet-wide slowdown" in p for p in a["problems"]), a["problems"]
        # 15% slower than the fleet it ran with: drained, as any slow node.
        assert a["drain"] == [SLOW_NODE] and list(drained(cluster)) == [SLOW_NODE], a["problems"]
        assert job_exit_code(cluster, last_analysis_job(run_dir)) == "0:0"
        # The baselines of the rest were taken under a faster fabric: kept, not lowered.
        after = baselines(cluster)
        assert all(after[(n, "all_reduce:pair")] == base[(n, "all_reduce:pair")] for n in NODES), (base, after)
    finally:
        resume(cluster, drained(cluster))
