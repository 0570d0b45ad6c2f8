#!/usr/bin/env python3
"""Capture real Slurm outputs of one version as test fixtures.

    python3 tests/data/real/slurm/capture.py VERSION     # 22.05 | 24.11 | newest

Starts a real 3-node cluster of that version with tests/slurmcluster.py
(22.05: the machine's Debian 12 Slurm; others: the Debian chroots of
tests/chroot.py), puts nodes in known states (n2 drained with a comment and
extra, n3 down in a maintenance reservation), submits an array job and a
plain job, then stores verbatim what each tool and each slurmrestd API
version answers under tests/data/real/slurm/<release>/. The states set up
are listed in SOURCES.tsv, which the decoder tests rely on.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path[:0] = [os.path.join(REPO, "tests"), REPO]

from slurm_fixtures import start_rest_local  # noqa: E402
from slurmcluster import Cluster  # noqa: E402


def main(version: str) -> int:
    import requests_unixsocket

    base = tempfile.mkdtemp(prefix="slurmqual-capture-")
    kw = {} if version == "22.05" else {"version": version}
    c = Cluster(base, 3, **kw)
    try:
        c.start(jwt=True)
        release = c.run("scontrol", "-V").stdout.split()[-1]
        out = os.path.join(HERE, ".".join(release.split(".")[:2]))
        os.makedirs(out, exist_ok=True)

        def save(name: str, *argv: str) -> None:
            p = c.run(*argv, check=False)
            with open(os.path.join(out, name), "w") as fh:
                fh.write(p.stdout)

        c.run("scontrol", "update", "nodename=n2", "state=drain", "reason=admin: RMA ticket 42")
        c.run("scontrol", "update", "nodename=n2", "comment=rack 4 slot 2", check=False)
        c.run("scontrol", "update", "nodename=n2", "extra=burnin=2026-11", check=False)
        c.run("scontrol", "update", "nodename=n3", "state=down", "reason=slurmqual: nic_link: mlx5_3/1: state DOWN")
        c.run("scontrol", "create", "reservation", "reservationname=sq-maint", "nodes=n3", "starttime=now",
              "duration=60", "users=root", "flags=maint,ignore_jobs")
        c.run("sbatch", "--array=0-2", "--job-name=arr", "--comment=slurmqual-submit-0123456789abcdef", "-N1",
              f"--output={base}/o-%A_%a", "--wrap", "sleep 120")
        c.run("sbatch", "--job-name=one", "-N1", f"--output={base}/o-%j", "--wrap", "sleep 120")
        time.sleep(4)
        env = {"SLURM_TIME_FORMAT": "standard"}
        os.environ.update(env)
        save("scontrol_V.txt", "scontrol", "-V")
        save("sinfo_json.json", "sinfo", "--json")
        save("squeue_json.json", "squeue", "--json", "--states=all")
        save("scontrol_show_node_oneliner.txt", "scontrol", "show", "node", "--oneliner")
        if not release.startswith("22."):
            save("scontrol_show_nodes_json.json", "scontrol", "show", "nodes", "--json")
        # slurmrestd with rest_auth/local on a unix socket (no token), as user munge.
        sock = start_rest_local(c)[len("unix://"):]
        url = "http+unix://" + urllib.parse.quote(sock, safe="")
        h = {}
        requests = requests_unixsocket.Session()
        spec = requests.get(f"{url}/openapi/v3", headers=h, timeout=30).json()
        versions = sorted({p.split("/")[2] for p in spec["paths"] if p.startswith("/slurm/v0.0.")})
        # The spec's paths and methods only (the full document is ~1 MB): what the adapter reads.
        paths = {p: {m: {} for m in item if m in ("get", "post", "delete")} for p, item in spec["paths"].items()
                 if p.startswith("/slurm/")}
        with open(os.path.join(out, "openapi_v3_slurm_paths.json"), "w") as fh:
            json.dump({"info": spec.get("info"), "paths": paths}, fh, indent=1, sort_keys=True)
        for v in versions:
            for ep in ("nodes", "jobs", "reservations"):
                r = requests.get(f"{url}/slurm/{v}/{ep}", headers=h, timeout=30)
                with open(os.path.join(out, f"slurmrestd_{v}_{ep}.json"), "w") as fh:
                    fh.write(r.text)
        print(out)
        return 0
    except BaseException:
        c.stop()
        print(f"failed; logs kept in {c.log}", file=sys.stderr)
        raise
    finally:
        if c.pids:
            c.stop()
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "22.05"))
