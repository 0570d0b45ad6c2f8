"""The prolog runs before every job: a passing one imports only what it uses
(bench/bench_check_fast.py measures the time; this guards the imports that
used to cost it), and the deferred logger still writes when there is something
to say."""

from __future__ import annotations

import os
import subprocess
import sys

from slurmqual.nodetree import build, remove_module

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each one cost the prolog milliseconds before every job, and none is needed by a pass.
NOT_ON_A_PASS = ("pydantic", "requests", "tomllib", "logging", "dataclasses", "traceback", "secrets",
                 "slurmqual.slurm", "slurmqual.hints", "slurmqual.config_schema",
                 "typing", "runpy", "signal",
                 "json", "re", "enum", "collections", "functools")  # leanjson, Status, probes without re

PROBE = ("import sys; from slurmqual.hooks import run; rc = run('prolog'); "
         "print(rc, ' '.join(sorted(m for m in sys.modules if m in {names!r} or m.startswith('slurmqual.checks.'))))")


def site(tmp_path, example: str = "h100-roce-healthy"):
    root = build(example, str(tmp_path / "tree"))
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[node]\nroot = "{root}"\n[fabric]\nnics = 8\n[slurm]\nbin_dir = "{tmp_path}/no-slurm"\n'
                   f'[hooks]\nsyslog = false\nlog_file = "{tmp_path}/log/sq.log"\nstate_dir = "{tmp_path}/state"\n')
    os.chmod(tmp_path, 0o755)
    env = {"SLURMD_NODENAME": "n1", "SLURMQUAL_CONFIG": str(cfg), "SLURMQUAL_CACHE_DIR": str(tmp_path / "cache"),
           "SLURM_JOB_ID": "42", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}
    return root, env


def prolog(env: dict, *, bare: bool = True) -> tuple[int, set[str]]:
    """Run the prolog in a fresh interpreter: its exit code and the modules it imported.
    bare: without site (-S), the package found through PYTHONPATH, as an installed
    venv starts: the dev venv's editable-install finder imports re, enum,
    functools... in every interpreter, which would hide the prolog importing them.
    The first run after a config change validates it with pydantic: not bare."""
    code = PROBE.format(names=set(NOT_ON_A_PASS))
    flags = ["-S"] if bare else []
    if bare:
        env = dict(env, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, *flags, "-P", "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    rc, _, modules = out.stdout.strip().partition(" ")
    return int(rc), set(modules.split())


def test_passing_prolog_imports_no_heavy_module_and_only_its_own_checks(tmp_path):
    _root, env = site(tmp_path)
    prolog(env, bare=False)  # the first run after a config change validates it (pydantic) and caches the result
    rc, modules = prolog(env)
    assert rc == 0
    assert not modules & set(NOT_ON_A_PASS), modules & set(NOT_ON_A_PASS)
    checks = {m.removeprefix("slurmqual.checks.") for m in modules if m.startswith("slurmqual.checks.")}
    assert "peermem" in checks and "xid" not in checks and "dcgm" not in checks  # standard/slow: not imported
    assert (tmp_path / "state/nodes/n1.json").exists()


def test_failing_prolog_still_logs_through_the_deferred_logger(tmp_path):
    root, env = site(tmp_path)
    prolog(env, bare=False)
    remove_module(root, "nvidia_peermem")
    rc, modules = prolog(env, bare=False)  # a failing prolog asks Slurm (python-hostlist, in site-packages)
    assert rc == 1 and "logging" in modules
    logged = (tmp_path / "log/sq.log").read_text()
    assert "prolog n1: peermem fail: " in logged and "cannot read node state from Slurm" in logged  # none here


def test_hooks_never_load_pyslurm_whatever_the_adapter(tmp_path):
    """[slurm] adapter = "pyslurm" or "auto" is for admin commands: a failing
    prolog (it asks Slurm and drains) goes through the CLI, never libslurm."""
    root, env = site(tmp_path)
    cfg = tmp_path / "sq.toml"
    remove_module(root, "nvidia_peermem")
    for adapter in ("pyslurm", "auto"):
        cfg.write_text(cfg.read_text().replace("[slurm]\n", f'[slurm]\nadapter = "{adapter}"\n', 1)
                       if "adapter =" not in cfg.read_text() else
                       cfg.read_text().replace('adapter = "pyslurm"', f'adapter = "{adapter}"'))
        code = PROBE.format(names={"pyslurm", "slurmqual.slurm.libslurm", "slurmqual.slurm.pyslurm_adapter",
                                   "slurmqual.slurm.cli"})
        out = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, check=True)
        rc, _, modules = out.stdout.strip().partition(" ")
        slurm_modules = {m for m in modules.split() if not m.startswith("slurmqual.checks.")}
        assert int(rc) == 1 and slurm_modules == {"slurmqual.slurm.cli"}, (adapter, modules)
        assert "cannot read node state from Slurm" in (tmp_path / "log/sq.log").read_text()
