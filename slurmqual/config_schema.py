"""The site config schema (pydantic). Imported only when a config must be
validated: the prolog hot path reads the cached, already-validated dict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from .checks import REGISTRY, default_checks
from .checks._settings import Strict
from .configproblem import DEFAULT_LOG_FILE, DEFAULT_STATE_DIR


class SchemaError(ValueError):
    """The config does not fit the models; config.py raises it as ConfigError."""


class NodeCfg(Strict):
    gpus: int | None = Field(None, ge=0, le=64, description="expected GPUs per node; None: no gpu_count judgement")
    # Every GPU's model as the driver names it (/proc/driver/nvidia/gpus/*/information,
    # "NVIDIA H100 80GB HBM3"); None: not judged.
    gpu_model: str | None = Field(None, min_length=1, max_length=96)
    gpudirect: Literal["peermem", "dmabuf"] = "peermem"
    # Directory of per-node roots for test clusters: "{node}" is replaced by SLURMD_NODENAME.
    root: str = "/"


class FabricCfg(Strict):
    nics: int | None = Field(None, ge=0, le=64, description="expected fabric ports; None: no count check")
    rate_gbps: float | None = Field(None, gt=0, le=3200,  # 3.2 Tb/s: beyond any port made; above it every node fails
                                    description="expected port rate; None: the fastest port on the node")
    link_layer: Literal["auto", "infiniband", "ethernet"] = "auto"
    check_netdev_speed: bool = True
    # RDMA devices to ignore (e.g. a management ConnectX on the storage network).
    ignore: list[str] = []


def _checks_model() -> type[BaseModel]:
    """`[checks]`: the hook lists plus one section per check that declares
    settings, all derived from the check modules' SPECs."""
    ids = tuple(REGISTRY)

    class _ChecksBase(Strict):
        prolog: list[str] = default_checks("prolog")
        epilog: list[str] = default_checks("epilog")
        healthcheck: list[str] = default_checks("healthcheck")
        disabled: list[str] = []

        @field_validator("prolog", "epilog", "healthcheck", "disabled")
        @classmethod
        def _known(cls, v: list[str]) -> list[str]:
            unknown = [c for c in v if c not in ids]
            if unknown:
                raise ValueError(f"unknown check {unknown}; known: {', '.join(ids)}")
            return v

    sections = {}
    for spec in REGISTRY.values():
        if spec.settings is not None:
            model = spec.settings()
            sections[spec.name] = (model, model())
    return create_model("ChecksCfg", __base__=_ChecksBase, **sections)


ChecksCfg = _checks_model()
CHECK_IDS = tuple(REGISTRY)


class HooksCfg(Strict):
    deadline_s: float = Field(30.0, gt=0, le=3600, description="whole-hook deadline; keep under PrologEpilogTimeout")
    command_timeout_s: float = Field(10.0, gt=0, le=600)
    drain_on_internal_error: bool = False
    log_file: str = DEFAULT_LOG_FILE
    syslog: bool = True
    state_dir: str = DEFAULT_STATE_DIR
    metrics_dir: str | None = None
    # Fleet guard for hook drains (needs state_dir shared by all nodes): more than
    # max(guard_min, guard_fraction of the nodes) hook drains within guard_window_s
    # and further hook drains are held (logged critical, shown by `status`).
    guard_fraction: float = Field(0.1, gt=0, le=1)
    guard_min: int = Field(2, ge=0)
    guard_window_s: float = Field(3600.0, gt=0)
    # A check in `error` keeps slurmqual's own check drain at most this long; then
    # the node is resumed if the check that drained it passes, else the reason
    # says the check cannot judge (still drained: a person decides).
    error_hold_s: float = Field(3600.0, ge=0)
    # Groups that match on partition/feature read Slurm's view of the node from
    # <state_dir>/facts/<node>.json (nodefacts.py). The epilog and health check
    # fetch it again (one scontrol call) when it is older than this; the prolog
    # only when there is none.
    node_facts_max_age_s: float = Field(3600.0, gt=0)


