"""The per-node checks: registry and the context they run in.

A check is one module `slurmqual.checks.<id>` that declares everything about
itself in `SPEC` (id, level, summary, hint, explain text, config model) and
exposes `run(ctx) -> CheckResult`. The registry, the config schema's check
list and sections, the hints, `slurmqual explain` and the default hook lists
are all derived from those declarations (tests/test_check_registry.py checks
they agree), so adding a check means adding one module.

Check modules keep their top-level imports light (probes, result): the
registry imports every module to read its SPEC, including on the prolog path.
A check's config model is built by `SPEC.settings()`, which imports pydantic
only when a config is validated, never in a hook that reads the cached config.
"""

from __future__ import annotations

import os
import sys
import time

from ..fsroot import FsRoot
from ..result import CheckResult, Status

# Not `from typing import TYPE_CHECKING`: typing (and importlib) cost the
# installed prolog ~5 ms before every job; type checkers treat a module-level
# TYPE_CHECKING = False the same way.
TYPE_CHECKING = False
if TYPE_CHECKING:   # types only
    from collections.abc import Callable
    from typing import Protocol

    class SiteConfig(Protocol):
        """What a check reads of the site config (config.Config is one): its
        sections by name. Named here, not imported: the config's schema
        imports the checks, so the checks must not import the config back."""

        def __getitem__(self, name: str) -> dict: ...

LEVELS = ("fast", "standard", "slow")
ERROR_HINT = "slurmqual could not judge this check; see the message, fix the input or report a slurmqual bug"
HOOKS = ("prolog", "epilog", "healthcheck")


class CheckSpec:
    """One check's declaration.

    level: "fast" reads sysfs/procfs only (prolog); "standard" may run bounded
    commands (epilog, health check); "slow" runs long diagnostics (requalify,
    on demand; never in a hook by default).
    hint: the one-line remediation shown with a failure. A check that knows the
    failing device sets `CheckResult.hint` itself with the device filled in.
    settings: a function returning the pydantic model of `[checks.<id>]`
    (imports pydantic lazily), or None for a check without settings.
    hooks: hooks whose default check list includes it.
    rank: position in the run order and in listings.
    """

    __slots__ = ("name", "level", "summary", "hint", "explain", "settings", "hooks", "rank")

    def __init__(self, name: str, level: str, summary: str, hint: str, explain: str, *, rank: int,
                 settings: "Callable[[], type] | None" = None, hooks: tuple[str, ...] | None = None):
        if level not in LEVELS:
            raise ValueError(f"check {name}: unknown level {level!r}")
        self.name = name
        self.level = level
        self.summary = summary
        self.hint = hint
        self.explain = explain
        self.settings = settings
        self.rank = rank
        if hooks is None:
            hooks = {"fast": HOOKS, "standard": ("epilog", "healthcheck"), "slow": ()}[level]
        self.hooks = tuple(hooks)

    def __repr__(self) -> str:
        return f"CheckSpec({self.name!r}, {self.level!r})"


def _module_names() -> list[str]:
    """Check modules of this package (one listdir: no import)."""
    return sorted(f[:-3] for f in os.listdir(os.path.dirname(__file__)) if f.endswith(".py") and not f.startswith("_"))


def _check_module(name: str):
    """The check module `name`, imported now if it is not yet (importlib.import_module
    without importing importlib)."""
    qualified = f"{__name__}.{name}"
    module = sys.modules.get(qualified)
    if module is None:
        __import__(qualified)
        module = sys.modules[qualified]
    return module


def _spec_of(name: str) -> CheckSpec | None:
    """The SPEC of check module `name` (imported now), None if it declares none."""
    module = _check_module(name)
    spec = getattr(module, "SPEC", None)
    if spec is not None and spec.name != name:
        raise ImportError(f"{module.__name__}: SPEC.name {spec.name!r} differs from the module name")
    return spec


def _ordered(specs) -> dict[str, CheckSpec]:
    return {s.name: s for s in sorted(specs, key=lambda s: (s.rank, s.name))}


def _discover() -> dict[str, CheckSpec]:
    """Every module of this package with a SPEC, in rank order."""
    return _ordered(s for s in map(_spec_of, _module_names()) if s is not None)


