"""Load the site config fast.

Validating with pydantic costs ~100 ms of imports, too much before every job.
So the validated effective config is cached as JSON keyed on a digest of the
file's bytes and slurmqual's version; the prolog reads the cache and never
imports pydantic unless the file changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib

from . import __version__

DEFAULT_PATH = "/etc/slurmqual/config.toml"


class ConfigError(Exception):
    """The site config is missing, unparsable or invalid. The message is for humans."""


class Config:
    """The effective, validated site config: nested plain dicts."""

    def __init__(self, data: dict, path: str | None = None, digest: str = ""):
        self.data = data
        self.path = path
        self.digest = digest

    def section(self, name: str) -> dict:
        return self.data[name]

    def __getitem__(self, name: str) -> dict:
        return self.data[name]

    def checks_for(self, hook: str) -> list[str]:
        """Checks a hook (prolog/epilog/healthcheck) runs, minus the disabled ones."""
        checks = self.data["checks"]
        return [c for c in checks[hook] if c not in checks["disabled"]]

    def node_root(self, node: str | None) -> str:
        root = self.data["node"]["root"]
        return root.replace("{node}", node or "") if "{node}" in root else root


def _cache_dir() -> str:
    env = os.environ.get("SLURMQUAL_CACHE_DIR")
    if env:
        return env
    if os.geteuid() == 0:
        return "/var/cache/slurmqual"
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "slurmqual")


def _trusted(path: str) -> bool:
    """As root, only trust a cache file that root owns and only root can write."""
    if os.geteuid() != 0:
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == 0 and not st.st_mode & 0o022


def _read_cache(path: str) -> dict | None:
    if not _trusted(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write_cache(path: str, data: dict) -> None:
    """Best effort, atomic; a cache we cannot write only costs speed."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def parse_toml(raw: bytes, source: str) -> dict:
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def load(path: str | None = None, *, use_cache: bool = True) -> Config:
    """Load and validate a site config. `path=None` uses $SLURMQUAL_CONFIG, then
    /etc/slurmqual/config.toml if it exists, else the built-in defaults."""
    explicit = path is not None or "SLURMQUAL_CONFIG" in os.environ
    path = path or os.environ.get("SLURMQUAL_CONFIG") or DEFAULT_PATH
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{path}: config file not found") from None
        raw, path = b"", None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from None

    digest = hashlib.sha256(__version__.encode() + b"\0" + raw).hexdigest()
    cache_file = os.path.join(_cache_dir(), f"config-{digest[:32]}.json")
    if use_cache:
        cached = _read_cache(cache_file)
        if cached is not None:
            return Config(cached, path, digest)

    from .config_schema import validate

    data = validate(parse_toml(raw, path or "<defaults>"), path or "<defaults>")
    if use_cache:
        _write_cache(cache_file, data)
    return Config(data, path, digest)
