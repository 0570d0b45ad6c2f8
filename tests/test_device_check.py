"""bench/device/check.sh, the live-GPU device check, run here on a recorded node
tree of its target machine (NVIDIA GPUs and a driver, no InfiniBand, no
NVSwitch, no Slurm) with the stand-in tools of tests/fakebin: the wheel in a
fresh venv, config init, every check at every level, the hooks as slurmd runs
them, the per-GPU lines the burn-in task's own runner writes, and
`slurmqual preflight --need 1` run as a one-node job runs it (no Slurm: srun is
bench/device/bin/srun, squeue and scontrol are out of reach)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from nodes import tree
from slurmqual.burnin.read.gpuparse import parse_file
from slurmqual.checks import REGISTRY
from slurmqual.nodetree import DEFAULT_MODULES, NodeSpec

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "bench", "device", "check.sh")
HELPER = os.path.join(REPO, "bench", "device", "devicecheck.py")
FAKEBIN = os.path.join(REPO, "tests", "fakebin")
NO_RDMA = [m[0] for m in DEFAULT_MODULES if not m[0].startswith(("mlx5", "ib_", "nvidia_peermem"))]


def gpu_box(**kw) -> NodeSpec:
    """Two H100s and a driver; no RDMA stack, no NVSwitch: the lent machine's kind."""
    return NodeSpec(gpus=2, nics=0, nvswitches=0, sockets=1, modules=NO_RDMA, **kw)


def stand_in_tools(path) -> str:
    path.mkdir()
    for name in ("gpu_burn", "nvbandwidth"):
        os.symlink(os.path.join(FAKEBIN, "gpu_tool"), path / name)
    os.symlink(os.path.join(FAKEBIN, "all_reduce_perf"), path / "all_reduce_perf")
    (path / "fabric.json").write_text(json.dumps({"gpu": {"count": 2}, "base": 380.0}))
    return str(path)


@pytest.fixture(scope="module")
def device_run(tmp_path_factory):
    """One run of the script in its tree mode; (exit code, report text, work dir, tools dir)."""
    base = tmp_path_factory.mktemp("device")
    os.chmod(base, 0o755)
    root = tree(base, gpu_box())
    tools = stand_in_tools(base / "tools")
    report, work = base / "report.txt", base / "work"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMQUAL_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{base / 'no-tools'}:/usr/bin:/bin"        # no nvidia-smi, no Slurm, no mlxconfig here
    proc = subprocess.run(["bash", SCRIPT, "--root", root, "--tools", tools, "--out", str(report), "--work", str(work),
                           "--runs", "3", "--tool-seconds", "5"], env=env, capture_output=True, text=True,
                          timeout=900)
    text = report.read_text() if report.exists() else ""
    if proc.returncode and ("No matching distribution" in text or "NewConnectionError" in text):
        pytest.skip("pip cannot reach a package index for the wheel's dependencies here")
    return proc.returncode, text, str(work), tools


def section(text: str, title: str) -> str:
    start = text.index(f"== {title}")
    end = text.find("\n== ", start + 1)
    return text[start:end if end > 0 else None]


def test_script_passes_on_the_gpu_box_and_reports_every_check_at_every_level(device_run):
    rc, text, _work, _tools = device_run
    assert rc == 0, text[-3000:]
    assert "installed: slurmqual" in text and "/venv/bin/slurmqual config init" in text
    assert re.search(r"init\.toml: ok", text)
    for level, allowed in (("fast", ("fast",)), ("standard", ("fast", "standard")),
                           ("slow", ("fast", "standard", "slow"))):
        part = section(text, f"3. checks, level {level}")
        names = [n for n, s in REGISTRY.items() if s.level in allowed]
        for name in names:        # verdict, time and reason of each check
            m = re.search(rf"^\s+{name}\s+(fast|standard|slow)\s+(\S+)\s+([\d.]+) ms  (.+)$", part, re.M)
            assert m, (level, name)
            assert m.group(2) in ("pass", "n/a", "skip"), m.group(0)
        assert f"level {level}: 0 not passing" in part
        assert f"slurmqual check --level {level}: exit 0" in part
    fast = section(text, "3. checks, level fast")
    assert re.search(r"nic_link\s+fast\s+n/a .*no RDMA devices on this node", fast)
    assert re.search(r"peermem\s+fast\s+n/a .*GPUDirect RDMA not applicable", fast)


