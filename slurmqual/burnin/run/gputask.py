"""The per-GPU tests of one burn-in task: each configured tool (gpu_burn,
dcgmproftester, nvbandwidth) runs on every node of the task at once, one
Slurm step per node, every GPU of the node at once; before the pair rounds.

Building a command (`gpu_argv`) is separate from running it and from judging
its output (gpuparse). A tool that is not installed, a run that fails or an
output that cannot be read gives ``ok: false`` lines (one per GPU and test):
untested, never a pass.
"""

from __future__ import annotations

import os
import time

from ...command import reap, start_logged
from ..read.gpuparse import TOOL_OF_TEST, TOOL_TESTS, GpuResult, parse_file

# tool -> binary names looked for in burnin.gpu_tools_dir, first found wins
BINARIES = {"gpu_burn": ("gpu_burn",), "dcgmproftester": ("dcgmproftester13", "dcgmproftester12", "dcgmproftester11"),
            "nvbandwidth": ("nvbandwidth",)}
NVBANDWIDTH_CASES = ("device_local_copy", "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                     "device_to_device_memcpy_write_ce")


def binary(cfg: dict, tool: str) -> str | None:
    for name in BINARIES[tool]:
        path = os.path.join(cfg["gpu_tools_dir"], name)
        if os.access(path, os.X_OK):
            return path
    return None


def gpu_argv(cfg: dict, tool: str, path: str, node: str) -> list[str]:
    """The srun step that runs `tool` on every GPU of `node`."""
    secs = str(cfg["gpu_test_s"])
    step = ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", f"--time={cfg['test_time_limit']}",
            f"--chdir={cfg['gpu_tools_dir']}"]  # gpu_burn reads compare.ptx (or .fatbin) from its working directory
    if tool == "gpu_burn":
        return [*step, path, "-tc", secs]
    if tool == "dcgmproftester":
        return [*step, path, "--no-dcgm-validation", "-t", "1004", "-d", secs]
    return [*step, path, "-t", *NVBANDWIDTH_CASES]


def lines_of(tool: str, node: str, result: GpuResult, gpus: int, task: int | None, log: str,
             err: str | None = None) -> list[dict]:
    """Measurement lines: one per GPU reading; GPUs or tests without one are ok: false."""
    problems = ([err] if err else []) + result.problems
    out, seen = [], set()
    for r in result.readings:
        ok = not problems and r.value is not None
        d = {"nodes": [node], **r.to_dict(), "ok": ok, "task": task, "tool": tool, "log": os.path.basename(log)}
        if not ok and not r.errors:
            d["value"] = None
            d["error"] = "; ".join(problems)[:300] or "no usable number"
        out.append(d)
        seen.add((r.test, r.gpu))
    for test, unit in TOOL_TESTS[tool].items():
        if test in result.waived and test not in {r.test for r in result.readings}:
            continue  # the tool waived it here (device to device on a one-GPU node): n/a, not untested
        for g in range(gpus):
            if (test, g) not in seen:
                out.append({"nodes": [node], "gpu": g, "test": test, "value": None, "unit": unit, "ok": False,
                            "task": task, "tool": tool, "log": os.path.basename(log),
                            "error": ("; ".join(problems) or f"{tool} reported nothing for GPU {g}")[:300]})
    return out


# Seconds a GPU tool needs besides its load: on an H200 (device check, 2026-11-27)
# gpu_burn -tc spent ~15 s allocating 128 GB of HBM and loading cuBLAS before it
# burned, and a few more freeing it after.
TOOL_STARTUP_S = 20


def tool_timeout(left: float, tools_left: int) -> int:
    """The time limit of the next of `tools_left` tools when `left` seconds
    remain: what is left after keeping each later tool its even share, at most
    TOOL_STARTUP_S + 10 each (nvbandwidth takes seconds; a burn tool's load is
    sized to fit its share: load_seconds)."""
    keep = min(left / tools_left, TOOL_STARTUP_S + 10.0) * (tools_left - 1)
    return max(1, round(left - keep))


