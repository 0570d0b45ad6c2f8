"""Slurm adapter over slurmrestd, for admin hosts without the Slurm CLI.

What the server can do is read from its own OpenAPI document, per
generation: the newest v0.0.N it offers that slurmqual knows; node updates
(drain/resume) where it has POST /node/{node_name} (v0.0.39+, 23.02+);
reservations where it has POST /reservation (25.05+); job submission with
required/excluded node lists from v0.0.39. Only what the server truly lacks
answers "needs scontrol on this host".

Auth: a JWT (token file or $SLURMRESTD_TOKEN) in per-request headers, or
none over a unix socket served with rest_auth/local. The token is sent only
to the configured host: redirects are never followed, plain http:// to a
host other than loopback or through a proxy is refused unless the site
config allows it, a token file others can read is refused, and
$SLURMRESTD_TOKEN is taken out of the environment as the process starts
(slurmqual/__init__.py) so no child process inherits it.

Reads and idempotent changes retry (tenacity); a job submission is never
blindly repeated: it carries a unique comment mark that is looked for
before any second try.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import time
import urllib.parse

from .adapter import JobRecord, NodeInfo, SlurmAdapter, SlurmError, compress, expand, jobs_of
from .cli import job_with_mark, submit_mark
from .schema import FormatError, decode_jobs, decode_nodes, groups_from_doc
from .schema.numbers import time_limit_seconds
from .schema.version import KNOWN_GENERATIONS

_PATH = re.compile(r"^/slurm/v0\.0\.(\d+)(/.*?)/?$")
NEEDS_CLI = "needs scontrol on this host: slurmrestd {v} cannot {what}"

_env_token: str | None = None   # $SLURMRESTD_TOKEN (slurmqual takes it out of os.environ at start)


def env_token() -> str | None:
    """$SLURMRESTD_TOKEN, which slurmqual's __init__ took out of the environment
    at start so no child process (sbatch, checks, hooks) ever inherits it; one
    set later (an embedding program) is taken out here."""
    global _env_token
    from .. import take_startup_secret

    value = os.environ.pop("SLURMRESTD_TOKEN", None) or take_startup_secret("SLURMRESTD_TOKEN")
    if value:
        _env_token = value
    return _env_token


def read_token_file(path: str) -> str:
    """A token file must be the user's own secret: not readable or writable by others."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SlurmError(f"slurm.rest.token_file {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SlurmError(f"slurm.rest.token_file {path}: not a regular file")
        if st.st_mode & 0o077 & ~0o040:
            raise SlurmError(f"slurm.rest.token_file {path}: readable or writable by others "
                             f"(mode {stat.S_IMODE(st.st_mode):o}); refusing it: chmod 600 {path}")
        with os.fdopen(fd, encoding="utf-8") as fh:
            fd = -1
            return fh.read().strip()
    finally:
        if fd >= 0:
            os.close(fd)


