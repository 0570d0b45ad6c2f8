"""The Slurm-from-source builder (tests/slurmbuild.py): a plain clone without
../shared skips the 25.11 tests saying why, a wrong archive is never built,
a finished build is reused, and pyslurm loads against it without crashing
the process on any of the ways it can be wrong."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest

import slurmbuild

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_plain_clone_without_shared_skips_the_25_11_tests_saying_why(tmp_path):
    """As on a fresh clone with no ../shared/sources: the 25.11 cases of a real
    test module are collected, and skip with the archive's absence as reason."""
    empty = tmp_path / "no-shared" / "sources"
    env = dict(os.environ, SLURMQUAL_SOURCES=str(empty), SLURMQUAL_SLURM_VERSIONS="25.11")
    env.pop("PYTEST_XDIST_WORKER", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "-p", "no:xdist",
                        "tests/test_adapter_contract.py", "-k", "node_info or array"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert " passed" not in p.stdout and " skipped" in p.stdout, p.stdout[-1500:]
    assert f"source archive {empty}/slurm-25.11.7.tar.xz absent" in p.stdout, p.stdout[-1500:]


def test_an_archive_whose_sha256_is_not_the_readme_s_is_never_built(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("the builder runs as root (scripts/test.sh)")
    src = tmp_path / "sources"
    src.mkdir()
    (src / "slurm-25.11.7.tar.xz").write_bytes(b"not the Slurm release\n")
    stated = hashlib.sha256(b"the real one").hexdigest()
    (src / "README.md").write_text(f"sha256 of slurm-25.11.7.tar.xz: `{stated}`\n")
    monkeypatch.setenv("SLURMQUAL_SOURCES", str(src))
    monkeypatch.setenv("SLURMQUAL_SLURM_BUILD_CACHE", str(tmp_path / "cache"))
    with pytest.raises(slurmbuild.SlurmBuildUnavailable, match=f"is not the {stated} its README states"):
        slurmbuild.ensure_slurm("25.11")
    assert not os.path.exists(slurmbuild.prefix("25.11"))   # nothing unpacked, configured or marked ready
    (src / "README.md").write_text("no checksum here\n")
    with pytest.raises(slurmbuild.SlurmBuildUnavailable, match="gives no sha256"):
        slurmbuild.ensure_slurm("25.11")


def test_a_finished_build_is_reused():
    why = slurmbuild.why_unavailable("25.11")
    if why:
        pytest.skip(why)
    path = slurmbuild.ensure_slurm("25.11")   # builds once if needed (scripts/test.sh starts it early)
    start = time.monotonic()
    assert slurmbuild.ensure_slurm("25.11") == path
    assert time.monotonic() - start < 5
    assert slurmbuild.check_install(path) is None
    out = subprocess.run([os.path.join(path, "sbin", "slurmctld"), "-V"], capture_output=True, text=True)
    assert out.stdout.split() == ["slurm", "25.11.7"]


# -- pyslurm against it: every way it can be wrong is a SlurmError, never an exit ---------

def _status(tmp_path, adapter: str, slurm_conf: str, **env_extra) -> subprocess.CompletedProcess:
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[slurm]\nadapter = "{adapter}"\nslurm_conf = "{slurm_conf}"\nbin_dir = "{tmp_path}/no-cli"\n'
                   f'[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/s.db"\n')
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-m", "slurmqual", "status", "--config", str(cfg)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_no_slurm_conf_is_a_clear_error_not_libslurm_exiting(tmp_path, pyslurm_installed):
    """libslurm's slurm_init exits the process (fatal) on a config it cannot
    use, and retries a missing file for 60 s first: a missing file is named at
    once, a broken one is found by the probe child; nothing exits this process."""
    from slurmqual.slurm import SlurmError
    from slurmqual.slurm.pyslurm_adapter import PyslurmAdapter

    absent = tmp_path / "absent" / "slurm.conf"
    with pytest.raises(SlurmError, match=f"slurm.conf {absent} not found"):
        PyslurmAdapter(str(absent)).node_info()
    p = _status(tmp_path, "pyslurm", str(absent))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "not found" in p.stderr and "slurm_conf" in p.stderr, p.stderr
    # A slurm.conf libslurm cannot use: libslurm exits the process (fatal) at init; the
    # child probe takes that, and this process goes on with a clear error.
    broken = tmp_path / "broken.conf"
    broken.write_text("NotASlurmKey=1\n")
    from slurmqual.slurm.libslurm import mismatch, probe

    found = probe(str(broken))
    assert "fatal: Unable to process configuration file" in found.get("init_error", ""), found
    with pytest.raises(SlurmError, match="could not start: .*Unable to process configuration file"):
        PyslurmAdapter(str(broken)).node_info()
    assert "could not start" in mismatch(found) and "25.11" in mismatch(found)


def test_a_libslurm_of_another_release_is_a_clear_error(tmp_path, pyslurm_installed):
    """The library pyslurm finds at run time is Debian 12's Slurm 22.05 (as
    after an upgrade that left pyslurm behind): the error names pyslurm's
    release and the fix; nothing crashes."""
    debian = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
    if not os.path.exists(os.path.join(debian, "libslurmfull.so")):
        pytest.skip("Debian's libslurmfull.so (slurm-client) not installed")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nNodeName=n1\nPartitionName=p Nodes=ALL\n")
    p = _status(tmp_path, "pyslurm", str(conf), LD_LIBRARY_PATH=debian)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "pyslurm 25.11.2 cannot load libslurm" in p.stderr and "Slurm 25.11" in p.stderr, p.stderr
    assert "SLURM_LIB_DIR" in p.stderr and 'adapter = "cli"' in p.stderr, p.stderr
    # "auto" falls back to the CLI instead (here no CLI either: its own clear error)
    p = _status(tmp_path, "auto", str(conf), LD_LIBRARY_PATH=debian)
    assert "Traceback" not in p.stderr and "pyslurm" not in p.stderr, p.stderr


def test_pyslurm_submission_fields_from_the_burn_in_s_own_sbatch_arguments(tmp_path, monkeypatch):
    """The sbatch arguments the burn-in submits (recorded from burnin.run.runner)
    become pyslurm's JobSubmitDescription fields: pinned node list, exact node
    count, exclusive, the dependency of the analysis, and only the named
    environment (never a token the submitter holds). Pure: no pyslurm needed."""
    from slurmqual.burnin.run.runner import submit
    from slurmqual.config import load
    from slurmqual.slurm import SlurmError
    from slurmqual.slurm.cli import submit_mark
    from slurmqual.slurm.pyslurm_adapter import submit_fields
    from slurmqual.testing import FakeAdapter

    monkeypatch.setenv("SLURMRESTD_TOKEN", "secret-token")
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[burnin]\nrun_dir = "{tmp_path}/runs"\ngroup_size = 2\n[store]\npath = "{tmp_path}/sq.db"\n')
    fake = FakeAdapter()
    submit(load(str(cfg), use_cache=False), fake, ["n1", "n2", "n3", "n4"], None, None)
    (task_argv, task_script), *_, (analysis_argv, analysis_script) = fake.submitted
    mark, args = submit_mark(task_argv)
    task = submit_fields(args, task_script)
    assert task["required_nodes"] in (["n1", "n2"], ["n3", "n4"], ["n1", "n3"], ["n2", "n4"], ["n1", "n4"], ["n2", "n3"])
    assert task["nodes"] == "2" and task["resource_sharing"] == "no" and task["comment"] == mark
    assert task["name"].startswith("slurmqual-burnin-") and task["standard_output"].endswith(".out")
    assert task["script"].startswith("#!/bin/sh\n") and "burnin task" in task["script"]
    assert "SLURMQUAL_CONFIG" in task["environment"] and "SLURMRESTD_TOKEN" not in task["environment"]
    assert "secret-token" not in repr(task)
    analysis = submit_fields(submit_mark(analysis_argv)[1], analysis_script)
    assert analysis["dependencies"] == "afterany:" + ":".join(str(101 + i) for i in range(len(fake.submitted) - 1))
    with pytest.raises(SlurmError, match="--gres is not supported by the pyslurm adapter"):
        submit_fields(["--gres=gpu:8"], "true")


def test_pyslurm_with_slurmctld_unreachable_is_a_bounded_clear_error(tmp_path, pyslurm_installed):
    """slurmctld down (nothing listens on its port): the load check says so
    within libslurm's own retry time, and nothing hangs or exits."""
    from slurmqual.slurm import SlurmError
    from slurmqual.slurm.pyslurm_adapter import PyslurmAdapter

    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\nAuthType=auth/munge\n"
                    "NodeName=n1\nPartitionName=p Nodes=ALL\n")
    start = time.monotonic()
    with pytest.raises(SlurmError, match=r"libslurm 25\.11\.7\) cannot read the controller's version: "
                                         r"Unable to contact slurm controller"):
        PyslurmAdapter(str(conf)).node_info()
    assert time.monotonic() - start < 45
