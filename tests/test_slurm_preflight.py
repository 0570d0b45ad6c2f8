"""`slurmqual preflight` end to end on a real local Slurm (issue #24): a
6-node batch job whose script is the recipe of docs/PREFLIGHT.md, as
written (its workload and `torchrun` are stand-ins on PATH). The stand-in
all_reduce_perf and ib_write_bw (tests/fakebin) play the fabric: one node's
NIC rail is slow; another node's tree is broken after its prolog passed (a
fault that arrives between the prolog and the workload), so its fast check
fails in the preflight. The preflight leaves both out, the workload runs on
the other four, and with --drain both are drained with their reasons. Also
the failure paths: --need more than pass (exit 3, no node list), SIGTERM
(scancel) in the middle, a hung pair step at --time."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from slurmcluster import Cluster, missing_requirements
from test_slurm_burnin import drained, wait_for

pytestmark = pytest.mark.slurm
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = [f"n{i}" for i in range(1, 7)]
RAILS = ["mlx5_0", "mlx5_1"]
SLOW_NIC_NODE, BROKEN_NODE = "n2", "n5"


@pytest.fixture(scope="module")
def cluster():
    why = missing_requirements()
    if why:
        pytest.skip(f"real Slurm cluster unavailable: {why}")
    base = tempfile.mkdtemp(prefix="slurmqual-preflight-")
    # No periodic health check: the broken node is the preflight's to find
    # (the prolog ran on every node at allocation: PrologFlags=Alloc).
    c = Cluster(base, len(NODES), health_interval=0).start(extra_conf="PrologFlags=Alloc\n")
    tools = os.path.join(c.base, "nccl-tests")
    shutil.copy(os.path.join(REPO, "tests", "fakebin", "ib_write_bw"), tools)
    shutil.copy(os.path.join(REPO, "tests", "fakebin", "gpu_tool"), os.path.join(tools, "gpu_burn"))
    with open(c.sq_config) as fh:
        text = fh.read()
    c.set_sq_config(text.replace("[burnin]\n", f"[burnin]\nrails = {json.dumps(RAILS)}\nperftest_dir = \"{tools}\"\n"
                                 f"rail_server_wait_s = 0.5\ngpu_tests = [\"gpu_burn\"]\ngpu_tools_dir = \"{tools}\"\n", 1)
                    + "\n[preflight]\nrail_duration_s = 1\n")
    # What a user has on PATH in the job: slurmqual, and the stand-in workloads.
    bin_dir = os.path.join(c.base, "userbin")
    os.makedirs(bin_dir)
    for name, body in (("slurmqual", f'exec {c.python} -m slurmqual "$@"\n'),
                       ("torchrun", 'echo "torchrun on $(hostname -s) ${SLURMD_NODENAME}: $*"\n'),
                       ("workload.sh", 'echo "workload on ${SLURMD_NODENAME}"\n')):
        with open(os.path.join(bin_dir, name), "w") as fh:
            fh.write("#!/bin/sh\n" + body)
        os.chmod(os.path.join(bin_dir, name), 0o755)
    c.user_bin = bin_dir
    yield c
    c.stop()
    if not os.environ.get("SLURMQUAL_TEST_KEEP"):  # set it to read a failed run's job dirs and logs
        shutil.rmtree(c.base, ignore_errors=True)


def recipe(name: str) -> str:
    """The script of docs/PREFLIGHT.md's recipe `name`, as written."""
    with open(os.path.join(REPO, "docs", "PREFLIGHT.md")) as fh:
        text = fh.read()
    m = re.search(rf"<!-- recipe: {name} -->\n```bash\n(.*?)```", text, re.S)
    assert m, f"recipe {name} missing from docs/PREFLIGHT.md"
    return m.group(1)


def job_dir(cluster, name: str) -> str:
    d = os.path.join(cluster.base, "jobs", name)
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    shutil.copy(os.path.join(cluster.user_bin, "workload.sh"), d)
    return d


