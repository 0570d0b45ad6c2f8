"""The test harness (tests/slurmcluster.py) refuses, saying what to change, a
cluster directory munged's user cannot reach (TMPDIR inside a 0700
directory), instead of timing out waiting for munged's socket."""

from __future__ import annotations

import os
import pwd
import time

import pytest

from slurmcluster import Cluster, missing_requirements, unreachable_dir


def _munge_ids() -> tuple[int, int]:
    try:
        pw = pwd.getpwnam("munge")
    except KeyError:
        pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


@pytest.fixture
def open_tmp():
    """A 0755 directory under the system's temp dir (pytest's own tmp dirs are 0700)."""
    import pathlib
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="slurmqual-reach-")
    os.chmod(d, 0o755)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_a_0700_directory_above_the_cluster_is_named(open_tmp):
    uid, gid = _munge_ids()
    private = open_tmp / "private"
    base = private / "slurmqual-x-123"
    base.mkdir(parents=True)
    private.chmod(0o700)
    assert unreachable_dir(str(base), uid, gid) == str(private)
    private.chmod(0o711)  # traversable is enough: nothing is listed
    assert unreachable_dir(str(base), uid, gid) is None
    # The directory itself is not judged: the harness makes it 0755 before munged starts.
    base.chmod(0o700)
    assert unreachable_dir(str(base), uid, gid) is None
    # Through the group's bit when the user is in the directory's group.
    private.chmod(0o710)
    assert unreachable_dir(str(base), uid, gid) == str(private)
    assert unreachable_dir(str(base), uid, gid, groups=(os.stat(private).st_gid,)) is None


def test_a_cluster_under_an_unreachable_tmp_base_fails_at_once_saying_what_to_change(open_tmp):
    why = missing_requirements()
    if why:
        pytest.skip(f"real Slurm cluster unavailable: {why}")
    private = open_tmp / "private"  # e.g. TMPDIR=$(mktemp -d)/tmp: mktemp's directory is 0700
    base = private / "tmp" / "slurmqual-reach"
    base.mkdir(parents=True)
    private.chmod(0o700)
    c = Cluster(str(base), 1)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        c.start()
    msg = str(err.value)
    assert f"{private} (mode 0700)" in msg and "not reachable by user munge" in msg, msg
    assert "TMPDIR" in msg and f"chmod o+x {private}" in msg, msg
    assert time.monotonic() - start < 5 and not c.pids  # no daemon started, no wait for munged's socket
