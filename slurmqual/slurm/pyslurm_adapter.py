"""Slurm adapter over pyslurm (libslurm's own RPCs, no fork per call), for
sites whose Python tools already use pyslurm.

pyslurm 25.11 has calls for node reads and updates, jobs, batch submission,
cancel and reservations. It has none for a node reboot: `reboot` runs
`scontrol reboot` through the CLI adapter (the one call that needs the
Slurm commands on this host). srun_argv is the CLI's too.

Loading goes through slurm/libslurm.py (a child-process probe first, so a
missing libslurm, a libslurm of another release than slurmctld, or a
missing slurm.conf is a SlurmError that names the versions and the fix).

`slurm.timeout_s` bounds each call, as it bounds the CLI's commands. pyslurm
calls libslurm with the GIL held (no `with nogil` in pyslurm 25.11), and
libslurm retries a read interrupted by a signal, so nothing in this process
can stop a call slurmctld never answers (a stopped or wedged slurmctld:
libslurm waits MessageTimeout per try, and tries again): no thread, no
SIGALRM. Each call therefore runs in a forked child (no exec: libslurm is
already loaded and initialised there, so a call costs a fork, not a process
start and a slurm.conf parse), which sends its result back through a pipe
and is killed at the timeout. Reads retry (tenacity) while slurmctld is
briefly unreachable or slow; creations (a job, a reservation) carry a mark
(a --comment, the reservation's name) looked for before any second try.
"""

from __future__ import annotations

import os
import time

from .adapter import JobRecord, NodeInfo, SlurmAdapter, SlurmError, apply_export, compress, expand, jobs_of, poll_for
from .cli import _AMBIGUOUS, _TRANSIENT, job_with_mark, submit_mark
from .schema.jobs import JOB_BASE_STATES, JOB_FLAGS, array_tasks
from .schema.nodes import node_state


class _RpcFailed(Exception):
    """A pyslurm RPCError, carried out of the retry loop with its message."""


