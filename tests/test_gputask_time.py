"""The GPU tools' time within a deadline (preflight --gpu-tools): what the
device check on a real H200 found (2026-11-27): gpu_burn -tc needs ~15 s to
start besides its load, and the tool after it was given 1 s (the tool loop
overwrote the caller's deadline with the first tool's own)."""

from __future__ import annotations

import json
import os
import shutil
import time

from slurmqual.burnin.run.gputask import TOOL_STARTUP_S, load_seconds, run_gpu_tests, tool_timeout

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_first_tool_leaves_each_later_tool_its_share_up_to_startup_plus_ten():
    assert tool_timeout(81, 2) == 81 - (TOOL_STARTUP_S + 10)     # the device check's one-node preflight
    assert tool_timeout(16, 2) == 8                               # an even share when that is less
    assert tool_timeout(30, 1) == 30 and tool_timeout(0.2, 1) == 1


def test_the_load_is_the_configured_one_shortened_to_fit_the_share_with_startup():
    assert load_seconds(81, 2, 10) == 10                          # the configured 10 s fits
    assert load_seconds(81, 2, 60) == int(81 / 2 - TOOL_STARTUP_S)
    assert load_seconds(30, 2, 60) == 5                           # never under 5 s


def _tool(dir_, name: str, delay: float) -> None:
    """A stand-in tool that takes `delay` seconds, then prints the real tool's format."""
    os.makedirs(os.path.join(dir_, "real"), exist_ok=True)
    fake = os.path.join(dir_, "real", name)          # the stand-in plays the tool it is named after
    shutil.copy(os.path.join(REPO, "tests", "fakebin", "gpu_tool"), fake)
    os.chmod(fake, 0o755)
    with open(os.path.join(dir_, name), "w") as fh:
        fh.write(f"#!/bin/sh\nsleep {delay}\nexec {fake} \"$@\"\n")
    os.chmod(os.path.join(dir_, name), 0o755)


def test_the_tool_after_a_slow_first_tool_gets_the_time_left_not_one_second(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "fabric.json").write_text(json.dumps({"gpu": {"count": 1, "model": "NVIDIA H200"}}))
    monkeypatch.setenv("SLURMQUAL_FABRIC_MODEL", str(tools / "fabric.json"))
    _tool(str(tools), "gpu_burn", 4)
    _tool(str(tools), "nvbandwidth", 8)
    monkeypatch.setenv("PATH", os.path.join(REPO, "bench", "device", "bin") + os.pathsep + os.environ["PATH"])
    cfg = {"gpu_tests": ["gpu_burn", "nvbandwidth"], "gpu_tools_dir": str(tools), "gpu_test_s": 5,
           "test_time_limit": "00:01:00", "gpus_per_node": 1}
    start = time.monotonic()
    lines = run_gpu_tests(cfg, ["vm"], str(tmp_path), None, deadline=start + 20)
    by_tool = {}
    for d in lines:
        by_tool.setdefault(d["tool"], []).append(d)
    # gpu_burn had 20 - 10 = 10 s and took ~4; nvbandwidth (8 s) then had the ~16 s left, not what
    # was left of gpu_burn's own 10 s (the H200 run gave it 1 s)
    assert all(d["ok"] for d in by_tool["gpu_burn"]), by_tool["gpu_burn"]
    assert by_tool["nvbandwidth"] and all(d["ok"] for d in by_tool["nvbandwidth"]), by_tool["nvbandwidth"]
    assert time.monotonic() - start < 20
