"""`scontrol -V` reads a slurm.conf before it prints the version (every
release; noticed first on 25.11): slurmqual's version detection (the CLI
adapter, `install --check`, pyslurm's mismatch message) works on a host
without the cluster's slurm.conf. Real binaries: Debian 12's 22.05 and the
25.11 built from ../shared/sources (tests/slurmbuild.py), when present."""

from __future__ import annotations

import os
import time

import pytest

import slurmbuild
from slurmqual.slurm import SlurmError
from slurmqual.slurm.cli import CliAdapter


def _bin_dirs() -> list:
    out = [pytest.param(("/usr/bin", "22.05"), id="22.05")]
    built = slurmbuild.prefix("25.11")
    out.append(pytest.param((os.path.join(built, "bin"), "25.11"), id="25.11"))
    return out


@pytest.fixture(params=_bin_dirs())
def scontrol_dir(request):
    bin_dir, release = request.param
    if not os.access(os.path.join(bin_dir, "scontrol"), os.X_OK):
        pytest.skip(f"no scontrol of Slurm {release} at {bin_dir} (22.05: apt-get install slurm-client; "
                    "25.11: python3 tests/slurmbuild.py build)")
    return bin_dir, release


def _without_slurm_conf(monkeypatch):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    for path in ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf"):
        if os.path.exists(path):
            pytest.skip(f"{path} exists here: scontrol reads it")


def test_version_with_no_slurm_conf_anywhere(scontrol_dir, monkeypatch):
    bin_dir, release = scontrol_dir
    _without_slurm_conf(monkeypatch)
    v = CliAdapter(bin_dir, timeout=10, retries=1).version
    assert f"{v.major}.{v.minor:02d}" == release


def test_version_with_a_slurm_conf_path_that_is_missing_answers_at_once(scontrol_dir, monkeypatch, tmp_path):
    """scontrol alone retries a missing SLURM_CONF for 60 s (past any timeout_s)."""
    bin_dir, release = scontrol_dir
    _without_slurm_conf(monkeypatch)
    start = time.monotonic()
    v = CliAdapter(bin_dir, timeout=10, retries=1, slurm_conf=str(tmp_path / "absent" / "slurm.conf")).version
    assert f"{v.major}.{v.minor:02d}" == release and time.monotonic() - start < 8


def test_a_scontrol_that_is_not_there_is_still_an_error(tmp_path):
    with pytest.raises(SlurmError, match="command not found"):
        CliAdapter(str(tmp_path), timeout=5, retries=1, slurm_conf=str(tmp_path / "slurm.conf")).version