class PyslurmAdapter(SlurmAdapter):
    def __init__(self, slurm_conf: str | None = None, retries: int = 3, cli=None, timeout: float = 10.0):
        self.slurm_conf = slurm_conf
        self.retries = retries
        self.timeout = timeout   # slurm.timeout_s: each call's bound (see the module docstring)
        self._cli = cli          # CliAdapter for the calls pyslurm lacks (reboot, srun)

    @classmethod
    def from_config(cls, slurm: dict) -> "PyslurmAdapter":
        from .cli import CliAdapter

        cli = CliAdapter(slurm["bin_dir"], slurm["timeout_s"], slurm["retries"], slurm_conf=slurm["slurm_conf"])
        return cls(slurm["slurm_conf"], slurm["retries"], cli, slurm["timeout_s"])

    @property
    def pyslurm(self):
        """The pyslurm module, loaded (and checked against slurmctld) on first
        use; libslurm re-initialised if another adapter moved it to another slurm.conf."""
        from .libslurm import load

        version = (lambda: str(self._cli.version)) if self._cli is not None else None
        return load(self.slurm_conf, version)

    # -- calls ---------------------------------------------------------------------
    def _call(self, what: str, fn, *, retry: bool = True):
        """fn() with pyslurm's RPCError turned into SlurmError; transient
        errors (slurmctld unreachable) retried when `retry`."""
        from tenacity import retry as tretry, retry_if_exception, stop_after_attempt, wait_exponential

        mod = self.pyslurm

        def attempt():
            return _bounded(what, lambda: fn(mod), mod.RPCError, self.timeout)

        wrapped = tretry(retry=retry_if_exception(lambda e: isinstance(e, _RpcFailed) and _transient(str(e))),
                         stop=stop_after_attempt(self.retries if retry else 1),
                         wait=wait_exponential(multiplier=0.2, max=2), reraise=True)(attempt)
        try:
            return wrapped()
        except _RpcFailed as exc:
            raise SlurmError(f"pyslurm {exc}") from None

    # -- reads ---------------------------------------------------------------------
    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        names = expand(hostlist) if hostlist else []
        if len(names) == 1:
            return self._call(f"load node {names[0]}", lambda m: [_node(m.Node.load(names[0]))])
        nodes = self._call("load nodes", lambda m: [_node(n) for n in m.Nodes.load().values()])
        if hostlist:
            wanted = set(names)
            nodes = [n for n in nodes if n.name in wanted]
        return sorted(nodes, key=lambda n: _natural(n.name))

    def node_facts(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return self._call(f"load node {name}", lambda m: _facts(m.Node.load(name)))

    def _job_list(self) -> list[JobRecord]:
        return self._call("load jobs", lambda m: [rec for job in m.Jobs.load().values() for rec in _job(job)])

    def jobs(self, job_ids: list[str]) -> dict[str, JobRecord]:
        return jobs_of(self._job_list(), job_ids)

    def reservations(self) -> list[str]:
        return sorted(self._call("load reservations", lambda m: [str(k) for k in m.Reservations.load().keys()]))

    # -- changes -------------------------------------------------------------------
    def _update_nodes(self, nodes: list[str], **changes) -> None:
        hostlist = compress(nodes)
        self._call(f"update nodes {hostlist}",
                   lambda m: m.Node(hostlist).modify(m.Node(**changes)) and None)

    def drain(self, nodes: list[str], reason: str) -> None:
        self._update_nodes(nodes, state="DRAIN", reason=reason)

    def resume(self, nodes: list[str]) -> None:
        self._update_nodes(nodes, state="RESUME")

    def reboot(self, nodes: list[str], reason: str) -> None:
        """pyslurm 25.11 has no reboot call: `scontrol reboot` (CLI adapter)."""
        if self._cli is None:
            raise SlurmError("pyslurm 25.11 cannot reboot nodes: needs scontrol on this host")
        self._cli.reboot(nodes, reason)

    def srun_argv(self) -> list[str]:
        if self._cli is None:
            raise SlurmError("needs srun on this host")
        return self._cli.srun_argv()

    def submit(self, argv: list[str], script: str | None = None) -> str:
        """One batch submission; a unique --comment mark finds the job if the
        answer is lost, so a retry never submits a second job."""
        mark, args = submit_mark(argv)
        fields = submit_fields(args, script)

        def once(m):
            return str(m.JobSubmitDescription(**fields).submit())

        last = None
        for attempt in range(self.retries):
            if attempt:
                found = self._find(lambda: job_with_mark(self._job_list(), mark), last)
                if found is not None:
                    return found
                time.sleep(min(2.0, 0.2 * 2 ** attempt))
            try:
                return str(self._call("submit", once, retry=False))
            except SlurmError as exc:
                if not _transient(str(exc)):
                    raise
                last = exc
        found = self._find(lambda: job_with_mark(self._job_list(), mark), last)
        if found is not None:
            return found
        raise SlurmError(f"{last}; not found afterwards, so not submitted")

    def _find(self, find, last: SlurmError | None):
        """Look for a creation's mark; after an ambiguous failure (a timeout:
        slurmctld may still be at it), for a while."""
        ambiguous = last is not None and any(t in str(last) for t in _AMBIGUOUS)
        return poll_for(find, 10.0 if ambiguous else 0)

    def cancel(self, job_ids: list[str]) -> None:
        if not job_ids:
            return
        ids = set()
        tasks = [j for j in job_ids if "_" in j]
        if tasks:   # "A_T": the task's own job id
            ids |= {rec.job_id for key, rec in self.jobs(tasks).items() if key in tasks}
        ids |= {j for j in job_ids if j.isdigit()}
        for job_id in sorted(ids, key=int):
            self._call(f"cancel job {job_id}", lambda m, j=int(job_id): m.Job(j).cancel() and None)

    def cancel_by_name(self, name: str) -> None:
        """Like `scancel --name`: every still-going job of that name."""
        ids = {rec.job_id for rec in self._job_list() if rec.name == name and rec.active}
        for job_id in sorted(ids, key=int):
            self._call(f"cancel job {job_id}", lambda m, j=int(job_id): m.Job(j).cancel() and None)

    def create_reservation(self, name: str, nodes: list[str], duration_min: int) -> None:
        """Created once: the name is the mark looked for before any retry."""
        from datetime import datetime

        def once(m):
            flags = m.ReservationFlags.MAINTENANCE | m.ReservationFlags.IGNORE_RUNNING_JOBS
            m.Reservation(name=name, nodes=compress(nodes), start_time=datetime.now(), duration=duration_min,
                          users=["root"], flags=flags).create()

        last = None
        for attempt in range(self.retries):
            if attempt and self._find(lambda: True if name in self.reservations() else None, last):
                return
            try:
                self._call(f"create reservation {name}", once, retry=False)
                return
            except SlurmError as exc:
                if not _transient(str(exc)):
                    raise
                last = exc
        if self._find(lambda: True if name in self.reservations() else None, last):
            return
        raise SlurmError(f"{last}; not found afterwards, so not created")

    def delete_reservation(self, name: str) -> None:
        self._call(f"delete reservation {name}", lambda m: m.Reservation(name).delete() and None)


def _bounded(what: str, call, rpc_error, timeout: float):
    """call() in a forked child, its result (plain data: NodeInfo, JobRecord,
    ids) pickled back; the child killed after `timeout` s. A pyslurm
    RPCError, or the timeout, is _RpcFailed (its text says "timed out after",
    as the CLI's does: transient, and ambiguous for a creation)."""
    import pickle
    import select
    import signal

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: never returns into the caller's code
        code = 0
        try:
            os.close(read_fd)
            try:
                out = ("ok", call())
            except rpc_error as exc:
                out = ("rpc", str(exc))
            except SlurmError as exc:
                out = ("slurm", str(exc))
            except BaseException as exc:  # noqa: BLE001 - said to the parent, not raised here
                out = ("error", f"{type(exc).__name__}: {exc}")
            data = pickle.dumps(out)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks, end, done = [], time.monotonic() + timeout, False
    try:
        while not done:
            left = end - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                break
            chunk = os.read(read_fd, 1 << 20)
            chunks.append(chunk)
            done = not chunk
    finally:
        os.close(read_fd)
        if not done:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.waitpid(pid, 0)
    if not done:
        raise _RpcFailed(f"{what}: timed out after {timeout:g}s (slurm.timeout_s): slurmctld did not answer")
    try:
        kind, value = pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - the child died before it said anything
        raise _RpcFailed(f"{what}: the call's process ended without an answer") from None
    if kind == "ok":
        return value
    if kind == "rpc":
        raise _RpcFailed(f"{what}: {value}")
    raise SlurmError(f"pyslurm {what}: {value}")


def _transient(text: str) -> bool:
    return any(t in text for t in _TRANSIENT)


def _natural(name: str) -> tuple:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _facts(node) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(node.partitions or ()), tuple(node.available_features or ())


def _node(node) -> NodeInfo:
    """pyslurm.Node -> NodeInfo: its state is Slurm's complete state string
    ("IDLE+DRAIN"), checked against the same state tables as every format."""
    words = [w for w in str(node.state or "").split("+") if w]
    try:
        base, flags = node_state(words, f"node {node.name}")
    except ValueError as exc:
        raise SlurmError(f"pyslurm: {exc}") from None
    return NodeInfo(str(node.name), base, flags, str(node.reason or ""))


def _job(job) -> list[JobRecord]:
    """pyslurm.Job -> records: an array task is "A_T"; an array's record of
    tasks not yet split ("2-5,7") is one record per task, as squeue -r shows."""
    state = str(job.state or "").upper()
    if state not in JOB_BASE_STATES and state not in JOB_FLAGS:
        raise SlurmError(f"pyslurm: job {job.id}: state {state!r} is not a Slurm job state")
    arr, task = job.array_id, job.array_task_id
    comment = str(job.comment or "")
    if arr and task is None and not job.array_tasks_waiting:
        task = 0   # pyslurm reads task id 0 as "unset" (u32_parse: zero is no value)
    if arr and task is None and job.array_tasks_waiting:
        try:
            tasks = array_tasks(str(job.array_tasks_waiting))
        except ValueError as exc:
            raise SlurmError(f"pyslurm: job {job.id}: {exc}") from None
    else:
        tasks = [task] if arr and task is not None else [None]
    return [JobRecord(str(job.id), f"{arr}_{t}" if t is not None else str(job.id), str(arr) if arr else None,
                      str(job.name or ""), state, (), comment) for t in tasks]


# sbatch option -> (JobSubmitDescription attribute, conversion).
_FIELDS = {
    "--job-name": ("name", str),
    "--nodes": ("nodes", str),       # "N" or "MIN-MAX"
    "--time": ("time_limit", str),   # a Slurm time string, as sbatch takes it
    "--output": ("standard_output", str),
    "--partition": ("partitions", lambda v: v.split(",")),
    "--reservation": ("reservations", lambda v: v.split(",")),
    "--account": ("account", str),
    "--dependency": ("dependencies", str),
    "--array": ("array", str),
    "--comment": ("comment", str),
    "--nodelist": ("required_nodes", expand),
    "--exclude": ("excluded_nodes", expand),
}


def submit_fields(argv: list[str], script: str | None) -> dict:
    """JobSubmitDescription attributes from sbatch-style arguments. The
    environment is the named one of --export (as sbatch sends it), never
    this process's whole environment."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "SLURMQUAL_CONFIG")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    fields: dict = {"working_directory": os.getcwd()}
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "--export":
            apply_export(value, env)
            continue
        if key == "--exclusive":
            fields["resource_sharing"] = "no"
            continue
        field = _FIELDS.get(key)
        if field is None:
            raise SlurmError(f"sbatch option {key} is not supported by the pyslurm adapter: needs sbatch on this host")
        fields[field[0]] = field[1](value)
    fields["environment"] = env
    fields["script"] = f"#!/bin/sh\n{script or ''}\n"
    return fields
