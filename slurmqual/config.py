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

from . import __version__

DEFAULT_PATH = "/etc/slurmqual/config.toml"


MAX_CONFIG_BYTES = 1 << 20
MAX_CACHE_BYTES = 4 << 20
SECTIONS = ("node", "fabric", "checks", "hooks", "slurm", "burnin", "store")


class ConfigError(Exception):
    """The site config is missing, unparsable or invalid. The message is for humans."""


class ConfigRefused(ConfigError):
    """As root: the config (or a directory on its way) is writable by someone
    other than root. Nothing in it is read, so nothing in it is used."""


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


def _cache_dir_usable(directory: str) -> bool:
    """As root the cache is only used in a directory only root can write: in
    any other, a user could plant the validated config root then trusts."""
    from .security import root_only_ok

    return root_only_ok(directory, "config cache dir") is None


def _read_cache(path: str, digest: str) -> dict | None:
    """The cached effective config, or None on anything unexpected (missing,
    symlink, not root's, truncated, wrong shape, other digest): the caller
    then validates the file again, so a poisoned cache only costs time."""
    from .fsroot import load_json_text, read_regular

    try:
        raw = read_regular(path, MAX_CACHE_BYTES, nofollow=True)
        if os.geteuid() == 0:
            st = os.stat(path, follow_symlinks=False)
            if st.st_uid != 0 or st.st_mode & 0o022:
                return None
        doc = load_json_text(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("digest") != digest:
        return None
    data = doc.get("config")
    if not isinstance(data, dict) or set(data) != set(SECTIONS) or not all(isinstance(data[k], dict) for k in SECTIONS):
        return None
    return data


def _write_cache(path: str, digest: str, data: dict) -> None:
    """Best effort, atomic; a cache we cannot write only costs speed."""
    try:
        from .atomic import ensure_dir, write_text

        ensure_dir(os.path.dirname(path))
        write_text(path, json.dumps({"digest": digest, "config": data}))
    except OSError:
        pass


def _read_config(path: str) -> bytes:
    """The config's bytes, refused before reading anything when root would
    trust a file others can change, and never blocking on a FIFO."""
    from .fsroot import NotRegularFile, read_regular
    from .security import UnsafePath, check_root_only

    try:
        check_root_only(path, "site config")
    except UnsafePath as exc:
        raise ConfigRefused(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    try:
        return read_regular(path, MAX_CONFIG_BYTES)
    except NotRegularFile as exc:
        raise ConfigError(f"{path}: config {exc.strerror}") from None


def parse_toml(raw: bytes, source: str) -> dict:
    import tomllib  # only when the cache misses: ~8 ms the prolog does not pay

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
        raw = _read_config(path)
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{path}: config file not found") from None
        raw, path = b"", None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from None

    digest = hashlib.sha256(__version__.encode() + b"\0" + raw).hexdigest()
    cache_dir = _cache_dir()
    cache_file = os.path.join(cache_dir, f"config-{digest[:32]}.json")
    use_cache = use_cache and _cache_dir_usable(cache_dir)
    if use_cache:
        cached = _read_cache(cache_file, digest)
        if cached is not None:
            return Config(cached, path, digest)

    from .config_schema import validate

    data = validate(parse_toml(raw, path or "<defaults>"), path or "<defaults>")
    if use_cache:
        _write_cache(cache_file, digest, data)
    return Config(data, path, digest)
