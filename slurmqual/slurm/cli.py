"""Slurm adapter over its own CLI: sinfo/squeue --json where they exist
(22.05 has no `scontrol --json`), scontrol for changes. Every call runs
without a shell, under a timeout, with bounded retries while slurmctld is
briefly unreachable."""

from __future__ import annotations

import json
import os
import re
import shutil

from ..command import CommandError, run
from .adapter import NodeInfo, SlurmAdapter, SlurmError, expand

_TRANSIENT = ("Unable to contact slurm controller", "Socket timed out", "Connection refused",
              "Zero Bytes were transmitted", "timed out after", "Slurm backup controller in standby")


class CliAdapter(SlurmAdapter):
    def __init__(self, bin_dir: str | None = None, timeout: float = 10.0, retries: int = 3, env: dict | None = None,
                 slurm_conf: str | None = None):
        self.bin_dir = bin_dir
        self.slurm_conf = slurm_conf
        self.timeout = timeout
        self.retries = retries
        self.env = env
        self.calls: list[list[str]] = []   # for tests and audits

    def _bin(self, name: str) -> str:
        if self.bin_dir:
            return os.path.join(self.bin_dir, name)
        return shutil.which(name) or f"/usr/bin/{name}"

    def _run(self, name: str, *args: str) -> str:
        from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

        argv = [self._bin(name), *args]
        env = self.env
        if env is None:
            # SLURM_JWT would switch the CLI to JWT auth; an empty SLURM_CONF breaks it.
            env = {k: v for k, v in os.environ.items() if k != "SLURM_JWT" and not (k == "SLURM_CONF" and not v)}
        if self.slurm_conf:
            env = dict(env, SLURM_CONF=self.slurm_conf)

        def transient(exc: BaseException) -> bool:
            return isinstance(exc, CommandError) and any(t in str(exc) for t in _TRANSIENT)

        @retry(retry=retry_if_exception(transient), stop=stop_after_attempt(self.retries),
               wait=wait_exponential(multiplier=0.2, max=2), reraise=True)
        def attempt() -> str:
            self.calls.append(argv)
            return run(argv, self.timeout, env=env).stdout

        try:
            return attempt()
        except CommandError as exc:
            raise SlurmError(str(exc)) from None

    # -- reads -------------------------------------------------------------
    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        names = expand(hostlist) if hostlist else []
        if len(names) == 1:
            # One node (the hooks' case): a small RPC instead of the whole cluster's sinfo.
            text = self._run("scontrol", "show", "node", names[0], "--oneliner")
            return parse_scontrol_node(text)
        text = self._run("sinfo", "--json")
        nodes = parse_sinfo_json(text)
        if hostlist:
            wanted = set(expand(hostlist))
            nodes = [n for n in nodes if n.name in wanted]
        return nodes

    def srun_argv(self) -> list[str]:
        return [self._bin("srun")]

    def job_states(self, job_ids: list[str]) -> dict[str, str]:
        text = self._run("squeue", "--json", "--states=all")
        try:
            jobs = json.loads(text)["jobs"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SlurmError(f"squeue --json: unreadable output ({exc})") from None
        return job_states_from(jobs, job_ids)

    def reservations(self) -> list[str]:
        text = self._run("scontrol", "show", "reservation", "--oneliner")
        return [tok.split("=", 1)[1] for line in text.splitlines() for tok in line.split()[:1]
                if tok.startswith("ReservationName=")]

    # -- changes -----------------------------------------------------------
    def drain(self, nodes: list[str], reason: str) -> None:
        from .adapter import compress

        self._run("scontrol", "update", f"nodename={compress(nodes)}", "state=drain", f"reason={reason}")

    def resume(self, nodes: list[str]) -> None:
        from .adapter import compress

        self._run("scontrol", "update", f"nodename={compress(nodes)}", "state=resume")

    def submit(self, argv: list[str], script: str | None = None) -> str:
        args = ["--parsable", *argv]
        if script is not None:
            args += ["--wrap", script]
        out = self._run("sbatch", *args).strip()
        job_id = out.split(";", 1)[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch: unexpected output {out[:80]!r}")
        return job_id

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self._run("scancel", *job_ids)

    def cancel_by_name(self, name: str) -> None:
        self._run("scancel", f"--name={name}")

    def create_reservation(self, name: str, nodes: list[str], duration_min: int) -> None:
        from .adapter import compress

        self._run("scontrol", "create", "reservation", f"reservationname={name}", f"nodes={compress(nodes)}",
                  "starttime=now", f"duration={duration_min}", "users=root", "flags=maint,ignore_jobs")

    def delete_reservation(self, name: str) -> None:
        self._run("scontrol", "delete", f"reservationname={name}")


_REASON_TAIL = re.compile(r"\s+\[[^\[\]@]+@[0-9T:-]+\]$")


def parse_scontrol_node(text: str) -> list[NodeInfo]:
    """`scontrol show node NAME --oneliner`: State=IDLE+DRAIN ... Reason=text [user@time]."""
    out = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        name = line.split(None, 1)[0].split("=", 1)[1]
        m = re.search(r"(?:^|\s)State=(\S+)", line)
        if not m:
            raise SlurmError(f"scontrol show node: no State= for {name}")
        words = m.group(1).split("+")
        reason = ""
        if " Reason=" in line:
            reason = _REASON_TAIL.sub("", line.split(" Reason=", 1)[1].rstrip())
        out.append(NodeInfo(name, words[0].lower().rstrip("*~#!%$@^-"), tuple(w.upper() for w in words[1:]), reason))
    if not out and text.strip():
        raise SlurmError(f"scontrol show node: unreadable output {text[:80]!r}")
    return out


def job_states_from(jobs: list, job_ids: list[str]) -> dict[str, str]:
    """Job (or array task "J_T") -> state from squeue --json / slurmrestd jobs."""
    wanted = set(job_ids)
    out = {}
    for j in jobs:
        jid, arr, task = str(j.get("job_id")), j.get("array_job_id"), j.get("array_task_id")
        is_task = bool(arr) and isinstance(task, int) and task < 4294967294
        key = f"{arr}_{task}" if is_task else jid
        if {jid, key, str(arr)} & wanted:
            state = j.get("job_state", "UNKNOWN")
            out[key] = str(state[0] if isinstance(state, list) and state else state)
    return out


def parse_sinfo_json(text: str) -> list[NodeInfo]:
    """Nodes from `sinfo --json` (22.05+: a drained idle node is state idle + flag DRAIN)."""
    try:
        return nodes_from(json.loads(text), "sinfo --json")
    except ValueError as exc:
        raise SlurmError(f"sinfo --json: unreadable output ({exc})") from None


def nodes_from(data, source: str) -> list[NodeInfo]:
    """NodeInfo list from a `{"nodes": [...]}` document (sinfo --json or slurmrestd)."""
    try:
        raw = data["nodes"]
        if not isinstance(raw, list):
            raise TypeError("'nodes' is not a list")
        nodes = {}
        for n in raw:
            state = n["state"]
            if isinstance(state, list):  # newer Slurm: state is a list of words
                base, flags = state[0].lower(), tuple(s.upper() for s in state[1:])
            else:
                base, flags = str(state).lower(), tuple(str(f).upper() for f in n.get("state_flags", []))
            nodes[n["name"]] = NodeInfo(n["name"], base, flags, n.get("reason") or "")
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise SlurmError(f"{source}: unreadable output ({type(exc).__name__}: {exc})") from None
    return list(nodes.values())
