"""The site config schema (pydantic). Imported only when a config must be
validated: the prolog hot path reads the cached, already-validated dict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from .checks import REGISTRY, default_checks

class _Strict(BaseModel):
    # inf/nan are valid TOML floats; as a limit they make every node fail (or pass).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# Per-check config models live in their check modules (SPEC.settings) and
# derive from this base.
Strict = _Strict


class NodeCfg(_Strict):
    gpus: int | None = Field(None, ge=0, le=64, description="expected GPUs per node; None: no gpu_count judgement")
    gpudirect: Literal["peermem", "dmabuf"] = "peermem"
    # Directory of per-node roots for test clusters: "{node}" is replaced by SLURMD_NODENAME.
    root: str = "/"


class FabricCfg(_Strict):
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

    class _ChecksBase(_Strict):
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


class HooksCfg(_Strict):
    deadline_s: float = Field(30.0, gt=0, le=3600, description="whole-hook deadline; keep under PrologEpilogTimeout")
    command_timeout_s: float = Field(10.0, gt=0, le=600)
    drain_on_internal_error: bool = False
    log_file: str = "/var/log/slurmqual/slurmqual.log"
    syslog: bool = True
    state_dir: str = "/var/lib/slurmqual/state"
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


class RestCfg(_Strict):
    url: str | None = None          # http://host:6820 or unix:///run/slurmrestd.sock
    user: str | None = None
    token_file: str | None = None   # else SLURMRESTD_TOKEN
    # "auto": no token over a unix socket without token_file (rest_auth/local), else a JWT.
    auth: Literal["auto", "jwt", "local"] = "auto"
    # Send the JWT over plain http:// to a non-loopback host or through a proxy (off: refused).
    allow_insecure_http: bool = False


class SlurmCfg(_Strict):
    adapter: Literal["cli", "rest"] = "cli"
    bin_dir: str | None = None      # where scontrol/sinfo live; None: PATH, then /usr/bin
    # slurm.conf for our CLI calls. slurmd gives HealthCheckProgram an empty
    # SLURM_CONF, so set this where slurm.conf is not at the default path.
    slurm_conf: str | None = None
    timeout_s: float = Field(10.0, gt=0, le=300)
    retries: int = Field(3, ge=1, le=10)
    rest: RestCfg = RestCfg()


class BurninCfg(_Strict):
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


class StoreCfg(_Strict):
    path: str = "/var/lib/slurmqual/slurmqual.db"


class SiteConfig(_Strict):
    node: NodeCfg = NodeCfg()
    fabric: FabricCfg = FabricCfg()
    checks: ChecksCfg = ChecksCfg()
    hooks: HooksCfg = HooksCfg()
    slurm: SlurmCfg = SlurmCfg()
    burnin: BurninCfg = BurninCfg()
    store: StoreCfg = StoreCfg()

    @model_validator(mode="after")
    def _rest_needs_url(self) -> "SiteConfig":
        if self.slurm.adapter == "rest" and not self.slurm.rest.url:
            raise ValueError("slurm.adapter = 'rest' needs slurm.rest.url")
        return self


def validate(data: dict, source: str) -> dict:
    """Validate raw TOML data; return the effective config as a plain dict.
    Raises ConfigError with one message naming the file, key and expectation."""
    from pydantic import ValidationError

    from .config import ConfigError

    try:
        model = SiteConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            got = err.get("input")
            got_s = "" if err["type"] == "extra_forbidden" or isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"{source}: {key}: {msg}{got_s}")
        raise ConfigError("\n".join(lines)) from None
    return model.model_dump()
