"""slurmrestd transport and token security: the JWT (token file or
$SLURMRESTD_TOKEN) goes in per-request headers and only to the configured
host: redirects are never followed, plain http:// to a host other than
loopback or through a proxy is refused unless the site config allows it, a
token file others can read is refused. Reads and idempotent changes retry
(tenacity) on connection errors and timeouts."""

from __future__ import annotations

import ipaddress
import os
import stat
import urllib.parse

from ..adapter import SlurmError

_env_token: str | None = None   # $SLURMRESTD_TOKEN (slurmqual takes it out of os.environ at start)


def env_token() -> str | None:
    """$SLURMRESTD_TOKEN, which slurmqual's __init__ took out of the environment
    at start so no child process (sbatch, checks, hooks) ever inherits it; one
    set later (an embedding program) is taken out here."""
    global _env_token
    from ... import take_startup_secret

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


class RestTransport:
    """One slurmrestd endpoint: URL, identity and the HTTP calls."""

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

    def __repr__(self) -> str:  # never show the token
        return f"{type(self).__name__}({self.base!r}, user={self.user!r}, auth={'jwt' if self._token else 'local'})"

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