class RestCfg(Strict):
    url: str | None = None          # http://host:6820 or unix:///run/slurmrestd.sock
    user: str | None = None
    token_file: str | None = None   # else SLURMRESTD_TOKEN
    # "auto": no token over a unix socket without token_file (rest_auth/local), else a JWT.
    auth: Literal["auto", "jwt", "local"] = "auto"
    # Send the JWT over plain http:// to a non-loopback host or through a proxy (off: refused).
    allow_insecure_http: bool = False


class SlurmCfg(Strict):
    # "pyslurm": libslurm through pyslurm (the hooks still use the CLI); "auto": pyslurm
    # when it imports and matches slurmctld's release, else the CLI (docs/SLURM_VERSIONS.md).
    adapter: Literal["cli", "rest", "pyslurm", "auto"] = "cli"
    bin_dir: str | None = None      # where scontrol/sinfo live; None: PATH, then /usr/bin
    # slurm.conf for our CLI calls. slurmd gives HealthCheckProgram an empty
    # SLURM_CONF, so set this where slurm.conf is not at the default path.
    slurm_conf: str | None = None
    timeout_s: float = Field(10.0, gt=0, le=300)
    retries: int = Field(3, ge=1, le=10)
    rest: RestCfg = RestCfg()


class BurninCfg(Strict):
    nccl_tests_dir: str = "/opt/nccl-tests/build"
    launcher: Literal["srun", "mpirun"] = "srun"
    srun_mpi: str = "pmix"          # "none" to omit --mpi
    tests: list[Literal["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"]] = ["all_reduce_perf"]
    gpus_per_node: int = Field(8, ge=1, le=64)
    min_bytes: str = "1G"
    max_bytes: str = "8G"
    reference_size: int = Field(8589934592, gt=0, description="bytes; the size whose busbw is judged")
    group_size: int = Field(16, ge=2)
    rounds: int = Field(3, ge=1, le=64)
    all_node_run: bool = False
    # Per-GPU tests before the pair rounds (docs/BURNIN.md): any of
    # "gpu_burn", "dcgmproftester", "nvbandwidth"; a tool missing from
    # gpu_tools_dir leaves its tests untested (never a pass).
    gpu_tests: list[Literal["gpu_burn", "dcgmproftester", "nvbandwidth"]] = []
    gpu_tools_dir: str = "/usr/local/bin"
    gpu_test_s: int = Field(60, ge=5, le=3600, description="seconds of gpu_burn / dcgmproftester load per node")
    # Runs of a GPU's tools in each retest round for a node with a GPU left
    # `retest` (a GPU is slow only on two runs or more).
    gpu_retest_runs: int = Field(2, ge=1, le=5)
    # Runs of each GPU tool in the first round (a GPU's number is the median
    # of its runs): "auto" sizes them from the fleet's GPU run-to-run noise
    # in its last full burn-in (the store), so that a GPU 15% slow is sent to
    # the retest rounds while noise sends about 1% of the nodes (1 without
    # a stored run; judge/gpus.py runs_needed).
    gpu_runs: Literal["auto"] | int = Field("auto", description='"auto" or 1-8')
    test_time_limit: str = "00:10:00"
    task_time_limit: str = "01:00:00"
    partition: str | None = None
    reservation: str | None = None
    account: str | None = None
    run_dir: str = "/var/lib/slurmqual/runs"
    threshold: float = Field(0.9, gt=0, le=1)
    baseline_drop: float = Field(0.1, ge=0, lt=1)
    guard_fraction: float = Field(0.1, gt=0, le=1)
    guard_min: int = Field(2, ge=0)
    max_age_days: float = Field(30, gt=0)
    # Which switch each node / NIC hangs off: Slurm topology.conf or
    # topology.yaml, or a fabric map CSV (`slurmqual fabric map`). With it the
    # analysis names a slow switch instead of draining the nodes behind it.
    topology: str | None = None
    # Per-rail tests (perftest ib_write_bw, one NIC against the same NIC of
    # the pair's other node, all rails at once); empty: none. Rail N is the
    # N-th name here (and GPU N with rail_use_cuda).
    rails: list[str] = []
    perftest_dir: str = "/usr/bin"
    rail_bytes: int = Field(1048576, gt=0, le=1 << 30)
    rail_duration_s: int = Field(10, ge=1, le=600)
    rail_qps: int = Field(4, ge=1, le=64)
    rail_port: int = Field(18515, ge=1024, le=65000)   # rail N listens on rail_port + N
    rail_use_cuda: bool = False                        # GPUDirect: --use_cuda=<rail index>
    rail_server_wait_s: float = Field(2.0, ge=0, le=60)

    @field_validator("gpu_runs")
    @classmethod
    def _gpu_runs(cls, v):
        if v != "auto" and not (type(v) is int and 1 <= v <= 8):
            raise ValueError('gpu_runs must be "auto" or a number of runs from 1 to 8')
        return v

    @field_validator("rails")
    @classmethod
    def _rails(cls, v: list[str]) -> list[str]:
        import re

        bad = [r for r in v if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", r)]
        if bad or len(set(v)) != len(v):
            raise ValueError(f"rails are RDMA device names (mlx5_0), each once; bad: {bad or 'a repeat'}")
        return v
    # Retest rounds the analysis submits itself for nodes it cannot decide
    # (`retest`): each pairs them with proven-good partners. 0: print the plan only.
    max_retest_rounds: int = Field(2, ge=0, le=10)


class PreflightCfg(Strict):
    """`slurmqual preflight` in a user's job (docs/PREFLIGHT.md): the burn-in's
    tools, rails and topology from [burnin], these for the short run."""
    drain: bool = False                  # drain bad nodes (needs a Slurm operator); default: report only
    level: Literal["fast", "standard", "slow"] | None = None   # None: the prolog's (fast)
    time_s: float = Field(90, ge=10, le=3600, description="default --time: the whole preflight, seconds")
    partners: int = Field(3, ge=2, le=8, description="different partners per node (one more round for odd counts)")
    min_own_median: int = Field(4, ge=3, description="fewest nodes judged against their own median without a stored one")
    tests: list[Literal["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf",
                        "sendrecv_perf"]] = []   # empty: burnin.tests
    rail_duration_s: int = Field(3, ge=1, le=60)
    gpu_tools: bool = False              # also run burnin.gpu_tests (short: a share of the budget)
    gpu_test_s: int = Field(10, ge=5, le=600)


class RemediationCfg(Strict):
    """`[remediation]`: the repair ladder (remediation.py). Off by default: a
    site opts in to automatic GPU resets and reboots (they need RebootProgram
    in slurm.conf and the CLI adapter)."""
    enabled: bool = False
    # Overrides of the per-check and per-Xid defaults (remediation.DEFAULT_CHECKS,
    # DEFAULT_XID): "none" (warn), "reset", "reboot", "drain", "rma".
    checks: dict[str, Literal["none", "reset", "reboot", "drain", "rma"]] = {}
    xid: dict[str, Literal["none", "reset", "reboot", "drain", "rma"]] = {}   # TOML: `79 = "drain"`
    # At most max_auto automatic actions (reset, reboot) per node within window_s;
    # the next failure drains with the history in the reason (a person decides).
    # window: a duration ("7d", "36h", "1d12h"); window_s: the same in seconds (either, not both).
    max_auto: int = Field(2, ge=0, le=100)
    window: str | None = None
    window_s: float = Field(7 * 86400.0, gt=0)
    # Fleet guard for reboots in flight (like the hook drain guard, its own limit):
    # at most max(reboot_guard_min, reboot_guard_fraction of the nodes) at once; a
    # reboot counts as in flight until the node passes again, at most reboot_window_s.
    reboot_guard_fraction: float = Field(0.05, gt=0, le=1)
    reboot_guard_min: int = Field(1, ge=0)
    reboot_window_s: float = Field(3600.0, gt=0)
    # `status --lemons`: lemon_count or more hardware drains or automatic actions within lemon_window_s.
    lemon_count: int = Field(3, ge=1)
    lemon_window_s: float = Field(30 * 86400.0, gt=0)

    @field_validator("checks")
    @classmethod
    def _known_checks(cls, v: dict) -> dict:
        unknown = [c for c in v if c not in REGISTRY]
        if unknown:
            raise ValueError(f"unknown check {unknown}; known: {', '.join(REGISTRY)}")
        return v

    @field_validator("window", mode="before")
    @classmethod
    def _window_duration(cls, v: object) -> object:
        from .remediation import parse_duration

        if v is not None and not isinstance(v, str):
            raise ValueError('a duration string such as "7d" (or window_s = seconds)')
        if v is not None:
            parse_duration(v)
        return v

    @model_validator(mode="after")
    def _window_in_seconds(self) -> "RemediationCfg":
        from .remediation import parse_duration

        if self.window is not None:
            if "window_s" in self.model_fields_set:
                raise ValueError("set remediation.window or remediation.window_s, not both")
            self.window_s = parse_duration(self.window)
        return self

    @field_validator("xid")
    @classmethod
    def _xid_numbers(cls, v: dict) -> dict:
        bad = [k for k in v if not k.isdigit()]
        if bad:
            raise ValueError(f"Xid numbers as keys (e.g. 79 = \"reboot\"), got {bad}")
        return {str(int(k)): a for k, a in v.items()}


class StoreCfg(Strict):
    path: str = "/var/lib/slurmqual/slurmqual.db"


class MatchCfg(Strict):
    """Which nodes a `[[groups]]` entry applies to: every key given must hold."""
    hosts: str | None = None            # Slurm hostlist, e.g. "gpu[001-064]"
    partition: str | None = None        # the node is in this partition
    feature: list[str] | None = None    # the node has all these features (a string: one)

    @field_validator("feature", mode="before")
    @classmethod
    def _one_or_list(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("hosts")
    @classmethod
    def _hostlist(cls, v: str | None) -> str | None:
        if v is None:
            return v
        import hostlist  # python-hostlist: the library our Slurm calls already use

        try:
            names = hostlist.expand_hostlist(v)
        except hostlist.BadHostlist as exc:
            raise ValueError(f"bad hostlist {v!r}: {exc}") from None
        if not names:
            raise ValueError("empty hostlist")
        return v

    @field_validator("partition")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and (not v or any(c in v for c in " ,")):
            raise ValueError("one partition name (no spaces or commas)")
        return v

    @field_validator("feature")
    @classmethod
    def _features(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or any(not f or any(c in f for c in " ,&|") for f in v)):
            raise ValueError("feature names (no spaces, commas or operators; a list means all of them)")
        return v

    @model_validator(mode="after")
    def _something(self) -> "MatchCfg":
        if self.hosts is None and self.partition is None and self.feature is None:
            raise ValueError("match needs hosts, partition or feature")
        return self


class GroupCfg(Strict):
    """One `[[groups]]` entry. Its node/fabric/checks tables are validated in
    validate() against the same models as the base sections, merged over them."""
    name: str | None = None
    match: MatchCfg
    node: dict = {}
    fabric: dict = {}
    checks: dict = {}


class SiteConfig(Strict):
    node: NodeCfg = NodeCfg()
    fabric: FabricCfg = FabricCfg()
    checks: ChecksCfg = ChecksCfg()
    hooks: HooksCfg = HooksCfg()
    slurm: SlurmCfg = SlurmCfg()
    burnin: BurninCfg = BurninCfg()
    store: StoreCfg = StoreCfg()
    remediation: RemediationCfg = RemediationCfg()
    preflight: PreflightCfg = PreflightCfg()
    groups: list[GroupCfg] = []

    @model_validator(mode="after")
    def _rest_needs_url(self) -> "SiteConfig":
        if self.slurm.adapter == "rest" and not self.slurm.rest.url:
            raise ValueError("slurm.adapter = 'rest' needs slurm.rest.url")
        return self


SECTION_MODELS = {"node": NodeCfg, "fabric": FabricCfg, "checks": ChecksCfg}


def _error_lines(exc, where: str, prefix: tuple[str, ...] = ()) -> list[str]:
    """One line per pydantic error: where, key, message, the value given."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in prefix + tuple(err["loc"])) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        got = err.get("input")
        got_s = "" if err["type"] == "extra_forbidden" or isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"{where}: {key}: {msg}{got_s}")
    return lines


def _group_label(data: dict, index: int) -> str:
    groups = data.get("groups")
    name = groups[index].get("name") if isinstance(groups, list) and index < len(groups) \
        and isinstance(groups[index], dict) else None
    return f"groups[{index}]" + (f" ({name!r})" if isinstance(name, str) else "")


def _relabel(line: str, source: str, data: dict) -> str:
    """'FILE: groups.1.fabric.nics: ...' -> 'FILE: groups[1] ('h100'): fabric.nics: ...'"""
    head = f"{source}: groups."
    if not line.startswith(head):
        return line
    index, _, rest = line[len(head):].partition(".")
    if not index.isdigit():
        return line
    return f"{source}: {_group_label(data, int(index))}: {rest}"


def _deep_merge(base: dict, over: dict) -> dict:
    """The raw TOML tables merged, `over` winning; how a group reads over the base file."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _leaf_paths(raw: dict, model: type[BaseModel], prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The settings a group sets: a table recurses only where the field is a
    model (a check's section); any other value (a list, a dict-valued setting
    such as ib_counters.limits) is replaced whole."""
    out = []
    for key, value in raw.items():
        field = model.model_fields[key]
        sub = field.annotation
        if isinstance(value, dict) and isinstance(sub, type) and issubclass(sub, BaseModel):
            out.extend(_leaf_paths(value, sub, prefix + (key,)))
        else:
            out.append(prefix + (key,))
    return out


def _compile_group(index: int, group: GroupCfg, data: dict, source: str) -> tuple[dict, list[str]]:
    """Validate one group's overrides merged over the base file's sections
    (the same models, so the same limits and the same unknown-key errors) and
    compile them to [path, validated value] pairs a hook applies without pydantic."""
    from pydantic import ValidationError

    label = f"{source}: {_group_label(data, index)}"
    errors: list[str] = []
    sets: list = []
    for section, model in SECTION_MODELS.items():
        over = getattr(group, section)
        if not over:
            continue
        if section == "node" and "root" in over:
            errors.append(f"{label}: node.root: cannot be set per group (it locates the node's tree)")
            continue
        base = data.get(section) if isinstance(data.get(section), dict) else {}
        try:
            merged = model.model_validate(_deep_merge(base, over)).model_dump()
        except ValidationError as exc:
            errors.extend(_error_lines(exc, label, (section,)))
            continue
        for path in _leaf_paths(over, model, ()):
            value = merged
            for key in path:
                value = value[key]
            sets.append([[section, *path], value])
    name = group.name or f"groups[{index}]"
    match = {k: v for k, v in group.match.model_dump().items() if v is not None}
    return {"name": name, "match": match, "set": sets}, errors


def validate(data: dict, source: str) -> dict:
    """Validate raw TOML data; return the effective config as a plain dict.
    Raises SchemaError with one message naming the file, key and expectation
    (and the group, for an error inside a `[[groups]]` entry)."""
    from pydantic import ValidationError

    try:
        model = SiteConfig.model_validate(data)
    except ValidationError as exc:
        raise SchemaError("\n".join(_relabel(line, source, data) for line in _error_lines(exc, source))) from None
    out = model.model_dump()
    compiled, errors = [], []
    for index, group in enumerate(model.groups):
        entry, errs = _compile_group(index, group, data, source)
        compiled.append(entry)
        errors.extend(errs)
    if errors:
        raise SchemaError("\n".join(errors))
    out["groups"] = compiled
    return out


def validate_effective(data: dict, source: str) -> None:
    """Check a node's merged config (several groups applied together) against
    the models once more: `config show --node` reports a combination the
    per-group checks could not see."""
    from pydantic import ValidationError

    try:
        SiteConfig.model_validate({k: v for k, v in data.items() if k != "groups"})
    except ValidationError as exc:
        raise SchemaError("\n".join(_error_lines(exc, source))) from None
