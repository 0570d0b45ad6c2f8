"""RestAdapter: the SlurmAdapter operations over slurmrestd. A job
submission is never blindly repeated: it carries a unique comment mark that
is looked for before any second try."""

from __future__ import annotations

import time
import urllib.parse

from ..adapter import JobRecord, NodeInfo, SlurmAdapter, SlurmError, compress, expand, jobs_of
from ..cli import job_with_mark, submit_mark
from ..schema import FormatError, decode_jobs, decode_nodes, groups_from_doc
from .capabilities import RestCapabilities
from .jobs import submit_body
from .transport import env_token, read_token_file


class RestAdapter(RestCapabilities, SlurmAdapter):
    @classmethod
    def from_config(cls, slurm: dict) -> "RestAdapter":
        rest = slurm["rest"]
        url = rest["url"] or ""
        auth = rest.get("auth", "auto")
        if auth == "auto":
            auth = "local" if url.startswith("unix:") and not rest["token_file"] else "jwt"
        token = None
        if auth == "jwt":
            token = read_token_file(rest["token_file"]) if rest["token_file"] else env_token()
            if not token:
                raise SlurmError("slurmrestd needs a JWT: set slurm.rest.token_file or SLURMRESTD_TOKEN "
                                 "(or use a unix socket with rest_auth/local: slurm.rest.auth = \"local\")")
            if token.startswith("SLURM_JWT="):  # the output of `scontrol token`, pasted as is
                token = token.split("=", 1)[1]
        return cls(url, rest["user"], token, slurm["timeout_s"], slurm["retries"],
                   allow_insecure_http=bool(rest.get("allow_insecure_http", False)))

    # -- reads -----------------------------------------------------------------
    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        source = f"slurmrestd {self.version} nodes"
        nodes = decode_nodes(self._request("GET", f"/slurm/{self.version}/nodes"), source)
        if hostlist:
            wanted = set(expand(hostlist))
            nodes = [n for n in nodes if n.name in wanted]
        return nodes

    def node_facts(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return groups_from_doc(self._request("GET", f"/slurm/{self.version}/nodes"), name,
                               f"slurmrestd {self.version} nodes")

    def _jobs(self):
        return decode_jobs(self._request("GET", f"/slurm/{self.version}/jobs"), f"slurmrestd {self.version} jobs")

    def jobs(self, job_ids: list[str]) -> dict[str, JobRecord]:
        return jobs_of(self._jobs(), job_ids)

    def reservations(self) -> list[str]:
        data = self._request("GET", f"/slurm/{self.version}/reservations")
        try:
            return [r["name"] for r in data.get("reservations", [])]
        except (TypeError, KeyError):
            raise FormatError(f"slurmrestd {self.version} reservations: unexpected shape") from None

    # -- jobs ------------------------------------------------------------------
    def submit(self, argv: list[str], script: str | None = None) -> str:
        """POST job/submit, never blindly repeated: the job carries a unique
        comment mark, looked for before a second try."""
        mark, args = submit_mark(argv)
        body = submit_body(self.generation, args, script)
        path = f"/slurm/{self.version}/job/submit"
        last: SlurmError | None = None
        for attempt in range(self.retries):
            if attempt:
                found = self._find_job(mark, patient="timed out" in str(last))
                if found:
                    return found
            try:
                data = self._request("POST", path, body, retry=False)
            except SlurmError as exc:
                if "unreachable" not in str(exc) and "timed out" not in str(exc):
                    raise
                last = exc
                continue
            job_id = data.get("job_id")
            if job_id is None and isinstance(data.get("result"), dict):
                job_id = data["result"].get("job_id")
            if job_id is None:
                raise SlurmError("slurmrestd job submit: no job_id in answer")
            return str(job_id)
        found = self._find_job(mark, patient="timed out" in str(last))
        if found:
            return found
        raise SlurmError(f"slurmrestd job submit: {last}; no job with its mark found, so not submitted")

    def _find_job(self, mark: str, patient: bool) -> str | None:
        deadline = time.monotonic() + (min(self.timeout, 10.0) if patient else 0)
        while True:
            try:
                found = job_with_mark(self._jobs(), mark)
            except SlurmError:
                found = None
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(0.5)

    def cancel(self, job_ids: list[str]) -> None:
        for j in job_ids:
            self._request("DELETE", f"/slurm/{self.version}/job/{j}")

    def cancel_by_name(self, name: str) -> None:
        data = self._request("GET", f"/slurm/{self.version}/jobs")
        jobs = decode_jobs(data, f"slurmrestd {self.version} jobs")
        self.cancel(sorted({j.array_job_id or j.job_id for j in jobs
                            if j.name == name and j.active}))

    # -- nodes and reservations, where the server can ----------------------------
    def _update_nodes(self, nodes: list[str], body: dict, what: str) -> None:
        if not self.can("POST", "/node/{node_name}"):
            raise self._needs_cli(what)
        for node in nodes:   # setting a state twice is harmless: retried like a read
            self._request("POST", f"/slurm/{self.version}/node/{urllib.parse.quote(node, safe='')}", body)

    def drain(self, nodes: list[str], reason: str) -> None:
        self._update_nodes(nodes, {"state": ["DRAIN"], "reason": reason}, "change nodes (drain)")

    def resume(self, nodes: list[str]) -> None:
        self._update_nodes(nodes, {"state": ["RESUME"]}, "change nodes (resume)")

    def reboot(self, nodes: list[str], reason: str) -> None:
        """slurmrestd has no reboot operation in any version we support (its
        node update takes no REBOOT state)."""
        raise self._needs_cli("reboot nodes")

    def create_reservation(self, name: str, nodes: list[str], duration_min: int) -> None:
        """POST reservation (25.05+); the name is the mark looked for before a second try."""
        if not self.can("POST", "/reservation"):
            raise self._needs_cli("create reservations")
        body = {"name": name, "node_list": compress(nodes), "start_time": {"set": True, "number": int(time.time())},
                "duration": {"set": True, "number": duration_min}, "users": ["root"],
                "flags": ["MAINT", "IGNORE_JOBS"]}
        last: SlurmError | None = None
        for attempt in range(self.retries):
            if attempt and self._has_reservation(name, patient="timed out" in str(last)):
                return
            try:
                self._request("POST", f"/slurm/{self.version}/reservation", body, retry=False)
                return
            except SlurmError as exc:
                if "unreachable" not in str(exc) and "timed out" not in str(exc):
                    raise
                last = exc
        if self._has_reservation(name, patient="timed out" in str(last)):
            return
        raise SlurmError(f"slurmrestd create reservation {name}: {last}; not found afterwards, so not created")

    def _has_reservation(self, name: str, patient: bool) -> bool:
        deadline = time.monotonic() + (min(self.timeout, 10.0) if patient else 0)
        while True:
            try:
                if name in self.reservations():
                    return True
            except SlurmError:
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)

    def delete_reservation(self, name: str) -> None:
        if not self.can("DELETE", "/reservation/{reservation_name}"):
            raise self._needs_cli("delete reservations")
        self._request("DELETE", f"/slurm/{self.version}/reservation/{urllib.parse.quote(name, safe='')}")
