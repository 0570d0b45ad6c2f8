"""Helpers for the hostile-input tests: another, unprivileged user who owns
what an attacker would own (real `useradd`, not a faked uid)."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

USER = "sqhostile"


def other_user() -> tuple[int, int]:
    """uid/gid of a real unprivileged account, created with useradd when
    running as root; skips when not root (ownership rules are root's)."""
    if os.geteuid() != 0:
        pytest.skip("hostile-user cases need root (the rules protect what root reads and writes)")
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                       check=False, capture_output=True)
        pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid


def as_user(uid: int, gid: int, argv: list[str], **kw) -> subprocess.CompletedProcess:
    """Run argv as that user (what the attacker can do, done by the attacker)."""
    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return subprocess.run(argv, preexec_fn=drop, capture_output=True, text=True, check=True, **kw)


@pytest.fixture
def open_tmp():
    """A root-owned 0755 directory under /tmp that the other user can reach
    (pytest's own tmp dirs are 0700)."""
    import pathlib
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="slurmqual-hostile-")
    os.chmod(d, 0o755)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def isolated_records() -> dict[str, str]:
    """For a hook started with an environment of its own: where conftest
    points a refused config's records (never the machine's /var)."""
    return {k: os.environ[k] for k in ("SLURMQUAL_PROBLEM_STATE_DIR", "SLURMQUAL_PROBLEM_LOG_FILE") if k in os.environ}
