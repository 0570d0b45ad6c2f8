"""End to end: the CLI on every bundled example tree, JSON schema and exit codes."""

import json
import os
import subprocess
import sys

import pytest

from slurmqual.nodetree import EXAMPLES, build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, "config", "slurmqual.toml")


def example_config(tmp_path) -> str:
    """The bundled example config with its state dir (counter history) in
    tmp_path: its own names the machine's /var/lib/slurmqual."""
    text = open(CONFIG).read()
    assert 'state_dir = "/var/lib/slurmqual/state"' in text
    path = tmp_path / "slurmqual.toml"
    path.write_text(text.replace('state_dir = "/var/lib/slurmqual/state"', f'state_dir = "{tmp_path}/state"', 1))
    return str(path)


def defaults_config(tmp_path) -> str:
    """The built-in defaults but for the state dir: a run with no config at
    all keeps counter history in /var/lib/slurmqual/state (by design)."""
    path = tmp_path / "defaults.toml"
    path.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\n')
    return str(path)


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "slurmqual", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_check_json_on_each_example(tmp_path, example):
    root = build(example, str(tmp_path / example))
    # slow level: the GPU faults need nvidia-smi and dcgmi (the tree's recorded outputs)
    p = run("check", "--root", root, "--config", example_config(tmp_path), "--json", "--node", "gpu001",
            "--level", "slow",
            env=dict(os.environ, PATH=str(tmp_path / "no-tools"), SLURMQUAL_CACHE_DIR=str(tmp_path / "cache")))
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
    p = run("check", "--root", root, "--config", example_config(tmp_path))
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
    cfg = defaults_config(tmp_path)
    out = json.loads(run("check", "--root", root, "--config", cfg, "--only", "dcqcn,peermem", "--json").stdout)
    assert [c["name"] for c in out["checks"]] == ["peermem", "dcqcn"]
    assert out["checks"][1]["status"] == "na"
    fast = json.loads(run("check", "--root", root, "--config", cfg, "--json").stdout)
    assert "versions" not in [c["name"] for c in fast["checks"]]
    std = json.loads(run("check", "--root", root, "--config", cfg, "--json", "--level", "standard").stdout)
    assert "versions" in [c["name"] for c in std["checks"]]


def test_warn_exits_0_and_error_exits_2_with_other_checks_still_run(tmp_path):
    root = build("pcie-degraded", str(tmp_path / "t"))
    warn = tmp_path / "warn.toml"
    warn.write_text(f"[checks.pcie_link]\non_degraded = 'warn'\n[hooks]\nstate_dir = '{tmp_path}/state'\n")
    p = run("check", "--root", root, "--config", str(warn), "--json")
    out = json.loads(p.stdout)
    assert out["status"] == "warn" and p.returncode == 0
    root = build("h100-roce-healthy", str(tmp_path / "e"))
    os.unlink(os.path.realpath(f"{root}/sys/class/infiniband/mlx5_2/ports/1/rate"))
    p = run("check", "--root", root, "--config", defaults_config(tmp_path), "--json")
    out = json.loads(p.stdout)
    by = {c["name"]: c for c in out["checks"]}
    assert out["status"] == "error" and p.returncode == 2
    assert by["nic_link"]["status"] == "error" and "mlx5_2/ports/1/rate" in by["nic_link"]["message"]
    assert by["peermem"]["status"] == "pass" and by["dcqcn"]["status"] == "pass"


def test_explain_every_check_and_unknown():
    from slurmqual.checks import REGISTRY

    for name in REGISTRY:
        p = run("explain", name)
        assert p.returncode == 0 and p.stdout.startswith(f"{name} (") and "Fix:" in p.stdout, name
    p = run("explain")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == len(REGISTRY)
    p = run("explain", "nope")
    assert p.returncode == 2 and "unknown check 'nope'" in p.stderr


def test_config_validate_and_show(tmp_path):
    p = run("config", "validate", CONFIG)
    assert p.returncode == 0 and p.stdout.strip() == f"{CONFIG}: ok"
    bad = tmp_path / "bad.toml"
    bad.write_text("[checks.dcqcn]\nmlxconfig = 'sometimes'\n")
    p = run("config", "validate", str(bad))
    assert p.returncode == 2 and str(bad) in p.stderr and "checks.dcqcn.mlxconfig" in p.stderr
    shown = json.loads(run("config", "show", "--config", CONFIG).stdout)
    assert shown["fabric"]["nics"] == 8 and shown["checks"]["dcqcn"]["mlxconfig"] == "auto"
    env = {k: v for k, v in os.environ.items() if k != "SLURMQUAL_CONFIG"}
    if not os.path.exists("/etc/slurmqual/config.toml"):  # built-in defaults
        p = subprocess.run([sys.executable, "-m", "slurmqual", "config", "show"], capture_output=True, text=True,
                           env=env, timeout=60)
        defaults = json.loads(p.stdout)
        assert defaults["fabric"]["nics"] is None and defaults["checks"]["dcqcn"]["priorities"] == list(range(8))
    env["SLURMQUAL_CONFIG"] = str(tmp_path / "none.toml")
    p = subprocess.run([sys.executable, "-m", "slurmqual", "config", "show"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 2 and "none.toml: config file not found" in p.stderr
