"""pytest fixtures for a real local Slurm cluster (see tests/slurmcluster.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from slurmcluster import Cluster, missing_requirements


def start_cluster(name: str, nodes: int, **start_args) -> Cluster:
    """Start a cluster in a fresh dir under /tmp (munged, as user munge, must be
    able to traverse it, which pytest's 0700 tmp dirs do not allow)."""
    why = missing_requirements()
    if why:
        pytest.skip(f"real Slurm cluster unavailable: {why}")
    base = tempfile.mkdtemp(prefix=f"slurmqual-{name}-")
    return Cluster(base, nodes).start(**start_args)


def stop_cluster(cluster: Cluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.base, ignore_errors=True)


def _user_ids(cluster, user: str) -> tuple[int, int]:
    """uid/gid of `user` where the cluster's daemons run (the chroot's passwd for chroot versions)."""
    root = getattr(cluster, "root", None)
    with open(os.path.join(root or "/", "etc", "passwd")) as fh:
        for line in fh:
            f = line.split(":")
            if f[0] == user:
                return int(f[2]), int(f[3])
    raise RuntimeError(f"user {user} missing in {root or '/'}")


def start_rest_local(cluster, user: str = "munge") -> str:
    """slurmrestd with rest_auth/local on a unix socket, run as an unprivileged
    user (slurmrestd refuses root, SlurmUser and, from 23.11, nobody); returns
    unix:///path. Stopped with the cluster (its pid is in cluster.pids)."""
    uid, gid = _user_ids(cluster, user)
    sock_dir = os.path.join(cluster.base, "restd-local")
    os.makedirs(sock_dir, exist_ok=True)
    os.chown(sock_dir, uid, gid)
    sock = os.path.join(sock_dir, "slurmrestd.sock")
    daemon = cluster.sbin("slurmrestd") if hasattr(cluster, "sbin") else "/usr/sbin/slurmrestd"
    argv = [daemon, "-f", cluster.conf, "-u", user, "-g", user, "-s", cluster.rest_plugins(),
            "-a", "rest_auth/local", f"unix:{sock}"]
    if hasattr(cluster, "in_root"):
        argv = cluster.in_root(argv, cwd=cluster.base)
    env = {k: v for k, v in cluster.env.items() if k not in ("SLURM_JWT", "SLURMRESTD_SECURITY")}
    with open(os.path.join(cluster.log, "slurmrestd-local.out"), "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cluster.base,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    cluster.pids["slurmrestd-local"] = proc.pid
    cluster.save()
    cluster.wait_for(lambda: os.path.exists(sock), 20, "slurmrestd (rest_auth/local) socket")
    return "unix://" + sock