def sbatch(cluster, workdir: str, script: str, *args: str) -> str:
    path = os.path.join(workdir, "job.sbatch")
    with open(path, "w") as fh:
        fh.write(script)
    env = dict(cluster.env, PATH=cluster.user_bin + os.pathsep + cluster.env["PATH"])
    out = subprocess.run(["sbatch", "--parsable", f"--chdir={workdir}", f"--output={workdir}/job.out", *args, path],
                         env=env, capture_output=True, text=True, timeout=60, cwd=workdir)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def job_state(cluster, job: str) -> tuple[str, str]:
    out = cluster.run("scontrol", "show", "job", job, check=False).stdout
    state = re.search(r"JobState=(\S+)", out)
    code = re.search(r"\bExitCode=(\d+:\d+)", out)
    return (state.group(1) if state else "GONE"), (code.group(1) if code else "")


def finished(cluster, job: str, timeout: float = 240) -> str:
    def done():
        state, code = job_state(cluster, job)
        return code if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") else None
    return wait_for(done, timeout=timeout, what=f"job {job} to end")


def output(workdir: str) -> str:
    try:
        with open(os.path.join(workdir, "job.out")) as fh:
            return fh.read()
    except OSError:
        return ""


def report(workdir: str, job: str) -> dict:
    with open(os.path.join(workdir, f"slurmqual-preflight-{job}.json")) as fh:
        return json.load(fh)


def gated(script: str, gate: str) -> str:
    """The script, held after its #SBATCH lines until `gate` exists: a first
    step on every node (so every node's prolog has run), then the test breaks
    a node's tree (after the prolog, before the preflight)."""
    lines = script.splitlines(keepends=True)
    head = [ln for ln in lines if ln.startswith("#!") or ln.startswith("#SBATCH")]
    rest = lines[len(head):]
    return "".join(head) + (f"srun --nodes=$SLURM_JOB_NUM_NODES true && touch {gate}.started\n"
                            f"while [ ! -e {gate} ]; do sleep 0.2; done\n") + "".join(rest)


def swap_tree(cluster, node: str, example: str) -> None:
    """Replace a node's tree in one rename: a hook never reads half a tree."""
    from slurmqual.nodetree import build

    new = build(example, cluster.tree(node) + ".new")
    old = cluster.tree(node) + ".old"
    os.rename(cluster.tree(node), old)
    os.rename(new, cluster.tree(node))
    shutil.rmtree(old)


def break_after_prolog(cluster, job: str, gate: str) -> None:
    wait_for(lambda: os.path.exists(gate + ".started"), what=f"job {job}'s first step on every node")
    swap_tree(cluster, BROKEN_NODE, "no-peermem")
    open(gate, "w").close()


def heal(cluster) -> None:
    stray = cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
    if stray:  # a recipe's resubmission that Slurm accepted
        cluster.run("scancel", *stray, check=False)

    swap_tree(cluster, BROKEN_NODE, "h100-roce-healthy")
    for n in drained(cluster):
        cluster.run("scontrol", "update", f"nodename={n}", "state=resume")
    wait_for(lambda: not drained(cluster) and all(v.get("state") == "idle" for v in cluster.nodes().values()),
             what="every node idle again")


MODEL = {"base": 400, "noise": 0.005, "seed": 3, "rail_base": 392.0, "rails": {SLOW_NIC_NODE: {"mlx5_1": 0.45}}}


