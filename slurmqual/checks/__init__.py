"""The per-node checks: registry and the context they run in.

Each check lives in its own module `slurmqual.checks.<id>` and exposes
`run(ctx) -> CheckResult`. Modules are imported only when their check runs,
so the prolog pays for nothing it does not use.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Callable

from ..config import Config
from ..fsroot import FsRoot
from ..result import CheckResult, Status


@dataclass(frozen=True)
class CheckSpec:
    name: str
    level: str       # "fast": sysfs/procfs reads only; "standard": may run bounded commands
    summary: str


# Stable IDs: users put them in configs and they appear in drain reasons.
REGISTRY: dict[str, CheckSpec] = {s.name: s for s in (
    CheckSpec("peermem", "fast", "GPUDirect RDMA peer memory (nvidia_peermem or dma-buf) is available"),
    CheckSpec("nic_link", "fast", "every fabric port present, ACTIVE/LinkUp, at the expected rate"),
    CheckSpec("dcqcn", "fast", "RoCE congestion control (DCQCN RP/NP) enabled on the configured priorities"),
    CheckSpec("gpu_nic_affinity", "fast", "every GPU has a fabric NIC on its own NUMA node / PCIe switch"),
    CheckSpec("gpu_count", "fast", "the expected number of GPUs is visible on PCI"),
    CheckSpec("pcie_link", "fast", "GPU and NIC PCIe links trained at their maximum width and speed"),
    CheckSpec("ib_counters", "fast", "fabric port error counters below the configured limits"),
    CheckSpec("versions", "standard", "GPU driver, NIC firmware, kernel match the pinned versions"),
)}

LEVELS = ("fast", "standard")


@dataclass
class Context:
    """What a check may use: the node's filesystem, the config, a command
    runner (standard level only) and a per-run memo for shared probes."""

    fs: FsRoot
    config: Config
    level: str = "fast"
    deadline: float = float("inf")          # time.monotonic() value
    command_timeout: float = 10.0
    memo: dict = field(default_factory=dict)

    def probe(self, key: str, fn: Callable[[], object]):
        """Compute a probe once per run (GPU list, fabric ports, ...)."""
        if key not in self.memo:
            self.memo[key] = fn()
        return self.memo[key]

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def run_command(self, argv: list[str]):
        """Bounded external command; only allowed at standard level."""
        from ..command import CommandError, run

        if self.level != "standard":
            raise CommandError(f"{argv[0]}: external commands are not run at level {self.level}")
        timeout = min(self.command_timeout, self.time_left())
        if timeout <= 0:
            raise CommandError(f"{argv[0]}: hook deadline reached, not started")
        return run(argv, timeout)


def select(names: list[str] | None, level: str) -> list[CheckSpec]:
    """Checks to run: the named ones (in registry order) limited to the level.
    `fast` runs fast checks; `standard` runs both."""
    allowed = {"fast"} if level == "fast" else {"fast", "standard"}
    wanted = REGISTRY.keys() if names is None else names
    return [REGISTRY[n] for n in REGISTRY if n in wanted and REGISTRY[n].level in allowed]


def run_one(spec: CheckSpec, ctx: Context) -> CheckResult:
    """Run one check; an exception inside it becomes `error`, never a crash."""
    from ..fsroot import FsError
    from ..hints import hint_for

    try:
        module = importlib.import_module(f"{__name__}.{spec.name}")
        result = module.run(ctx)
    except FsError as exc:
        result = CheckResult(spec.name, Status.ERROR, f"cannot read {exc.path}: {exc.reason}")
    except Exception as exc:  # noqa: BLE001 - a check bug must not take the others down
        result = CheckResult(spec.name, Status.ERROR, f"internal error in check: {type(exc).__name__}: {exc}")
        result.devices = []
        ctx.memo.setdefault("_tracebacks", []).append((spec.name, _format_tb()))
    if not result.hint and result.status in (Status.FAIL, Status.WARN, Status.ERROR):
        result.hint = hint_for(spec.name, result.status)
    return result


def _format_tb() -> str:
    import traceback

    return traceback.format_exc()


def run_checks(specs: list[CheckSpec], ctx: Context) -> list[CheckResult]:
    results = []
    for spec in specs:
        if ctx.time_left() <= 0:
            results.append(CheckResult(spec.name, Status.ERROR, "not run: hook deadline reached"))
            continue
        results.append(run_one(spec, ctx))
    return results
