"""Hostile node trees: files that block or never end, bytes that are not text,
text that carries control characters, sysfs that is not there. Trees start as
the builder's real-layout H100 node and are broken the way a sick node (or a
user with write access to a test tree) breaks them. Clean outcome: the check
says `error` with the path, within the deadline, never `fail`, never a crash."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from slurmqual.config import load
from slurmqual.evaluation import evaluate
from slurmqual.fsroot import FsError, FsRoot
from slurmqual.nodetree import build
from slurmqual.result import Status
from slurmqual.slurm import reason

CFG = "[fabric]\nnics = 8\n[node]\ngpus = 8\n"


@pytest.fixture
def node(tmp_path):
    root = build("h100-roce-healthy", str(tmp_path / "tree"))
    cfg = tmp_path / "sq.toml"
    cfg.write_text(CFG + f'[hooks]\nstate_dir = "{tmp_path}/state"\n')  # counter history, not /var
    return root, load(str(cfg), use_cache=False)


def statuses(root, config, names=None, level="standard"):
    return {r.name: r for r in evaluate(root, config, level, names, deadline=time.monotonic() + 60)}


def _rate_file(root):
    fs = FsRoot(root)
    dev = fs.listdir("/sys/class/infiniband")[0]
    return dev, fs.host_path(f"/sys/class/infiniband/{dev}/ports/1/rate")


def test_healthy_tree_passes(node):
    """The control for every case below."""
    root, config = node
    res = statuses(root, config, ["nic_link", "gpu_count", "peermem"])
    assert {n: r.status for n, r in res.items()} == {"nic_link": Status.PASS, "gpu_count": Status.PASS,
                                                      "peermem": Status.PASS}


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "socket", "huge"])
def test_file_that_blocks_or_never_ends_is_an_error_not_a_hang(node, kind):
    root, config = node
    dev, rate = _rate_file(root)
    os.unlink(rate)
    if kind == "fifo":
        os.mkfifo(rate)
    elif kind == "dev-zero":
        if os.geteuid() != 0:
            pytest.skip("mknod of a character device needs root")
        subprocess.run(["mknod", rate, "c", "1", "5"], check=True)  # a /dev/zero where the attribute was
    elif kind == "socket":
        import socket

        here = os.getcwd()
        os.chdir(os.path.dirname(rate))  # sun_path is short: bind by relative name
        try:
            s = socket.socket(socket.AF_UNIX)
            s.bind(os.path.basename(rate))
            s.close()
        finally:
            os.chdir(here)
    else:
        with open(rate, "wb") as fh:
            fh.truncate(64 << 20)  # sparse 64 MiB "attribute"
    start = time.monotonic()
    with pytest.raises(FsError) as err:
        FsRoot(root).read(f"/sys/class/infiniband/{dev}/ports/1/rate")
    assert time.monotonic() - start < 5
    assert err.value.path.endswith("/ports/1/rate")
    assert {"fifo": "a FIFO", "dev-zero": "a character device", "socket": "No such device or address",
            "huge": "larger than"}[kind] in err.value.reason
    res = statuses(root, config, ["nic_link"])["nic_link"]
    assert res.status is not Status.FAIL and time.monotonic() - start < 30


def test_non_utf8_attribute_is_an_error_naming_the_byte(node):
    root, config = node
    dev, rate = _rate_file(root)
    with open(rate, "wb") as fh:
        fh.write(b"400 Gb/sec (4X NDR)\xff\n")
    with pytest.raises(FsError, match=r"not UTF-8 text \(byte 0xff at offset 19\)"):
        FsRoot(root).read(f"/sys/class/infiniband/{dev}/ports/1/rate")


def test_control_characters_from_the_node_never_reach_a_drain_reason(node):
    """A firmware string or interface name with a newline and escapes: the drain
    reason stays one printable line, and the log record stays one record."""
    root, config = node
    dev, rate = _rate_file(root)
    with open(rate, "w") as fh:
        fh.write("100 Gb/sec (2X HDR)\nslurmqual: admin: forged\x1b[2K\u2028\n")
    res = statuses(root, config, ["nic_link"])["nic_link"]
    assert res.status is Status.FAIL  # a real slow port, judged
    r = reason.make(res.name, res.message)
    assert r.isprintable() and "\n" not in r and "\x1b" not in r and len(r) <= 80

    from slurmqual import hooklog

    line = hooklog.SafeFormatter("%(message)s").format(
        __import__("logging").LogRecord("x", 20, "f", 1, "%s", (res.message,), None))
    assert "\x1b" not in line and "\u2028" not in line and all(
        ln.startswith("  | ") for ln in line.split("\n")[1:])


@pytest.mark.parametrize("what", ["no-sys", "no-root"])
def test_missing_sysfs_or_node_root_is_error_never_fail(node, what):
    root, config = node
    if what == "no-sys":
        shutil.rmtree(f"{root}/sys")
    else:
        shutil.rmtree(root)
    res = statuses(root, config, level="fast")
    assert res and all(r.status is not Status.FAIL for r in res.values()), \
        {n: (r.status.value, r.message) for n, r in res.items()}
    assert res["nic_link"].status is Status.ERROR
    # Without sysfs gpu_count may still count from the driver's own list; without a root it cannot.
    assert res["gpu_count"].status is (Status.ERROR if what == "no-root" else Status.PASS)


def test_hook_on_a_missing_node_root_drains_nothing(tmp_path):
    """The per-node root of a test cluster is gone: the prolog errors, records
    why, and makes no Slurm call (a drain would need `fail`)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls.log"
    (bindir / "scontrol").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (bindir / "scontrol").chmod(0o755)
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[node]\nroot = "{tmp_path}/trees/{{node}}"\ngpus = 8\n[fabric]\nnics = 8\n'
                   f'[slurm]\nbin_dir = "{bindir}"\n[hooks]\nsyslog = false\nlog_file = "{tmp_path}/sq.log"\n'
                   f'state_dir = "{tmp_path}/state"\n')
    os.chmod(tmp_path, 0o755)
    env = dict(os.environ, SLURMQUAL_CONFIG=str(cfg), SLURMD_NODENAME="n1", SLURMQUAL_CACHE_DIR=str(tmp_path / "c"))
    for hook in ("prolog", "healthcheck"):
        p = subprocess.run([sys.executable, "-I", "-m", "slurmqual", "hook", hook], env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    updates = [c for c in (calls.read_text().splitlines() if calls.exists() else []) if c.startswith("update")]
    assert updates == []
    state = json.loads((tmp_path / "state/nodes/n1.json").read_text())
    assert state["status"] == "error"
    assert any("is not a directory: cannot judge" in c["message"] for c in state["checks"])
