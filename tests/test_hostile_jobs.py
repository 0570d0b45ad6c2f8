"""What our Slurm jobs get: a minimal, named environment (never the
submitter's whole environment with its slurmrestd JWT) and an interpreter
that does not import modules from the submit directory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hostile import isolated_records

from slurmqual.burnin.run.runner import submission
from slurmqual.config import load
from slurmqual.security import UnsafePath, job_command, job_export

SECRET = "sq-hostile-jwt-0123456789abcdef"


def test_job_export_names_only_what_jobs_need():
    env = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "NCCL_IB_HCA": "mlx5", "UCX_TLS": "rc", "HOME": "/root",
           "SLURMRESTD_TOKEN": SECRET, "NCCL_API_TOKEN": SECRET, "AWS_SECRET_ACCESS_KEY": SECRET,
           "PYTHONPATH": "/opt/sq", "LD_PRELOAD": "/tmp/evil.so"}
    arg = job_export("/etc/slurmqual/config.toml", env)
    assert arg == "--export=LANG,NCCL_IB_HCA,PATH,PYTHONPATH,UCX_TLS,SLURMQUAL_CONFIG=/etc/slurmqual/config.toml"
    assert SECRET not in arg and "ALL" not in arg.split("=")[1].split(",")
    with pytest.raises(UnsafePath, match="cannot be passed to a job"):
        job_export("/etc/a,b.toml", env)
    assert job_export(None, {}) == "--export=NONE"


def test_burnin_submission_has_no_export_all_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMRESTD_TOKEN", SECRET)
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[burnin]\nrun_dir = "{tmp_path}/runs"\ngroup_size = 2\n')
    sub = submission(load(str(cfg)), ["n1", "n2", "n3", "n4"], None, None)
    argvs = sub["task_sbatch"] + [sub["analysis_sbatch"]]
    scripts = sub["task_scripts"] + [sub["analysis_script"]]
    for argv in argvs:
        exports = [a for a in argv if a.startswith("--export")]
        assert len(exports) == 1 and not exports[0].startswith("--export=ALL")
        assert f"SLURMQUAL_CONFIG={cfg}" in exports[0]
    text = repr(argvs) + repr(scripts)
    assert SECRET not in text and "SLURMRESTD_TOKEN" not in text
    assert all(" -P -m slurmqual " in s for s in scripts)


def test_job_command_ignores_modules_in_the_working_directory(tmp_path):
    """The interpreter line jobs run, started in a directory with a hostile json.py."""
    (tmp_path / "json.py").write_text("raise SystemExit('hijacked')\n")
    p = subprocess.run(f"{job_command()} --version", shell=True, cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "slurmqual" in p.stdout, p.stderr
    plain = subprocess.run([sys.executable, "-m", "slurmqual", "--version"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert "hijacked" in plain.stderr  # the control: without -P the stray module wins


@pytest.mark.parametrize("hook", ["prolog", "epilog", "healthcheck"])
def test_hook_wrappers_ignore_modules_in_the_working_directory(tmp_path, hook):
    """slurmd picks the hooks' working directory; a json.py there must not run as root."""
    (tmp_path / "json.py").write_text("raise SystemExit('hijacked')\n")
    wrapper = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), hook, f"slurmqual-{hook}")
    cfg = tmp_path / "missing.toml"  # no config: the hook logs one line and exits 0 without checking
    p = subprocess.run([wrapper], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={"SLURMQUAL_PYTHON": sys.executable, "SLURMQUAL_CONFIG": str(cfg),
                            "SLURMD_NODENAME": "n1", "SLURMQUAL_CACHE_DIR": str(tmp_path / "cache"),
                            **isolated_records()})
    assert "hijacked" not in p.stderr and p.returncode == 0, p.stderr
    assert "no checks run" in p.stderr and str(cfg) in p.stderr


def test_rest_submit_body_keeps_the_token_out_of_the_job(monkeypatch):
    from slurmqual.slurm.rest.jobs import submit_body

    monkeypatch.setenv("SLURMRESTD_TOKEN", SECRET)
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5")
    body = submit_body(40, ["--job-name=x", job_export("/etc/sq.toml"), "--export=SLURMRESTD_TOKEN"], "true")
    text = repr(body)
    assert SECRET not in text and "mlx5" in text and "/etc/sq.toml" in text
    env = body["job"]["environment"]
    env = dict(e.split("=", 1) for e in env) if isinstance(env, list) else env
    assert env.get("SLURMQUAL_CONFIG") == "/etc/sq.toml" and env.get("NCCL_IB_HCA") == "mlx5"
    assert "LANG" not in env or env["LANG"] == os.environ.get("LANG")
