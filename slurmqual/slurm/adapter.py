"""The one way slurmqual talks to Slurm. Three implementations: the CLI
(scontrol/sinfo/sbatch/squeue, always the cluster's own version),
slurmrestd (for admin hosts without the CLI) and pyslurm (libslurm 25.11). Both raise SlurmError; both
decode what Slurm says with slurm/schema (NodeInfo, JobRecord). Tests use
slurmqual.testing.FakeAdapter."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod

from .schema.errors import SlurmError
from .schema.jobs import JobRecord
from .schema.nodes import NodeInfo

__all__ = ["JobRecord", "NodeInfo", "SlurmAdapter", "SlurmError", "apply_export", "compress", "expand", "jobs_of",
           "poll_for"]


class SlurmAdapter(ABC):
    """Interface; see slurm/cli.py and slurm/rest/."""

    @abstractmethod
    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        """Nodes of `hostlist` (all nodes when None)."""

    @abstractmethod
    def node_facts(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(partitions, features) of one node, for `[[groups]]` (nodefacts.py)."""

    @abstractmethod
    def drain(self, nodes: list[str], reason: str) -> None: ...

    @abstractmethod
    def resume(self, nodes: list[str]) -> None: ...

    def reboot(self, nodes: list[str], reason: str) -> None:
        """Reboot once idle (`scontrol reboot ASAP nextstate=RESUME reason=...`):
        drained meanwhile; Slurm gives the node back when it registers, after
        the health check slurmd runs at start (remediation.py)."""
        raise SlurmError(f"{type(self).__name__} cannot reboot nodes")

    @abstractmethod
    def submit(self, argv: list[str], script: str | None = None) -> str:
        """sbatch arguments (and optional script text); returns the job id."""

    @abstractmethod
    def jobs(self, job_ids: list[str]) -> dict[str, JobRecord]:
        """Job (or array task "J_T") -> its record; asking for an array's id
        returns all its tasks. A job Slurm no longer lists is absent.
        `record.active` says whether it is still going."""

    @abstractmethod
    def cancel(self, job_ids: list[str]) -> None: ...

    @abstractmethod
    def cancel_by_name(self, name: str) -> None: ...

    @abstractmethod
    def create_reservation(self, name: str, nodes: list[str], duration_min: int) -> None: ...

    @abstractmethod
    def delete_reservation(self, name: str) -> None: ...

    @abstractmethod
    def reservations(self) -> list[str]: ...

    def srun_argv(self) -> list[str]:
        """How to start a step on a node (requalify's checks); CLI only."""
        raise SlurmError("needs srun on this host")


def jobs_of(records: list[JobRecord], job_ids: list[str]) -> dict[str, JobRecord]:
    """Job (or array task "J_T") -> record, from a full job list; asking for
    an array's id returns all its tasks."""
    wanted = set(job_ids)
    return {j.key: j for j in records if {j.job_id, j.key, j.array_job_id} & wanted}


def expand(hostlist: str) -> list[str]:
    """gpu[001-003,010] -> names, with python-hostlist (no hand-written parser)."""
    import hostlist as _hl

    try:
        return _hl.expand_hostlist(hostlist)
    except _hl.BadHostlist as exc:
        raise SlurmError(f"bad hostlist {hostlist!r}: {exc}") from None


def compress(names: list[str]) -> str:
    import hostlist as _hl

    return _hl.collect_hostlist(names)


def apply_export(value: str, env: dict[str, str]) -> None:
    """Add what sbatch's `--export=VALUE` names to a job's environment `env`,
    for the adapters that submit without sbatch (REST, pyslurm). sbatch's
    forms: ALL|NONE|NIL, then NAME (its value here) or NAME=value. The REST
    token never travels into a job."""
    for item in value.split(","):
        k, eq, v = item.partition("=")
        if k in ("ALL", "NONE", "NIL") and not eq:
            continue
        if eq:
            env[k] = v
        elif k in os.environ and k != "SLURMRESTD_TOKEN":
            env[k] = os.environ[k]


def poll_for(find, seconds: float, interval: float = 0.5):
    """find() until it returns something other than None or `seconds` have
    passed (0: one look). After an ambiguous failure (a timeout: slurmctld may
    still be creating the job or reservation) the adapters look for the
    creation's mark this way before they retry or give up; a SlurmError from
    find() counts as not found yet."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = find()
        except SlurmError:
            found = None
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(interval)