def test_hooks_are_timed_through_the_installed_wrapper_beside_bare_python(device_run):
    _rc, text, work, _tools = device_run
    part = section(text, "4. hooks")
    for hook in ("prolog", "epilog", "healthcheck"):
        m = re.search(rf"^\s+{hook}\s+([\d.]+) ms\s+([\d.]+) ms\s+([\d.]+) ms\s+([\d.]+)\s+([\d.]+)\s+0$", part, re.M)
        assert m, hook
        assert float(m.group(4)) == pytest.approx(float(m.group(1)) / float(m.group(3)), rel=0.02)
        wrapper = open(os.path.join(work, f"slurmqual-{hook}")).read()
        assert f"{work}/venv/bin/python" in wrapper and " -I " in wrapper   # this venv, isolated mode


def test_tool_lines_come_from_the_task_runner_and_burnin_parse(device_run):
    _rc, text, work, _tools = device_run
    part = section(text, "5. burn-in tools")
    lines = [json.loads(ln) for ln in open(os.path.join(work, "measurements.jsonl"))]
    logs = os.path.join(work, "logs")
    for tool, tests in (("gpu_burn", ("burn",)), ("nvbandwidth", ("hbm", "h2d", "d2h", "nvlink"))):
        log = [f for f in os.listdir(logs) if f.startswith(f"gpu-{tool}-")][0]
        parsed = {(r.gpu, r.test): r.value for r in parse_file(os.path.join(logs, log), tool).readings}
        for gpu in (0, 1):
            for test in tests:
                line = [d for d in lines if d.get("tool") == tool and d["gpu"] == gpu and d["test"] == test]
                assert len(line) == 1 and line[0]["ok"], (tool, gpu, test)
                assert line[0]["value"] == parsed[(gpu, test)]
                assert re.search(rf"{tool}\s+GPU {gpu} {test}\s+{re.escape(str(parsed[(gpu, test)]))} ", part)
        assert f"$ slurmqual burnin parse {log}   (exit 0)" in part
    untested = [d for d in lines if d.get("tool") == "dcgmproftester"]
    assert len(untested) == 2 and not any(d["ok"] for d in untested) and "untested" in part
    nccl = [d for d in lines if d.get("test") == "all_reduce"]
    assert len(nccl) == 1 and nccl[0]["ok"] and nccl[0]["busbw"] > 0
    assert "intra-all_reduce_perf-" in part and re.search(r"ok; hosts \S+; \d+ rows", part)
    assert re.search(r"total \d+ s \(budget 480 s: within\)", text)


def test_preflight_runs_as_a_one_node_job_and_chooses_the_node(device_run):
    """The preflight step: job variables for this one node, srun the local
    stand-in, --gpu-tools with the tools there; it passes and writes the
    launcher's files naming this node; its GPU lines are what the tools' logs
    say (parsed here by the burn-in's reader)."""
    rc, text, work, _tools = device_run
    part = section(text, "6. slurmqual preflight")
    node = os.uname().nodename.split(".")[0]
    assert rc == 0 and "NOT PASSING" not in part, part
    assert re.search(r"\$ \S+/venv/bin/slurmqual preflight --need 1 --config \S+/preflight\.toml .*--gpu-tools", part)
    m = re.search(r"slurmqual preflight --need 1: exit 0 in ([\d.]+) s$", part, re.M)
    assert m and float(m.group(1)) < 90
    out = os.path.join(work, "preflight")
    files = {k: os.path.join(out, f"slurmqual-preflight-4343.{k}") for k in ("hosts", "nodelist", "master", "exclude")}
    assert open(files["hosts"]).read().split() == [node] == open(files["master"]).read().split()
    assert open(files["nodelist"]).read().strip() == node and open(files["exclude"]).read().strip() == ""
    for k in ("hosts", "nodelist", "master", "exclude", "json"):
        assert f"slurmqual-preflight-4343.{k}:" in part and f"slurmqual-preflight-4343.{k}: not written" not in part
    report = json.load(open(os.path.join(out, "slurmqual-preflight-4343.json")))
    assert report["exit_code"] == 0 and report["chosen"] == [node] and report["nodes"] == [node]
    outcome = report["outcomes"][node]
    assert outcome["verdict"] == "pass" and outcome["checks"] in ("pass", "warn", "error")
    assert any("one-node allocation" in n and "gpu_burn" in n for n in outcome["notes"])
    # no Slurm here: the preflight says it cannot list the job's steps, and goes on
    assert any("cannot be listed" in n for n in report["notes"])
    logs = os.path.join(out, "slurmqual-preflight-4343.logs")
    assert "checks.log" in os.listdir(logs)
    for tool in ("gpu_burn", "nvbandwidth"):
        parsed = {(r.gpu, r.test): r.value for r in parse_file(os.path.join(logs, f"gpu-{tool}-{node}.log"), tool).readings}
        mine = {(d["gpu"], d["test"]): d["value"] for d in report["measurements"] if d.get("tool") == tool}
        assert parsed and mine == parsed, tool
        assert {g for g, _t in mine} == {0, 1}
        assert all(d["ok"] for d in report["measurements"] if d.get("tool") == tool)


