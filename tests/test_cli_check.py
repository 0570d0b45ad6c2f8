"""End to end: the CLI on every bundled example tree, JSON schema and exit codes."""

import json
import os
import subprocess
import sys

import pytest

from slurmqual.nodetree import EXAMPLES, build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, "config", "slurmqual.toml")


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "slurmqual", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_check_json_on_each_example(tmp_path, example):
    root = build(example, str(tmp_path / example))
    p = run("check", "--root", root, "--config", CONFIG, "--json", "--node", "gpu001")
    out = json.loads(p.stdout)
    assert set(out) == {"node", "status", "checks"} and out["node"] == "gpu001"
    for c in out["checks"]:
        assert set(c) == {"name", "status", "message", "devices", "hint"}
        assert isinstance(c["devices"], list) and c["status"] in {"pass", "warn", "fail", "error", "skip", "na"}
    healthy = example.endswith("healthy")
    assert out["status"] == ("pass" if healthy else "fail")
    assert p.returncode == (0 if healthy else 1)
    failed = [c for c in out["checks"] if c["status"] == "fail"]
    assert all(c["hint"] for c in failed) and len(failed) == (0 if healthy else 1)


def test_human_output_failures_first_no_colour_when_piped(tmp_path):
    root = build("dcqcn-off", str(tmp_path / "t"))
    p = run("check", "--root", root, "--config", CONFIG)
    lines = p.stdout.splitlines()
    assert lines[0].startswith("FAIL  dcqcn") and "\033[" not in p.stdout and p.returncode == 1


def test_bad_usage_and_bad_config_exit_2(tmp_path):
    root = build("h100-roce-healthy", str(tmp_path / "t"))
    assert run("check", "--root", root, "--only", "nope").returncode == 2
    assert run("check", "--root", str(tmp_path / "missing")).returncode == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[fabric]\nnics = -3\n")
    p = run("check", "--root", root, "--config", str(bad))
    assert p.returncode == 2 and "fabric.nics" in p.stderr


def test_only_and_level(tmp_path):
    root = build("h100-ib-healthy", str(tmp_path / "t"))
    out = json.loads(run("check", "--root", root, "--only", "dcqcn,peermem", "--json").stdout)
    assert [c["name"] for c in out["checks"]] == ["peermem", "dcqcn"]
    assert out["checks"][1]["status"] == "na"
    fast = json.loads(run("check", "--root", root, "--json").stdout)
    assert "versions" not in [c["name"] for c in fast["checks"]]
    std = json.loads(run("check", "--root", root, "--json", "--level", "standard").stdout)
    assert "versions" in [c["name"] for c in std["checks"]]