def _loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class RestAdapter(SlurmAdapter):
    def __init__(self, url: str, user: str | None, token: str | None, timeout: float = 10.0, retries: int = 3,
                 allow_insecure_http: bool = False):
        if url.startswith("unix://") or url.startswith("unix:"):
            path = url.split(":", 1)[1].lstrip("/")
            self.base = "http+unix://" + urllib.parse.quote("/" + path, safe="")
            self.unix = True
        else:
            self.base = url.rstrip("/")
            self.unix = False
            parts = urllib.parse.urlsplit(self.base)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise SlurmError(f"slurm.rest.url {url!r}: expected http(s)://host:port or unix:///path")
        self.user = user or os.environ.get("USER") or "root"
        self._token = token or None
        self.timeout = timeout
        self.retries = retries
        self.allow_insecure_http = allow_insecure_http
        self._spec: dict | None = None
        self._version: str | None = None
        self._session = None

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

    def __repr__(self) -> str:  # never show the token
        return f"RestAdapter({self.base!r}, user={self.user!r}, auth={'jwt' if self._token else 'local'})"

    # -- HTTP --------------------------------------------------------------------
    def _http(self):
        if self._session is None:
            if self.unix:
                import requests_unixsocket

                self._session = requests_unixsocket.Session()
            else:
                import requests

                self._session = requests.Session()
            self._check_transport()
        return self._session

    def _check_transport(self) -> None:
        """The JWT goes only where it is safe: https, or http to loopback with no proxy in between."""
        if not self._token or self.unix or self.allow_insecure_http:
            return
        parts = urllib.parse.urlsplit(self.base)
        if parts.scheme != "http":
            return
        why = None
        if not _loopback(parts.hostname or ""):
            why = f"plain http:// to {parts.hostname}"
        else:
            import requests.utils

            if requests.utils.get_environ_proxies(self.base).get("http"):
                why = "plain http:// through a proxy (http_proxy)"
        if why:
            raise SlurmError(f"slurmrestd {self.base}: refusing to send the JWT over {why}; use https, or set "
                             "slurm.rest.allow_insecure_http = true if this network is trusted")

    def _headers(self) -> dict:
        if not self._token:   # rest_auth/local: the socket's peer credentials are the identity
            return {}
        return {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._token}

    def _send(self, method: str, path: str, json_body: dict | None):
        import requests

        try:
            resp = self._http().request(method, self.base + path, json=json_body, timeout=self.timeout,
                                        headers=self._headers(), allow_redirects=False)
        except (requests.ConnectionError, requests.Timeout):
            raise
        except requests.RequestException as exc:
            raise SlurmError(f"slurmrestd {method} {path}: {type(exc).__name__}") from None
        if 300 <= resp.status_code < 400:
            where = urllib.parse.urlsplit(resp.headers.get("Location", "")).netloc or "elsewhere"
            raise SlurmError(f"slurmrestd {method} {path}: HTTP {resp.status_code} redirect to {where}; not followed "
                             "(the token is only ever sent to slurm.rest.url)")
        return resp

    def _request(self, method: str, path: str, json_body: dict | None = None, *, retry: bool = True) -> dict:
        """One call; retried on connection errors and timeouts when `retry`
        (reads and idempotent changes only)."""
        import requests
        from tenacity import retry as tretry, retry_if_exception_type, stop_after_attempt, wait_exponential

        @tretry(retry=retry_if_exception_type((requests.ConnectionError, requests.Timeout)),
                stop=stop_after_attempt(self.retries if retry else 1),
                wait=wait_exponential(multiplier=0.2, max=2), reraise=True)
        def attempt():
            return self._send(method, path, json_body)

        try:
            resp = attempt()
        except (requests.ConnectionError, requests.Timeout) as exc:
            kind = "timed out" if isinstance(exc, requests.Timeout) else "unreachable"
            raise SlurmError(f"slurmrestd {self._where()}: {kind} ({type(exc).__name__})") from None
        try:
            data = resp.json()
        except ValueError:
            hint = " (check slurm.rest.auth, slurm.rest.user and the JWT)" if resp.status_code in (401, 403, 511) else ""
            raise SlurmError(f"slurmrestd {method} {path}: HTTP {resp.status_code}, not JSON{hint}") from None
        errors = [e for e in data.get("errors", []) if e] if isinstance(data, dict) else []
        if resp.status_code >= 400 or errors:
            detail = "; ".join(str(e.get("error") or e.get("description") or e) if isinstance(e, dict) else str(e)
                               for e in errors)[:200]
            hint = " (check slurm.rest.user and the JWT)" if resp.status_code in (401, 403, 500, 511) else ""
            raise SlurmError(f"slurmrestd {method} {path}: HTTP {resp.status_code} {detail}{hint}")
        return data

    def _where(self) -> str:
        return urllib.parse.unquote(self.base.replace("http+unix://", "unix://")) if self.unix else self.base

    # -- what the server offers ------------------------------------------------------
    @property
    def spec(self) -> dict:
        if self._spec is None:
            spec = self._request("GET", "/openapi/v3")
            if not isinstance(spec, dict) or not isinstance(spec.get("paths"), dict):
                raise FormatError(f"slurmrestd {self._where()}: /openapi/v3 has no paths")
            self._spec = spec
        return self._spec

    def _ops(self) -> dict[int, set[tuple[str, str]]]:
        """generation -> {(method, path below /slurm/v0.0.N)} from the server's OpenAPI document."""
        ops: dict[int, set[tuple[str, str]]] = {}
        for path, item in self.spec["paths"].items():
            m = _PATH.match(path)
            if m and isinstance(item, dict):
                ops.setdefault(int(m.group(1)), set()).update(
                    (meth.upper(), m.group(2)) for meth in item if meth in ("get", "post", "delete"))
        return ops

    @property
    def generation(self) -> int:
        ops = self._ops()
        readable = [g for g, o in ops.items() if ("GET", "/nodes") in o and ("GET", "/jobs") in o]
        if not readable:
            raise SlurmError(f"slurmrestd {self._where()}: offers no slurm v0.0.x API with nodes and jobs")
        known = [g for g in readable if g in KNOWN_GENERATIONS]
        return max(known) if known else max(readable)   # an unknown one is decoded strictly

    @property
    def version(self) -> str:
        """The v0.0.N used (newest the server offers that slurmqual knows)."""
        if self._version is None:
            self._version = f"v0.0.{self.generation}"
        return self._version

    def can(self, method: str, path: str) -> bool:
        return (method, path) in self._ops().get(self.generation, set())

    def _needs_cli(self, what: str) -> SlurmError:
        return SlurmError(NEEDS_CLI.format(v=self.version, what=what))

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


# -- job submission bodies per generation ---------------------------------------------
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
        if key == "--export":  # sbatch's forms: ALL|NONE, then NAME (current value) or NAME=value
            for item in value.split(","):
                k, eq, v = item.partition("=")
                if k in ("ALL", "NONE", "NIL") and not eq:
                    continue
                if eq:
                    env[k] = v
                elif k in os.environ and k != "SLURMRESTD_TOKEN":
                    env[k] = os.environ[k]
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
