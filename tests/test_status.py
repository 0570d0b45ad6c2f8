"""`slurmqual status` at the table level and end to end with a stand-in sinfo
that prints a real `sinfo --json` document shape (states as Slurm 22.05 reports them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from slurmqual import nodestate, policy
from slurmqual.commands.status import gather, render, rows, summary
from slurmqual.result import CheckResult, Status
from slurmqual.slurm.cli import parse_scontrol_node

LINES = [
    "NodeName=gpu001 State=IDLE Weight=1",
    "NodeName=gpu002 State=UNKNOWN+NOT_RESPONDING Weight=1",
    "NodeName=gpu003 State=IDLE+DRAIN Weight=1 Reason=slurmqual: peermem: nvidia_peermem not loaded [root@2026-11-22T10:00:00]",
    "NodeName=gpu-with-a-long-name-0004 State=DOWN+DRAIN+NOT_RESPONDING Weight=1 Reason=admin: RMA [root@2026-11-22T10:00:00]",
]
NOW = 1_800_000_000.0


def table():
    nodes = [parse_scontrol_node(line)[0] for line in LINES]
    burnin = {n.name: {"time": NOW - 3600, "verdict": "pass", "score": 380.0, "median": 380.0, "baseline": 380.0}
              for n in nodes}
    return rows(gather(nodes, {}, set(), burnin), NOW, 30 * 86400)


def test_down_and_not_responding_nodes_are_not_qualified():
    q = {r["node"]: r["qualification"] for r in table()}
    assert q == {"gpu001": "qualified", "gpu002": "down", "gpu003": "failed", "gpu-with-a-long-name-0004": "down"}


def test_table_columns_line_up_with_long_states_and_names():
    t = table()
    lines = render(t, summary(t)).splitlines()
    header, body = lines[0], lines[1:-1]
    col = header.index("QUAL")
    assert all(line[col:].split()[0] in ("qualified", "down", "failed") for line in body), lines
    assert "unknown+not_responding" in lines[2] and lines[-1].endswith("total=4")


def test_summary_only_prints_counts_and_the_guard(tmp_path):
    t = table()
    g = policy.HookGuard(str(tmp_path), 600, 0.1, 2)
    for i in range(3):
        g.request_drain(f"n{i}", "slurmqual: versions: driver 1 != 2", now=NOW + i)
    out = render(t, summary(t), g.status(now=NOW + 5), summary_only=True).splitlines()
    assert out[0] == "qualified=1 failed=1 pending=0 stale=0 unknown=0 down=2 total=4"
    assert out[1].startswith("CRITICAL: hook-drain guard tripped") and "held: n2" in out[1]


def test_cli_filters_by_slurm_state_and_reports_a_total(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    doc = {"meta": {"plugin": {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"},
                    "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}},
           "nodes": [{"name": n.name, "state": n.state, "state_flags": list(n.flags), "reason": n.reason}
                     for n in (parse_scontrol_node(line)[0] for line in LINES)]}
    (tmp_path / "sinfo.json").write_text(json.dumps(doc))
    (bindir / "sinfo").write_text(f"#!/bin/sh\ncat {tmp_path}/sinfo.json\n")
    (bindir / "scontrol").write_text('#!/bin/sh\n[ "$1" = -V ] && echo "slurm 22.05.8"\n')
    for tool in ("sinfo", "scontrol"):
        (bindir / tool).chmod(0o755)
    nodestate.record_run(str(tmp_path / "state"), "gpu003", "healthcheck",
                         [CheckResult("peermem", Status.FAIL, "not loaded")], {})
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[slurm]\nbin_dir = "{bindir}"\n[hooks]\nstate_dir = "{tmp_path}/state"\n'
                   f'[store]\npath = "{tmp_path}/none.db"\n')
    os.chmod(tmp_path, 0o755)

    def status(*args):
        p = subprocess.run([sys.executable, "-m", "slurmqual", "status", "--config", str(cfg), *args],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    got = json.loads(status("--json", "--slurm-state", "not_responding"))
    assert sorted(r["node"] for r in got["nodes"]) == ["gpu-with-a-long-name-0004", "gpu002"] and got["total"] == 2
    drained = json.loads(status("--json", "--slurm-state", "drain"))
    assert [r["failing_checks"] for r in drained["nodes"] if r["node"] == "gpu003"] == [["peermem"]]
    summ = json.loads(status("--json", "--summary"))
    assert "nodes" not in summ and summ["total"] == 4 and summ["summary"]["down"] == 2
    assert status("--summary").strip().splitlines()[0].endswith("total=4")
