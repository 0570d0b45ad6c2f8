"""slurmrestd job submission bodies per generation, from sbatch-style
arguments: v0.0.36-38 (environment a map, script beside the job), v0.0.39
(required/excluded nodes), v0.0.40+ ("exclusive" gone: shared=none)."""

from __future__ import annotations

import os

from ..adapter import SlurmError, apply_export, expand
from ..schema.numbers import time_limit_seconds


def _minutes(limit: str) -> int:
    return max(1, time_limit_seconds(limit) // 60)


def _node_range(v: str) -> list[int]:
    return [int(x) for x in (v.split("-", 1) if "-" in v else (v, v))]


_COMMON = {
    "--job-name": ("name", str),
    "--nodes": ("nodes", _node_range),
    "--time": ("time_limit", _minutes),
    "--output": ("standard_output", str),
    "--partition": ("partition", str),
    "--reservation": ("reservation", str),
    "--account": ("account", str),
    "--dependency": ("dependency", str),
    "--array": ("array", str),
    "--comment": ("comment", str),
}
# v0.0.39+: required/excluded nodes exist (CSV of names).
_NODE_LISTS = {"--nodelist": ("required_nodes", lambda v: expand(v)), "--exclude": ("excluded_nodes", lambda v: expand(v))}


def submit_body(gen: int, argv: list[str], script: str | None) -> dict:
    """slurmrestd job/submit body for generation v0.0.`gen` from sbatch-style arguments."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "SLURMQUAL_CONFIG")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    job: dict = {"current_working_directory": os.getcwd()}
    fields = dict(_COMMON, **(_NODE_LISTS if gen >= 39 else {}))
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "--export":
            apply_export(value, env)
            continue
        if key == "--exclusive":
            if gen <= 38:
                job["exclusive"] = "user"          # closest v0.0.36-38 know; "true" is refused
            elif gen == 39:
                job["exclusive"] = "true"
            else:
                job["shared"] = ["none"]           # v0.0.40+: "exclusive" is gone
            continue
        field = fields.get(key)
        if field is None:
            raise SlurmError(f"sbatch option {key} is not supported by slurmrestd v0.0.{gen}: needs sbatch on this host")
        job[field[0]] = field[1](value)
    text = f"#!/bin/sh\n{script or ''}\n"
    if gen <= 38:
        job["environment"] = env
        return {"job": job, "script": text}
    job["environment"] = [f"{k}={v}" for k, v in env.items()]
    job["script"] = text
    return {"job": job}