REGISTRY: dict[str, CheckSpec]  # not assigned here: built by registry() on first use


def registry() -> dict[str, CheckSpec]:
    """REGISTRY, built on first use: a hook that names its checks (select with
    names) imports only those modules, not all of them and their probes."""
    global REGISTRY
    try:
        return REGISTRY
    except NameError:
        REGISTRY = _discover()
        return REGISTRY


def __getattr__(name: str):
    # Stable IDs: users put them in configs and they appear in drain reasons.
    # `checks.REGISTRY` / `from slurmqual.checks import REGISTRY`: every check, in rank order.
    if name == "REGISTRY":
        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_checks(hook: str) -> list[str]:
    """The checks a hook runs when the site config does not list them."""
    return [s.name for s in registry().values() if hook in s.hooks]


class Context:
    """What a check may use: the node's filesystem, the config, a command
    runner (standard level and up) and typed accessors for probes shared by
    several checks, each computed once per run."""

    def __init__(self, fs: FsRoot, config: SiteConfig, level: str = "fast", deadline: float = float("inf"),
                 command_timeout: float = 10.0, memo: dict | None = None, state_dir: str | None = None,
                 node: str | None = None):
        self.fs = fs
        self.config = config
        self.level = level
        self.deadline = deadline          # time.monotonic() value
        self.command_timeout = command_timeout
        self.memo = {} if memo is None else memo
        # Where checks keep what they must remember between runs (counter
        # snapshots, kernel-log cursors). None: the config's hooks.state_dir.
        self.state_dir = state_dir
        self.node = node                  # None: $SLURMD_NODENAME or the host name

    def probe(self, key: str, fn: "Callable[[], object]"):
        """Compute a probe once per run."""
        if key not in self.memo:
            self.memo[key] = fn()
        return self.memo[key]

    def settings(self, check: str) -> dict:
        """The effective `[checks.<check>]` section."""
        return self.config["checks"][check]

    # -- shared probes -------------------------------------------------------
    def ports(self) -> list:
        """Fabric RDMA ports (probe.rdma.Port), minus fabric.ignore."""
        from ..probe import rdma

        return self.probe("ports", lambda: rdma.list_ports(self.fs, self.config["fabric"]["ignore"]))

    def pci_devices(self) -> list:
        """Every PCI function (probe.pci.PciDevice)."""
        from ..probe import pci

        return self.probe("pci", lambda: pci.list_devices(self.fs))

    def gpus(self) -> list:
        """NVIDIA GPUs on PCI, or the driver's list where sysfs has none."""
        from ..probe import pci

        def find() -> list:
            # The PCI listing the other probes share (one walk of /sys/bus/pci, not two).
            return [d for d in self.pci_devices() if d.is_gpu] or pci.gpus(self.fs)

        return self.probe("gpus", find)

    def modules(self) -> set[str]:
        """Loaded kernel modules."""
        from ..probe import modules

        return self.probe("modules", lambda: modules.loaded(self.fs))

    def nvidia_smi(self):
        """The GPUs as `nvidia-smi -q -x` reports them (probe.nvsmi.SmiReport).
        Raises CommandError (missing, hung, failed) or SmiError (garbage); a
        failure is remembered too, so four GPU checks never wait four times."""
        from ..probe import nvsmi

        if "nvidia_smi" not in self.memo:
            try:
                self.memo["nvidia_smi"] = nvsmi.query(self)
            except Exception as exc:  # noqa: BLE001 - re-raised below, for every caller
                self.memo["nvidia_smi"] = exc
        value = self.memo["nvidia_smi"]
        if isinstance(value, Exception):
            raise value
        return value

    def state_path(self, name: str) -> str:
        """A file under the state dir for this check's memory between runs."""
        base = self.state_dir or self.config["hooks"]["state_dir"]
        return os.path.join(base, name)

    def node_key(self) -> str:
        """The node's name for state files; a node tree (--root other than /)
        gets its own key, so an example tree never mixes with the real node."""
        node = self.node
        if not node:
            node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
        node = node.replace("/", "_")
        if self.fs.root != "/":
            import hashlib

            node += "-" + hashlib.sha256(self.fs.root.encode()).hexdigest()[:8]
        return node

    # -- time and commands ---------------------------------------------------
    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def run_command(self, argv: list[str], timeout: float | None = None, check: bool = True):
        """Bounded external command; not run at fast level (the prolog).
        On a node tree (root other than /) a recorded output of the same
        command line under /var/lib/slurmqual-recorded/ stands in for the
        tool (see nodetree.record_output); without one the tool is missing
        from that node (CommandError "command not found"): the host's own
        tool would judge the host, not the tree."""
        from ..command import CommandError, run

        if self.level == "fast":
            raise CommandError(f"{argv[0]}: external commands are not run at level {self.level}")
        if self.fs.root != "/":
            recorded = recorded_output(self.fs, argv, check)
            if recorded is None:
                raise CommandError(f"{argv[0]}: command not found in node tree {self.fs.root} (no recorded "
                                   f"output {RECORDED_DIR}/{recorded_name(argv)}.out; the host's tool is never run)")
            return recorded
        limit = min(timeout if timeout is not None else self.command_timeout, self.time_left())
        if limit <= 0:
            raise CommandError(f"{argv[0]}: hook deadline reached, not started")
        return run(argv, limit, check=check)