def test_preflight_step_marks_a_node_with_gpu_compare_errors_not_passing(tmp_path):
    """The helper's preflight step on a node whose gpu_burn counts compare
    errors on GPU 1: the one-node preflight fails it (exit 3, no hostfile)
    and the step says NOT PASSING."""
    from slurmqual import cli

    node = os.uname().nodename.split(".")[0]
    root = tree(tmp_path, gpu_box(), name="box")
    tools = stand_in_tools(tmp_path / "tools")
    (tmp_path / "tools" / "fabric.json").write_text(json.dumps({"gpu": {"count": 2, "errors": {node: {"1": 7}}}}))
    init = tmp_path / "init.toml"
    assert cli.main(["config", "init", "--root", root, "-o", str(init), "--no-verify"]) == 0
    run_cfg = tmp_path / "run.toml"
    env = dict(os.environ, PYTHONPATH=REPO, PATH=f"{os.path.join(REPO, 'bench', 'device', 'bin')}:/usr/bin:/bin",
               SLURMQUAL_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, HELPER, "runconfig", str(init), str(run_cfg), "--work", str(tmp_path),
                    "--root", root], check=True, env=env)
    p = subprocess.run([sys.executable, HELPER, "preflight", "--config", str(run_cfg), "--work", str(tmp_path),
                        "--tools-dir", tools, "--time", "40"], capture_output=True, text=True, env=env, timeout=200)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"preflight --need 1: exit 3 in [\d.]+ s   <-- NOT PASSING", p.stdout), p.stdout
    assert re.search(rf"report: {node} fail .*gpu_burn GPU 1 burn: 7 compare errors", p.stdout), p.stdout
    assert "slurmqual-preflight-4343.hosts: not written" in p.stdout


def test_a_failing_check_is_reported_as_not_passing(tmp_path, capsys):
    """The helper marks what does not pass and exits 1 (the config from a healthy
    box judging one with a GPU left in MIG mode)."""
    from slurmqual import cli

    good = tree(tmp_path, gpu_box(), name="good")
    bad = tree(tmp_path, gpu_box(gpu_report={1: {"mig": "Enabled"}}), name="bad")
    init = tmp_path / "init.toml"
    assert cli.main(["config", "init", "--root", good, "-o", str(init), "--no-verify"]) == 0
    capsys.readouterr()
    run_cfg = tmp_path / "run.toml"
    env = dict(os.environ, PYTHONPATH=REPO, PATH=str(tmp_path / "no-tools"),
               SLURMQUAL_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, HELPER, "runconfig", str(init), str(run_cfg), "--work", str(tmp_path),
                    "--root", bad], check=True, env=env)
    p = subprocess.run([sys.executable, HELPER, "checks", "--config", str(run_cfg), "--level", "standard",
                        "--work", str(tmp_path)], capture_output=True, text=True, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"gpu_state\s+standard fail .*MIG enabled.*<-- NOT PASSING", p.stdout)
    assert "level standard: 1 not passing" in p.stdout


def test_srun_stand_in_runs_the_step_here_in_its_chdir(tmp_path):
    srun = os.path.join(REPO, "bench", "device", "bin", "srun")
    p = subprocess.run([srun, "--nodes=1", "--nodelist=n1", "--ntasks-per-node=4", f"--chdir={tmp_path}",
                        "--time=00:01:00", "sh", "-c", 'pwd; echo "$@"', "sh", "-b", "8M", "-g", "1"],
                       capture_output=True, text=True)
    assert p.returncode == 0
    assert p.stdout.split("\n")[:2] == [str(tmp_path), "-b 8M -g 4"]
    assert "one process driving 4 GPUs" in p.stderr
