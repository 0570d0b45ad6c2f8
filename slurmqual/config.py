"""Load the site config fast.

Validating with pydantic costs ~100 ms of imports, too much before every job.
So the validated effective config is cached as JSON keyed on a digest of the
file's bytes and slurmqual's version; the prolog reads the cache and never
imports pydantic unless the file changed.
"""

from __future__ import annotations

try:  # the builtin module (3.11: _sha256, 3.12+: _sha2): hashlib loads OpenSSL, ~3 ms a prolog
    from _sha256 import sha256
except ImportError:  # pragma: no cover - depends on the Python
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256
import os

from . import __version__

DEFAULT_PATH = "/etc/slurmqual/config.toml"


MAX_CONFIG_BYTES = 1 << 20
MAX_CACHE_BYTES = 4 << 20
SECTIONS = ("node", "fabric", "checks", "hooks", "slurm", "burnin", "store", "remediation", "preflight")
# `[[groups]]`: per-node-group overrides, compiled at validation into
# {"name", "match", "set": [[path, value], ...]} so a hook applies them with no pydantic.
GROUPS = "groups"
# What a group may override; the rest is fleet-wide (node.root picks the node's tree).
GROUP_SECTIONS = ("node", "fabric", "checks")


class ConfigError(Exception):
    """The site config is missing, unparsable or invalid. The message is for humans."""


class ConfigRefused(ConfigError):
    """As root: the config (or a directory on its way) is writable by someone
    other than root. Nothing in it is read, so nothing in it is used."""


class Config:
    """The effective, validated site config: nested plain dicts.

    `for_node()` gives the config one node sees: the base with its matching
    `[[groups]]` overrides applied. That is the one place overrides are merged;
    checks read `ctx.config` / `ctx.settings()` and see the merged values."""

    def __init__(self, data: dict, path: str | None = None, digest: str = "",
                 applied: tuple[str, ...] = (), undecided: tuple[str, ...] = ()):
        self.data = data
        self.path = path
        self.digest = digest
        self.applied = applied        # names of the groups merged in (for_node)
        self.undecided = undecided    # groups not applied: their partition/feature was unknown

    @property
    def groups(self) -> list[dict]:
        return self.data.get(GROUPS) or []

    def needs_facts(self) -> bool:
        """Whether some group matches on partition or feature (Slurm's view of
        the node, see nodefacts.py); hostlist-only groups need nothing."""
        return any("partition" in g["match"] or "feature" in g["match"] for g in self.groups)

    def for_node(self, node: str, partitions: "set[str] | None" = None,
                 features: "set[str] | None" = None) -> "Config":
        """This node's effective config. partitions/features None: unknown, so
        groups matching on them are not applied (listed in `undecided`).
        Later groups win."""
        groups = self.groups
        if not groups:
            return self
        sets: list = []
        applied: list[str] = []
        undecided: list[str] = []
        for g in groups:
            verdict = group_matches(g["match"], node, partitions, features)
            if verdict is None:
                undecided.append(g["name"])
            elif verdict:
                applied.append(g["name"])
                sets.extend(g["set"])
        data = apply_overrides(self.data, sets)
        data[GROUPS] = []
        return Config(data, self.path, self.digest, tuple(applied), tuple(undecided))

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


def _in_hostlist(node: str, hosts: str) -> bool:
    # python-hostlist (NSC, already our hostlist library for Slurm calls): the
    # same gpu[001-064] syntax Slurm accepts, no hand-written range parser. The
    # hostlist was checked at validation; imported directly, not through
    # slurmqual.slurm, whose package imports the adapters (not on the prolog path).
    import hostlist

    return node in _expanded(hosts, hostlist)


_EXPANDED: dict[str, frozenset] = {}


def _expanded(hosts: str, hostlist) -> frozenset:
    if hosts not in _EXPANDED:
        _EXPANDED[hosts] = frozenset(hostlist.expand_hostlist(hosts))
    return _EXPANDED[hosts]


def group_matches(match: dict, node: str, partitions: "set[str] | None",
                  features: "set[str] | None") -> bool | None:
    """All of a group's match keys hold for the node: hosts (hostlist),
    partition (the node is in it), feature (the node has every one listed).
    None: a needed partition/feature set is unknown and the other keys hold."""
    if "hosts" in match and not _in_hostlist(node, match["hosts"]):
        return False
    unknown = False
    if "partition" in match:
        if partitions is None:
            unknown = True
        elif match["partition"] not in partitions:
            return False
    if "feature" in match:
        if features is None:
            unknown = True
        elif not set(match["feature"]) <= features:
            return False
    return None if unknown else True


def apply_overrides(data: dict, sets: list) -> dict:
    """A copy of data with each [path, value] set; only the dicts on a set
    path are copied (the rest is shared, read-only for checks)."""
    out = dict(data)
    copied = {id(out)}
    for path, value in sets:
        d = out
        for key in path[:-1]:
            child = d[key]
            if id(child) not in copied:
                child = dict(child)
                d[key] = child
                copied.add(id(child))
            d = child
        d[path[-1]] = value
    return out


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
    if (not isinstance(data, dict) or set(data) != set(SECTIONS) | {GROUPS}
            or not all(isinstance(data[k], dict) for k in SECTIONS) or not _groups_shape_ok(data[GROUPS], data)):
        return None
    return data


def _groups_shape_ok(groups: object, data: dict) -> bool:
    """The compiled groups as validate() writes them, each set path leading
    through dicts of data; anything else: revalidate."""
    if not isinstance(groups, list):
        return False
    for g in groups:
        if (not isinstance(g, dict) or not isinstance(g.get("name"), str) or not isinstance(g.get("match"), dict)
                or not isinstance(g.get("set"), list)):
            return False
        for item in g["set"]:
            if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], list) or not item[0]
                    or item[0][0] not in GROUP_SECTIONS):
                return False
            d = data
            for key in item[0][:-1]:
                d = d.get(key) if isinstance(key, str) else None
                if not isinstance(d, dict):
                    return False
    return True


def _write_cache(path: str, digest: str, data: dict) -> None:
    """Best effort, atomic; a cache we cannot write only costs speed."""
    try:
        from .atomic import ensure_dir, write_text
        from .leanjson import dumps

        ensure_dir(os.path.dirname(path))
        write_text(path, dumps({"digest": digest, "config": data}))
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

    digest = sha256(__version__.encode() + b"\0" + raw).hexdigest()
    cache_dir = _cache_dir()
    cache_file = os.path.join(cache_dir, f"config-{digest[:32]}.json")
    use_cache = use_cache and _cache_dir_usable(cache_dir)
    if use_cache:
        cached = _read_cache(cache_file, digest)
        if cached is not None:
            return Config(cached, path, digest)

    data = validate(parse_toml(raw, path or "<defaults>"), path or "<defaults>")
    if use_cache:
        _write_cache(cache_file, digest, data)
    return Config(data, path, digest)


def validate(data: dict, source: str) -> dict:
    """Raw TOML data -> the effective config (config_schema.validate, which
    imports pydantic); ConfigError naming file, key and expectation."""
    from .config_schema import SchemaError, validate as schema_validate

    try:
        return schema_validate(data, source)
    except SchemaError as exc:
        raise ConfigError(str(exc)) from None


def validate_effective(data: dict, source: str) -> None:
    """A node's merged config checked against the models once more
    (config_schema.validate_effective); ConfigError when it does not fit."""
    from .config_schema import SchemaError, validate_effective as schema_validate_effective

    try:
        schema_validate_effective(data, source)
    except SchemaError as exc:
        raise ConfigError(str(exc)) from None