def test_need_more_than_pass_exits_3_and_writes_no_node_list(cluster):
    cluster.fabric(MODEL)
    d = job_dir(cluster, "need5")
    gate = os.path.join(d, "go")
    script = gated(recipe("srun").replace("--need 4", "--need 5").replace("--nodes=4", "--nodes=5"), gate)
    job = sbatch(cluster, d, script)
    break_after_prolog(cluster, job, gate)
    code = finished(cluster, job)
    out = output(d)
    assert code == "3:0", out
    r = report(d, job)
    assert r["exit_code"] == 3 and r["passed"] == sorted(set(NODES) - {SLOW_NIC_NODE, BROKEN_NODE}), out
    assert "NOT ENOUGH: 4 passed, 5 needed (exit 3)" in out and "resubmitting without n[2,5]" in out, out
    assert not os.path.exists(os.path.join(d, f"slurmqual-preflight-{job}.nodelist"))
    with open(os.path.join(d, f"slurmqual-preflight-{job}.exclude")) as fh:
        assert fh.read().strip() == "n[2,5]"
    # report only by default: the preflight drained nothing (the broken node's own
    # epilog drains it after the job, with its check's reason: the hooks at work)
    assert not any("preflight" in why for why in drained(cluster).values()) and SLOW_NIC_NODE not in drained(cluster)
    o = r["outcomes"]
    assert o[BROKEN_NODE]["verdict"] == "fail" and o[BROKEN_NODE]["failed_checks"] == ["peermem"]
    assert o[SLOW_NIC_NODE]["verdict"] == "fail" and o[SLOW_NIC_NODE]["reason"].startswith("mlx5_1 (rail 1)"), o
    # every measured node met at least two different partners
    assert all(len(set(p)) >= 2 for p in r["partners"].values()) and BROKEN_NODE not in r["partners"]
    assert r["speed"] == "own", r["notes"]
    # the outcome is in the nodes' history and status
    h = subprocess.run([*cluster.slurmqual_argv, "history", SLOW_NIC_NODE], env=cluster.env, capture_output=True,
                       text=True, timeout=60)
    assert f"preflight: job {job}: fail: mlx5_1" in h.stdout, h.stdout + h.stderr
    s = subprocess.run([*cluster.slurmqual_argv, "status", "--json"], env=cluster.env, capture_output=True,
                       text=True, timeout=60)
    rows = {x["node"]: x for x in json.loads(s.stdout)["nodes"]}
    assert rows[SLOW_NIC_NODE]["preflight"]["verdict"] == "fail" and rows["n1"]["preflight"]["verdict"] == "pass"
    heal(cluster)


def test_recipe_leaves_out_slow_nic_and_failing_check_and_drains_them(cluster):
    cluster.fabric(MODEL)
    d = job_dir(cluster, "need4")
    gate = os.path.join(d, "go")
    job = sbatch(cluster, d, gated(recipe("srun").replace("slurmqual preflight", "slurmqual preflight --drain"),
                                   gate))
    break_after_prolog(cluster, job, gate)
    code = finished(cluster, job)
    out = output(d)
    assert code == "0:0", out
    good = sorted(set(NODES) - {SLOW_NIC_NODE, BROKEN_NODE})
    ran = sorted(re.findall(r"^workload on (\S+)$", out, re.M))
    assert ran == good, out
    with open(os.path.join(d, f"slurmqual-preflight-{job}.hosts")) as fh:
        assert sorted(fh.read().split()) == good
    with open(os.path.join(d, f"slurmqual-preflight-{job}.master")) as fh:
        assert fh.read().strip() in good
    reasons = wait_for(lambda: (x := drained(cluster)) and len(x) == 2 and x, what="two drains")
    assert reasons[SLOW_NIC_NODE].startswith("slurmqual: preflight: mlx5_1 (rail 1)"), reasons
    assert reasons[BROKEN_NODE].startswith("slurmqual: preflight: peermem:"), reasons
    heal(cluster)


def test_torchrun_recipe_runs_one_torchrun_per_chosen_node(cluster):
    cluster.fabric(dict(MODEL, rails={}))
    d = job_dir(cluster, "torchrun")
    job = sbatch(cluster, d, recipe("torchrun"), "--nodes=5")
    code = finished(cluster, job)
    out = output(d)
    assert code == "0:0", out
    r = report(d, job)
    lines = re.findall(r"^torchrun on \S+ (\S+): (.*)$", out, re.M)
    assert sorted(n for n, _ in lines) == sorted(r["chosen"]) and len(lines) == 4, out
    assert all(f"--rdzv-endpoint={r['chosen'][0]}:29500" in args for _, args in lines), out