RECORDED_DIR = "/var/lib/slurmqual-recorded"


def recorded_name(argv: list[str]) -> str:
    """File name of a recorded command line: 'nvidia-smi -q -x' -> 'nvidia-smi_-q_-x'."""
    return "_".join(a.replace("/", "%") for a in argv)


def recorded_output(fs: FsRoot, argv: list[str], check: bool = True):
    """A node tree's recorded output of argv: <name>.out (stdout), optional
    <name>.rc (exit status; non-zero raises like the real failure would) and
    <name>.hang (the tool hangs: raises a timeout). None when not recorded."""
    from ..command import CommandError, CommandOutput

    base = f"{RECORDED_DIR}/{recorded_name(argv)}"
    if fs.exists(f"{base}.hang"):
        raise CommandError(f"{' '.join(argv[:3])}: timed out (recorded hang)")
    stdout = fs.read_or(f"{base}.out")
    if stdout is None:
        return None
    rc = int((fs.read_or(f"{base}.rc") or "0").strip() or 0)
    if rc and check:
        raise CommandError(f"{' '.join(argv[:3])}: exit {rc}: {stdout.strip().splitlines()[-1:] or ['']}")
    return CommandOutput(list(argv), rc, stdout, "", 0.0)


def select(names: list[str] | None, level: str) -> list[CheckSpec]:
    """Checks to run: the named ones (in registry order) limited to the level.
    `fast` runs fast checks; `standard` adds standard ones; `slow` runs all.
    Named checks are imported alone (the prolog's path); unknown names are ignored."""
    allowed = set(LEVELS[:LEVELS.index(level) + 1])
    if names is None:
        return [s for s in registry().values() if s.level in allowed]
    if "REGISTRY" in globals():
        known = REGISTRY
    else:
        modules = set(_module_names())
        known = _ordered(s for s in (_spec_of(n) for n in set(names) if n in modules) if s is not None)
    return [s for n, s in known.items() if n in names and s.level in allowed]


def run_one(spec: CheckSpec, ctx: Context) -> CheckResult:
    """Run one check; an exception inside it becomes `error`, never a crash."""
    from ..fsroot import FsError

    try:
        module = _check_module(spec.name)
        result = module.run(ctx)
    except FsError as exc:
        result = CheckResult(spec.name, Status.ERROR, f"cannot read {exc.path}: {exc.reason}")
    except Exception as exc:  # noqa: BLE001 - a check bug must not take the others down
        result = CheckResult(spec.name, Status.ERROR, f"internal error in check: {type(exc).__name__}: {exc}")
        result.devices = []
        ctx.memo.setdefault("_tracebacks", []).append((spec.name, _format_tb()))
    if not result.hint and result.status in (Status.FAIL, Status.WARN, Status.ERROR):
        result.hint = ERROR_HINT if result.status is Status.ERROR else spec.hint
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
