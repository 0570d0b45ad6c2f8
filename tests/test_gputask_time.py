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


def test_on_several_nodes_the_gpu_tools_get_their_startup_up_to_half_the_time(monkeypatch):
    """An even share of a 90 s preflight's five batches (16 s) cannot start
    gpu_burn on an H200: the GPU batch takes TOOL_STARTUP_S + 10 s per tool,
    up to half the time left; the pair rounds share the rest."""
    from slurmqual.burnin.run import gputask, task
    from slurmqual.preflight import flow

    seen = {}
    clock = [1000.0]   # each batch uses all of its time, as a real one may

    class Clock:
        @staticmethod
        def monotonic():
            return clock[0]

    def gpu(cfg, nodes, log_dir, task_id, deadline=None):
        seen["gpu"] = (deadline - clock[0], cfg["gpu_test_s"])
        clock[0] = deadline
        return []

    def batch(*args, deadline=None, **kw):
        seen.setdefault("rounds", []).append(deadline - clock[0])
        clock[0] = deadline
        return []

    monkeypatch.setattr(flow, "time", Clock)
    monkeypatch.setattr(gputask, "run_gpu_tests", gpu)
    monkeypatch.setattr(task, "run_batch", batch)
    monkeypatch.setattr(task, "run_rail_batch", batch)
    cfg = {"gpu_tests": ["gpu_burn", "nvbandwidth"], "tests": ["all_reduce_perf"], "rails": True, "gpu_test_s": 10}
    plan = [[("n1", "n2")], [("n1", "n3")]]
    flow.run_network(cfg, ["n1", "n2", "n3"], plan, "/nonexistent", clock[0] + 140)
    share, load = seen["gpu"]
    assert flow.gpu_batch_need(cfg) == 2 * (TOOL_STARTUP_S + 10)
    assert share == 60 and load == 10                  # not 140 / 5 = 28 s, which fits no start-up
    assert seen["rounds"] == [20, 20, 20, 20]          # (140 - 60) / 4
    seen.clear()
    flow.run_network(cfg, ["n1", "n2", "n3"], plan, "/nonexistent", clock[0] + 81)
    assert seen["gpu"][0] == 40.5                      # at most half: the pairs keep the rest