def test_gpu_tools_leave_out_a_slow_gpu_without_draining_it(cluster):
    """--gpu-tools: the burn-in's per-GPU tools first (here gpu_burn); one
    run never convicts a GPU (burn-in rule), so its node is suspect: left out, not drained."""
    cluster.fabric(dict(MODEL, rails={}, gpu={"count": 8, "tflops": 700, "noise": 0.002, "slow": {"n3": {"2": 0.7}}}))
    d = job_dir(cluster, "gpus")
    job = sbatch(cluster, d, "#!/bin/sh\nslurmqual preflight --need 5 --gpu-tools --drain --time 90\n", "--nodes=6")
    code = finished(cluster, job)
    r = report(d, job)
    assert code == "0:0", output(d)
    assert r["outcomes"]["n3"]["verdict"] == "suspect" and "n3" not in r["chosen"], r["outcomes"]["n3"]
    assert any(m.get("test") == "burn" and m.get("gpu") == 2 and m["nodes"] == ["n3"] for m in r["measurements"])
    assert r["elapsed_s"] <= 95 and drained(cluster) == {}


def test_hung_pair_step_is_killed_at_time_and_its_nodes_are_untested(cluster):
    cluster.fabric(dict(MODEL, rails={}, hang_pairs=["n3"]))
    d = job_dir(cluster, "hung")
    script = "#!/bin/sh\nslurmqual preflight --need 4 --time 40\necho \"preflight exit $?\"\nsqueue -h -s -j $SLURM_JOB_ID -o '%i %j'\n"
    t0 = time.monotonic()
    job = sbatch(cluster, d, script, "--nodes=6")
    code = finished(cluster, job)
    out = output(d)
    assert code == "0:0", out
    r = report(d, job)
    assert r["elapsed_s"] <= 40 + 5, r["phases_s"]
    assert time.monotonic() - t0 < 120
    # every pair of n3 hung and was killed: n3 untested, never drained; the others still judged
    assert r["outcomes"]["n3"]["verdict"] == "untested", r["outcomes"]["n3"]
    assert any("timed out" in str(m.get("problems")) for m in r["measurements"] if "n3" in m["nodes"])
    assert "preflight exit 0" in out and "n3" not in r["chosen"] and len(r["chosen"]) == 4, out
    # no step of the preflight is left running after it (the workload would wait for it)
    steps = [ln for ln in out.splitlines() if re.match(rf"{job}\.\d+ ", ln)]
    assert steps == [], out
    assert drained(cluster) == {}


def test_scancel_in_the_middle_stops_steps_and_writes_no_node_list(cluster):
    cluster.fabric(dict(MODEL, rails={}, hang_pairs=["n1"]))
    d = job_dir(cluster, "cancelled")
    job = sbatch(cluster, d, "#!/bin/sh\nslurmqual preflight --need 4 --time 120\necho \"preflight exit $?\"\n",
                 "--nodes=6")
    logs = os.path.join(d, f"slurmqual-preflight-{job}.logs")
    wait_for(lambda: os.path.isdir(logs) and any(f.startswith("round") for f in os.listdir(logs)),
             what="the pair rounds to start")
    cluster.run("scancel", job)  # what a user does: SIGTERM to every process of the job, SIGKILL after KillWait
    assert finished(cluster, job, timeout=90) != "0:0"
    r = report(d, job)
    assert r["interrupted"] == "signal 15" and r["exit_code"] == 5 and r["chosen"] == [], r
    for kind in ("hosts", "nodelist", "master"):
        assert not os.path.exists(os.path.join(d, f"slurmqual-preflight-{job}.{kind}"))
    assert drained(cluster) == {}
    # the job's steps ended with it: every node takes the next job
    wait_for(lambda: all(v.get("state") == "idle" for v in cluster.nodes().values()), what="every node idle")
