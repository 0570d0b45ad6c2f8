"""Slurm adapter over slurmrestd, for admin hosts without the Slurm CLI.

Uses the newest OpenAPI version the server offers. The JWT is read from a file
or $SLURMRESTD_TOKEN, sent only in the X-SLURM-USER-TOKEN header, never logged
and never exported as SLURM_JWT (that would switch the CLI tools to JWT auth).
In Slurm 22.05 (v0.0.36-v0.0.38) nodes are read-only over REST, so drain,
resume and reservations say clearly that they need scontrol on this host.
"""

from __future__ import annotations

import os
import re

from .adapter import NodeInfo, SlurmAdapter, SlurmError, expand
from .cli import job_states_from, nodes_from

SUPPORTED = re.compile(r"/slurm/(v0\.0\.(\d+))/")
NEEDS_CLI = "needs scontrol on this host: slurmrestd {v} cannot change nodes or reservations"


class RestAdapter(SlurmAdapter):
    def __init__(self, url: str, user: str | None, token: str, timeout: float = 10.0, retries: int = 3):
        if url.startswith("unix://") or url.startswith("unix:"):
            path = url.split(":", 1)[1].lstrip("/")
            import urllib.parse

            self.base = "http+unix://" + urllib.parse.quote("/" + path, safe="")
            self.unix = True
        else:
            self.base = url.rstrip("/")
            self.unix = False
        self.user = user or os.environ.get("USER") or "root"
        self._token = token
        self.timeout = timeout
        self.retries = retries
        self._version: str | None = None
        self._session = None

    @classmethod
    def from_config(cls, slurm: dict) -> "RestAdapter":
        rest = slurm["rest"]
        token = os.environ.get("SLURMRESTD_TOKEN")
        if rest["token_file"]:
            try:
                with open(rest["token_file"], encoding="utf-8") as fh:
                    token = fh.read().strip()
            except OSError as exc:
                raise SlurmError(f"slurm.rest.token_file {rest['token_file']}: {exc.strerror}") from None
        if not token:
            raise SlurmError("slurmrestd needs a JWT: set slurm.rest.token_file or SLURMRESTD_TOKEN")
        if token.startswith("SLURM_JWT="):  # the output of `scontrol token`, pasted as is
            token = token.split("=", 1)[1]
        return cls(rest["url"], rest["user"], token, slurm["timeout_s"], slurm["retries"])

    def __repr__(self) -> str:  # never show the token
        return f"RestAdapter({self.base!r}, user={self.user!r})"

    # -- HTTP --------------------------------------------------------------------
    def _http(self):
        if self._session is None:
            import requests

            if self.unix:
                import requests_unixsocket

                self._session = requests_unixsocket.Session()
            else:
                self._session = requests.Session()
            self._session.headers.update({"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._token})
        return self._session

    def _request(self, method: str, path: str, json_body: dict | None = None) -> dict:
        import requests
        from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

        @retry(retry=retry_if_exception_type((requests.ConnectionError, requests.Timeout)),
               stop=stop_after_attempt(self.retries), wait=wait_exponential(multiplier=0.2, max=2), reraise=True)
        def attempt():
            return self._http().request(method, self.base + path, json=json_body, timeout=self.timeout)

        try:
            resp = attempt()
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise SlurmError(f"slurmrestd {self.base}: unreachable ({type(exc).__name__})") from None
        try:
            data = resp.json()
        except ValueError:
            raise SlurmError(f"slurmrestd {method} {path}: HTTP {resp.status_code}, not JSON") from None
        errors = [e for e in data.get("errors", []) if e] if isinstance(data, dict) else []
        if resp.status_code >= 400 or errors:
            detail = "; ".join(str(e.get("error") or e.get("description") or e) for e in errors)[:200]
            hint = " (check slurm.rest.user and the JWT)" if resp.status_code in (401, 403, 500) else ""
            raise SlurmError(f"slurmrestd {method} {path}: HTTP {resp.status_code} {detail}{hint}")
        return data

    @property
    def version(self) -> str:
        """Newest v0.0.N the server offers (from its OpenAPI document)."""
        if self._version is None:
            spec = self._request("GET", "/openapi/v3")
            found = {(int(m.group(2)), m.group(1)) for p in spec.get("paths", {}) for m in [SUPPORTED.match(p)] if m}
            if not found:
                raise SlurmError(f"slurmrestd {self.base}: offers no slurm v0.0.x API")
            self._version = max(found)[1]
        return self._version

    # -- reads -----------------------------------------------------------------
    def node_info(self, hostlist: str | None = None) -> list[NodeInfo]:
        nodes = nodes_from(self._request("GET", f"/slurm/{self.version}/nodes"), "slurmrestd nodes")
        if hostlist:
            wanted = set(expand(hostlist))
            nodes = [n for n in nodes if n.name in wanted]
        return nodes

    def job_states(self, job_ids: list[str]) -> dict[str, str]:
        data = self._request("GET", f"/slurm/{self.version}/jobs")
        return job_states_from(data.get("jobs", []), job_ids)

    def reservations(self) -> list[str]:
        data = self._request("GET", f"/slurm/{self.version}/reservations")
        return [r["name"] for r in data.get("reservations", [])]

    # -- jobs ------------------------------------------------------------------
    def submit(self, argv: list[str], script: str | None = None) -> str:
        job = {"environment": {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "SLURMQUAL_CONFIG")},
               "current_working_directory": os.getcwd()}
        job["environment"].setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        for arg in argv:
            key, _, value = arg.partition("=")
            if key == "--export":
                for item in value.split(",")[1:]:
                    k, _, v = item.partition("=")
                    job["environment"][k] = v
                continue
            field = _SUBMIT_FIELDS.get(key)
            if field is None:
                raise SlurmError(f"sbatch option {key} is not supported by slurmrestd {self.version}: "
                                 "needs sbatch on this host")
            job[field[0]] = field[1](value)
        body = {"job": job, "script": f"#!/bin/sh\n{script or ''}\n"}
        data = self._request("POST", f"/slurm/{self.version}/job/submit", body)
        job_id = data.get("job_id")
        if job_id is None:
            raise SlurmError("slurmrestd job submit: no job_id in answer")
        return str(job_id)

    def cancel(self, job_ids: list[str]) -> None:
        for j in job_ids:
            self._request("DELETE", f"/slurm/{self.version}/job/{j}")

    def cancel_by_name(self, name: str) -> None:
        data = self._request("GET", f"/slurm/{self.version}/jobs")
        self.cancel([str(j["job_id"]) for j in data.get("jobs", []) if j.get("name") == name
                     and j.get("job_state") in ("PENDING", "RUNNING")])

    # -- changes 22.05's REST API cannot make ------------------------------------
    def drain(self, nodes: list[str], reason: str) -> None:
        raise SlurmError(NEEDS_CLI.format(v=self.version))

    def resume(self, nodes: list[str]) -> None:
        raise SlurmError(NEEDS_CLI.format(v=self.version))

    def create_reservation(self, name: str, nodes: list[str], duration_min: int) -> None:
        raise SlurmError(NEEDS_CLI.format(v=self.version))

    def delete_reservation(self, name: str) -> None:
        raise SlurmError(NEEDS_CLI.format(v=self.version))


def _minutes(limit: str) -> int:
    from ..burnin.task import seconds

    return max(1, seconds(limit) // 60)


_SUBMIT_FIELDS = {
    "--job-name": ("name", str),
    "--nodes": ("nodes", lambda v: [int(x) for x in (v.split("-", 1) if "-" in v else (v, v))]),
    "--time": ("time_limit", _minutes),
    "--output": ("standard_output", str),
    "--partition": ("partition", str),
    "--reservation": ("reservation", str),
    "--account": ("account", str),
    "--dependency": ("dependency", str),
    "--array": ("array", str),
    "--exclusive": ("exclusive", lambda _v: "user"),  # closest v0.0.38 knows; "true" is refused
    # v0.0.36-v0.0.38 have no required/excluded nodes: --nodelist/--exclude need sbatch.
}
