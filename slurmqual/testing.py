"""Test support: the one in-memory SlurmAdapter the tests use where a real
cluster is not the point (tests/slurmcluster.py runs real daemons for the rest).

It holds nodes and jobs in memory and records every change, so a test can
assert what slurmqual asked Slurm to do. A test that needs a failure
subclasses it and overrides the one call that fails."""

from __future__ import annotations

from dataclasses import dataclass, field

from .slurm.adapter import JobRecord, NodeInfo, SlurmAdapter, SlurmError, jobs_of


@dataclass
class FakeAdapter(SlurmAdapter):
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    facts: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    job_list: list[JobRecord] = field(default_factory=list)
    drains: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    resumes: list[tuple[str, ...]] = field(default_factory=list)
    reboots: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    submitted: list[tuple[list[str], str | None]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    cancelled_names: list[str] = field(default_factory=list)
    reservation_names: list[str] = field(default_factory=list)

    @classmethod
    def with_nodes(cls, nodes: list[NodeInfo]) -> "FakeAdapter":
        return cls(nodes={n.name: n for n in nodes})

    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        from .slurm.adapter import expand

        if not hostlist:
            return list(self.nodes.values())
        return [self.nodes[n] for n in expand(hostlist) if n in self.nodes]

    def node_facts(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if name not in self.facts:
            raise SlurmError(f"node {name} not in the node list")
        return self.facts[name]

    def drain(self, nodes: list[str], reason: str) -> None:
        self.drains.append((tuple(nodes), reason))

    def resume(self, nodes: list[str]) -> None:
        self.resumes.append(tuple(nodes))

    def reboot(self, nodes: list[str], reason: str) -> None:
        self.reboots.append((tuple(nodes), reason))

    def submit(self, argv: list[str], script: str | None = None) -> str:
        self.submitted.append((list(argv), script))
        return str(100 + len(self.submitted))

    def jobs(self, job_ids: list[str]) -> dict[str, JobRecord]:
        return jobs_of(self.job_list, job_ids)

    def cancel(self, job_ids: list[str]) -> None:
        self.cancelled += list(job_ids)

    def cancel_by_name(self, name: str) -> None:
        self.cancelled_names.append(name)

    def create_reservation(self, name: str, nodes: list[str], duration_min: int) -> None:
        self.reservation_names.append(name)

    def delete_reservation(self, name: str) -> None:
        if name not in self.reservation_names:
            raise SlurmError(f"reservation {name} not found")
        self.reservation_names.remove(name)

    def reservations(self) -> list[str]:
        return list(self.reservation_names)
