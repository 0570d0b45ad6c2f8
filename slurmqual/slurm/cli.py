"""Slurm adapter over its own CLI (always the cluster's own version).

Reads pick their format by the installed Slurm (`scontrol -V`, cached): one
node via `scontrol show node --oneliner` (every version), all nodes via
`sinfo --json` on 22.05 and `scontrol show nodes --json` from 23.02 (23.02+
`sinfo --json` groups nodes by state and loses per-node reasons), jobs via
`squeue --json` (its own `meta` names the format). Decoding lives in
slurm/schema.

Every call runs without a shell, under a timeout. Reads retry (tenacity)
while slurmctld is briefly unreachable. Creations (sbatch, scontrol create
reservation) never blindly repeat: each carries a unique mark (a job comment,
the reservation's name), and after an ambiguous failure we look for it
before trying again, so a slow slurmctld cannot make two.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid

from ..command import CommandError, run
from .adapter import JobRecord, NodeInfo, SlurmAdapter, SlurmError, compress, expand, jobs_of, poll_for
from .schema import (FormatError, SlurmVersion, decode_jobs, decode_nodes, groups_from_oneliner, parse_node_oneliner,
                     parse_version)

# Errors that mean slurmctld was not reached or did not answer in time.
_TRANSIENT = ("Unable to contact slurm controller", "Socket timed out", "Connection refused",
              "Zero Bytes were transmitted", "timed out after", "Slurm backup controller in standby")
# Of those, the ones after which a creation may or may not have happened.
_AMBIGUOUS = ("Socket timed out", "Zero Bytes were transmitted", "timed out after")
SUBMIT_MARK = "slurmqual-submit-"
# What `scontrol -V` needs to print its version when the cluster's slurm.conf is absent.
_VERSION_CONF = "ClusterName=slurmqual-version\nSlurmctldHost=localhost\n"


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, CommandError) and any(t in str(exc) for t in _TRANSIENT)


class CliAdapter(SlurmAdapter):
    def __init__(self, bin_dir: str | None = None, timeout: float = 10.0, retries: int = 3, env: dict | None = None,
                 slurm_conf: str | None = None):
        self.bin_dir = bin_dir
        self.slurm_conf = slurm_conf
        self.timeout = timeout
        self.retries = retries
        self.env = env
        self.calls: list[list[str]] = []   # for tests and audits
        self._version: SlurmVersion | None = None

    def _bin(self, name: str) -> str:
        if self.bin_dir:
            return os.path.join(self.bin_dir, name)
        return shutil.which(name) or f"/usr/bin/{name}"

    def _env(self) -> dict:
        env = self.env
        if env is None:
            # SLURM_JWT would switch the CLI to JWT auth; an empty SLURM_CONF breaks it;
            # SLURMRESTD_TOKEN is the REST adapter's secret and no business of the CLI.
            env = {k: v for k, v in os.environ.items()
                   if k not in ("SLURM_JWT", "SLURMRESTD_TOKEN") and not (k == "SLURM_CONF" and not v)}
        env = dict(env, SLURM_TIME_FORMAT="standard")   # one shape for reason stamps
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    def _once(self, name: str, *args: str) -> str:
        argv = [self._bin(name), *args]
        self.calls.append(argv)
        return run(argv, self.timeout, env=self._env()).stdout

    def _run(self, name: str, *args: str) -> str:
        """A call that is safe to repeat: retried boundedly on transient errors."""
        from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

        @retry(retry=retry_if_exception(_transient), stop=stop_after_attempt(self.retries),
               wait=wait_exponential(multiplier=0.2, max=2), reraise=True)
        def attempt() -> str:
            return self._once(name, *args)

        try:
            return attempt()
        except CommandError as exc:
            raise SlurmError(str(exc)) from None

    def _create(self, what: str, name: str, args: tuple[str, ...], find):
        """Run a creating command at most once per proof that it did not
        happen: after a transient failure, `find()` (a read, retried) looks
        for the mark; found -> that is the result; an ambiguous failure
        (timeout: slurmctld may still be working on it) looks again for a
        while before one more try. Never more than `retries` tries."""
        last: CommandError | None = None
        for attempt in range(self.retries):
            if attempt:
                found = self._find_for(find, ambiguous=any(t in str(last) for t in _AMBIGUOUS))
                if found is not None:
                    return found
                time.sleep(min(2.0, 0.2 * 2 ** attempt))
            try:
                return self._once(name, *args)
            except CommandError as exc:
                if not _transient(exc):
                    raise SlurmError(str(exc)) from None
                last = exc
        found = self._find_for(find, ambiguous=any(t in str(last) for t in _AMBIGUOUS))
        if found is not None:
            return found
        raise SlurmError(f"{what}: {last}; not found afterwards, so not created") from None

    def _find_for(self, find, ambiguous: bool):
        return poll_for(find, min(self.timeout, 10.0) if ambiguous else 0)

    # -- reads -------------------------------------------------------------
    @property
    def version(self) -> SlurmVersion:
        """The installed Slurm (scontrol -V; no controller needed), once per adapter."""
        if self._version is None:
            self._version = parse_version(self._version_text())
        return self._version

    def _version_text(self) -> str:
        """`scontrol -V`'s output. Every release (22.05 to 26.05) reads a
        slurm.conf before it prints its version: with none (a head node
        without one, configless without DNS SRV) it exits "Could not
        establish a configuration source"; with SLURM_CONF naming a missing
        file it retries for 60 s. Then a minimal slurm.conf of its own
        answers: the version is the installed binary's, not the cluster's."""
        conf = self._env().get("SLURM_CONF")
        if not conf or os.path.isfile(conf):
            try:
                return self._run("scontrol", "-V")
            except SlurmError as exc:
                if "configuration" not in str(exc):
                    raise
        import tempfile

        with tempfile.TemporaryDirectory(prefix="slurmqual-version-") as tmp:
            path = os.path.join(tmp, "slurm.conf")
            with open(path, "w") as fh:
                fh.write(_VERSION_CONF)
            argv = [self._bin("scontrol"), "-V"]
            self.calls.append(argv)
            try:
                return run(argv, self.timeout, env=dict(self._env(), SLURM_CONF=path)).stdout
            except CommandError as exc:
                raise SlurmError(f"{exc} (with no slurm.conf of the cluster: {conf or 'none found'})") from None

    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        names = expand(hostlist) if hostlist else []
        if len(names) == 1:
            # One node (the hooks' case): a small RPC, a format every version shares.
            return parse_node_oneliner(self._run("scontrol", "show", "node", names[0], "--oneliner"))
        version = self.version
        if version.cli_generation() <= 38:   # 22.05: no scontrol --json
            source, text = "sinfo --json", self._run("sinfo", "--json")
        else:
            source, text = "scontrol show nodes --json", self._run("scontrol", "show", "nodes", "--json")
        nodes = decode_nodes(_json(text, source), source, version)
        if hostlist:
            wanted = set(names)
            nodes = [n for n in nodes if n.name in wanted]
        return nodes

    def node_facts(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return groups_from_oneliner(self._run("scontrol", "show", "node", name, "--oneliner"), name)

    def srun_argv(self) -> list[str]:
        return [self._bin("srun")]

    def _jobs(self):
        text = self._run("squeue", "--json", "--states=all")
        return decode_jobs(_json(text, "squeue --json"), "squeue --json", self._version)

    def jobs(self, job_ids: list[str]) -> dict[str, JobRecord]:
        return jobs_of(self._jobs(), job_ids)

    def reservations(self) -> list[str]:
        text = self._run("scontrol", "show", "reservation", "--oneliner")
        return [tok.split("=", 1)[1] for line in text.splitlines() for tok in line.split()[:1]
                if tok.startswith("ReservationName=")]

    # -- changes -----------------------------------------------------------
    def drain(self, nodes: list[str], reason: str) -> None:
        self._run("scontrol", "update", f"nodename={compress(nodes)}", "state=drain", f"reason={reason}")

    def resume(self, nodes: list[str]) -> None:
        self._run("scontrol", "update", f"nodename={compress(nodes)}", "state=resume")

    def reboot(self, nodes: list[str], reason: str) -> None:
        # A repeat is harmless (the node is already REBOOT_REQUESTED): safe to retry.
        self._run("scontrol", "reboot", "ASAP", "nextstate=RESUME", f"reason={reason}", compress(nodes))

    def submit(self, argv: list[str], script: str | None = None) -> str:
        """sbatch once; a unique --comment mark finds the job if sbatch's
        answer is lost, so a retry never submits a second job."""
        mark, args = submit_mark(argv)
        args = ["--parsable", *args]
        if script is not None:
            args += ["--wrap", script]

        def find() -> str | None:
            return job_with_mark(self._jobs(), mark)

        out = self._create("sbatch", "sbatch", tuple(args), find).strip()
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
        """Created once: the name is the mark looked for before any retry."""
        def find() -> str | None:
            return "" if name in self.reservations() else None

        self._create("scontrol create reservation", "scontrol",
                     ("create", "reservation", f"reservationname={name}", f"nodes={compress(nodes)}",
                      "starttime=now", f"duration={duration_min}", "users=root", "flags=maint,ignore_jobs"), find)

    def delete_reservation(self, name: str) -> None:
        self._run("scontrol", "delete", f"reservationname={name}")


def _json(text: str, source: str):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise FormatError(f"{source}: unreadable output ({exc})") from None


def submit_mark(argv: list[str]) -> tuple[str, list[str]]:
    """A unique mark in the job's --comment (kept after the caller's own comment)."""
    mark = SUBMIT_MARK + uuid.uuid4().hex[:16]
    out, comment = [], None
    for arg in argv:
        if arg.startswith("--comment="):
            comment = arg.split("=", 1)[1]
        else:
            out.append(arg)
    out.append(f"--comment={comment} {mark}" if comment else f"--comment={mark}")
    return mark, out


def job_with_mark(jobs, mark: str) -> str | None:
    """The job id (the array's id for an array) whose comment carries `mark`."""
    for j in jobs:
        if mark in j.comment.split():
            return j.array_job_id or j.job_id
    return None


# -- kept for callers and tests that read raw outputs ----------------------------
def parse_scontrol_node(text: str) -> list[NodeInfo]:
    """`scontrol show node NAME --oneliner` (any version)."""
    return parse_node_oneliner(text)


def parse_sinfo_json(text: str, version: SlurmVersion | None = None) -> list[NodeInfo]:
    """Nodes from 22.05's `sinfo --json`."""
    return decode_nodes(_json(text, "sinfo --json"), "sinfo --json", version)
