"""`install --check` judges the hook timeouts as the running Slurm reads
slurm.conf (issue #18 part 5), on real daemons: a prolog timeout shorter than
the hooks' deadline, set with the key that version knows (PrologEpilogTimeout
up to 24.11, PrologTimeout from 25.05), is live in slurmctld and flagged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slurm_fixtures import start_cluster, stop_cluster
from slurmcluster import _version_tuple

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster(request):
    # The harness sets PrologEpilogTimeout=60; a later line of the same key wins.
    key = "PrologTimeout" if _version_tuple(request.param) >= (25, 5) else "PrologEpilogTimeout"
    c = start_cluster("installcheck", 1, extra_conf=f"{key}=20\n")
    c.prolog_key = key
    yield c
    stop_cluster(c)


def test_short_prolog_timeout_is_live_and_flagged(cluster):
    live = cluster.run("scontrol", "show", "config").stdout
    assert any(line.split("=", 1)[0].strip() == cluster.prolog_key and line.split("=", 1)[1].split()[0] == "20"
               for line in live.splitlines() if "=" in line), live
    # Version from `scontrol -V` through the cluster's own bin_dir (the site config's slurm.bin_dir).
    p = subprocess.run([sys.executable, "-m", "slurmqual", "install", "--check", "--no-hook-run",
                        "--slurm-conf", cluster.conf, "--config", cluster.sq_config],
                       env=cluster.env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    want = f"PROBLEM  slurm.conf prolog timeout: 20s ({cluster.prolog_key}) is not above the hooks' deadline"
    assert want in p.stdout, p.stdout
    assert "does not know this key" not in p.stdout   # the key is the one this version reads
