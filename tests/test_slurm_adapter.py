"""The CLI adapter on bad Slurm answers: malformed output, unreachable controller."""

from __future__ import annotations

import os
import time

import pytest

from slurmqual.slurm.adapter import NodeInfo, SlurmError, compress, expand
from slurmqual.slurm.cli import CliAdapter, parse_scontrol_node, parse_sinfo_json


def _bin(tmp_path, tool: str, body: str) -> str:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / tool).write_text("#!/bin/sh\n" + body + "\n")
    (d / tool).chmod(0o755)
    return str(d)


def test_parse_sinfo_json_drain_flags():
    nodes = parse_sinfo_json('{"nodes": [{"name": "n1", "state": "idle", "state_flags": ["DRAIN"], '
                             '"reason": "slurmqual: peermem: x"}, {"name": "n2", "state": "allocated"}]}')
    assert nodes[0] == NodeInfo("n1", "idle", ("DRAIN",), "slurmqual: peermem: x") and nodes[0].drained
    assert not nodes[1].drained and nodes[1].reason == ""


def test_parse_scontrol_oneliner():
    line = ("NodeName=gpu01 Arch=x86_64 CoresPerSocket=1 State=IDLE+DRAIN ThreadsPerCore=1 "
            "Reason=slurmqual: nic_link: mlx5_3/1: state DOWN [root@2026-11-22T15:19:03]")
    (n,) = parse_scontrol_node(line)
    assert n == NodeInfo("gpu01", "idle", ("DRAIN",), "slurmqual: nic_link: mlx5_3/1: state DOWN")
    (m,) = parse_scontrol_node("NodeName=g2 State=DOWN*+MAINTENANCE Weight=1")
    assert m.state == "down" and m.hands_off


@pytest.mark.parametrize("body", ["echo '{not json'", "echo '{\"nodes\": 5}'", "echo '{\"nodes\": [{\"nom\": 1}]}'"])
def test_malformed_sinfo_is_a_clear_error(tmp_path, body):
    a = CliAdapter(_bin(tmp_path, "sinfo", body), timeout=5, retries=1)
    with pytest.raises(SlurmError, match="sinfo --json: unreadable output"):
        a.node_info()


def test_malformed_scontrol_is_a_clear_error(tmp_path):
    a = CliAdapter(_bin(tmp_path, "scontrol", "echo 'garbage here'"), timeout=5, retries=1)
    with pytest.raises(SlurmError, match="scontrol show node: unreadable output"):
        a.node_info("n1")


def test_unreachable_controller_retries_boundedly(tmp_path):
    bindir = _bin(tmp_path, "scontrol", f"echo x >> {tmp_path}/count; "
                  "echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2; exit 1")
    a = CliAdapter(bindir, timeout=5, retries=3)
    start = time.monotonic()
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        a.node_info("n1")
    assert time.monotonic() - start < 10
    assert open(tmp_path / "count").read().count("x") == 3


def test_hung_scontrol_times_out(tmp_path):
    a = CliAdapter(_bin(tmp_path, "scontrol", "sleep 60"), timeout=0.5, retries=2)
    start = time.monotonic()
    with pytest.raises(SlurmError, match="timed out"):
        a.drain(["n1"], "slurmqual: x: y")
    assert time.monotonic() - start < 5


def test_real_scontrol_without_controller_is_bounded(tmp_path):
    if not os.path.exists("/usr/bin/scontrol"):
        pytest.skip("slurm-client not installed")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n"
                    "NodeName=n1 NodeAddr=127.0.0.1\nPartitionName=p Nodes=n1\n")
    a = CliAdapter(None, timeout=8, retries=2, slurm_conf=str(conf))
    start = time.monotonic()
    with pytest.raises(SlurmError):
        a.node_info("n1")
    assert time.monotonic() - start < 30


def test_hostlists_via_library():
    assert expand("gpu[001-003,010]") == ["gpu001", "gpu002", "gpu003", "gpu010"]
    assert compress(["gpu001", "gpu002", "gpu003", "gpu010"]) == "gpu[001-003,010]"
    with pytest.raises(SlurmError, match="bad hostlist"):
        expand("gpu[001-")
