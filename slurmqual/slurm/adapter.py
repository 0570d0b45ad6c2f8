"""The one way slurmqual talks to Slurm. Two implementations: the CLI
(scontrol/sinfo/sbatch/squeue, always the cluster's own version) and
slurmrestd (for admin hosts without the CLI). Both raise SlurmError."""

from __future__ import annotations

from dataclasses import dataclass, field


class SlurmError(Exception):
    """Slurm could not be reached or answered something we cannot read."""


@dataclass(frozen=True)
class NodeInfo:
    name: str
    state: str                                   # base state: idle, allocated, mixed, down, ...
    flags: tuple[str, ...] = field(default=())   # DRAIN, MAINTENANCE, REBOOT_REQUESTED, NOT_RESPONDING, ...
    reason: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags or self.state.startswith("drain")

    @property
    def hands_off(self) -> bool:
        """States an admin or Slurm is handling: never resume or re-reason these."""
        busy = {"MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERING_DOWN", "POWERED_DOWN",
                "POWER_DOWN", "POWERING_UP", "RESERVED_MAINT"}
        from .schema.nodes import FLAGS

        # A flag newer than slurmqual (a later Slurm) may mean anything: hands off.
        unknown = set(self.flags) - FLAGS
        return self.state in ("down", "future", "unknown") or bool(busy & set(self.flags)) or bool(unknown)


class SlurmAdapter:
    """Interface; see slurm/cli.py and slurm/rest.py."""

    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        raise NotImplementedError

    def node_facts(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(partitions, features) of one node, for `[[groups]]` (nodefacts.py)."""
        raise NotImplementedError

    def drain(self, nodes: list[str], reason: str) -> None:
        raise NotImplementedError

    def resume(self, nodes: list[str]) -> None:
        raise NotImplementedError

    def submit(self, argv: list[str], script: str | None = None) -> str:
        """sbatch arguments (and optional script text); returns the job id."""
        raise NotImplementedError

    def job_states(self, job_ids: list[str]) -> dict[str, str]:
        """job id (or array task id) -> state, e.g. RUNNING, COMPLETED, FAILED."""
        raise NotImplementedError

    def cancel(self, job_ids: list[str]) -> None:
        raise NotImplementedError

    def cancel_by_name(self, name: str) -> None:
        raise NotImplementedError

    def create_reservation(self, name: str, nodes: list[str], duration_min: int) -> None:
        raise NotImplementedError

    def srun_argv(self) -> list[str]:
        """How to start a step on a node (requalify's checks); CLI only."""
        raise SlurmError("needs srun on this host")

    def delete_reservation(self, name: str) -> None:
        raise NotImplementedError

    def reservations(self) -> list[str]:
        raise NotImplementedError


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