def load_seconds(share: float, tools: int, configured: int) -> int:
    """Seconds of load for gpu_burn / dcgmproftester when `tools` tools share
    `share` seconds: the configured load, shortened so that each tool's load
    and its start-up fit its share (never under 5 s)."""
    return max(5, min(configured, int(share / max(1, tools) - TOOL_STARTUP_S)))


def run_gpu_tests(cfg: dict, nodes: list[str], log_dir: str, task: int | None, tag: str = "",
                  deadline: float | None = None) -> list[dict]:
    """Every configured tool, one after the other; each on all nodes at once
    (`tag` tells the logs of repeated runs apart). `deadline` (monotonic):
    every tool ends by then, each later one keeping its share
    (tool_timeout: preflight's budget)."""
    out: list[dict] = []
    timeout = cfg["gpu_test_s"] + 120
    tools = cfg["gpu_tests"]
    for i, tool in enumerate(tools):
        if deadline is not None:
            timeout = tool_timeout(deadline - time.monotonic(), len(tools) - i)
        path = binary(cfg, tool)
        if path is None:
            err = f"{tool}: not installed in {cfg['gpu_tools_dir']} (untested)"
            for n in nodes:
                out += lines_of(tool, n, GpuResult(tool), cfg["gpus_per_node"], task, "-", err)
            continue
        started = []
        for n in nodes:
            log = os.path.join(log_dir, f"gpu-{tool}-{n}{tag}.log")
            try:
                proc, fh = start_logged(gpu_argv(cfg, tool, path, n), log, header=False)
            except OSError as exc:
                started.append((n, None, None, log, f"could not start: {exc}"))
                continue
            started.append((n, proc, fh, log, None))
        tool_deadline = time.monotonic() + timeout
        for n, proc, fh, log, err in started:
            if proc is not None:
                if reap(proc, fh, tool_deadline):
                    err = f"timed out after {timeout}s"
                if err is None and proc.returncode:
                    err = f"exit code {proc.returncode}"
            try:
                result = parse_file(log, tool) if proc is not None else GpuResult(tool)
            except OSError as exc:
                result, err = GpuResult(tool), err or f"unreadable log: {exc.strerror}"
            out += lines_of(tool, n, result, cfg["gpus_per_node"], task, log, err)
    return out


# -- retest rounds ------------------------------------------------------------------

def retest_tools(nodes: dict[str, dict]) -> dict[str, list[str]]:
    """node -> the tools a retest round runs again on it: those whose tests
    left one of its GPUs `retest` (analysis nodes.NODE.gpus)."""
    out = {}
    for n, v in nodes.items():
        tools = {TOOL_OF_TEST.get(e["test"]) for tests in (v.get("gpus") or {}).values() for e in tests.values()
                 if e["verdict"] == "retest"} - {None}
        if tools:
            out[n] = sorted(tools, key=list(TOOL_TESTS).index)
    return out


def run_gpu_retests(cfg: dict, wanted: dict[str, list[str]], nodes: list[str], log_dir: str,
                    stage: int) -> list[dict]:
    """A retest round's GPU runs: each tool `wanted` for this task's nodes,
    `burnin.gpu_retest_runs` times (every GPU of the node each time); each
    line says its round (`retest`). The analysis takes each GPU's median."""
    mine = {n: tools for n, tools in wanted.items() if n in nodes}
    out: list[dict] = []
    for tool in [t for t in TOOL_TESTS if any(t in tools for tools in mine.values())]:
        these = sorted(n for n, tools in mine.items() if tool in tools)
        for i in range(cfg.get("gpu_retest_runs", 2)):
            out += [dict(d, retest=stage) for d in
                    run_gpu_tests({**cfg, "gpu_tests": [tool]}, these, log_dir, None, tag=f"-run{i + 1}")]
    return out
