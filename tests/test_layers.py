"""Dependencies run one way: cli -> commands -> flows -> engine -> core.

Every module of the package is placed in a layer below, by name; a module
may import its own layer or lower ones, never a higher one, and no chain of
imports may come back to where it started. Imports are read with `ast`, the
lazy ones inside functions included (they run too). `if TYPE_CHECKING:`
imports never run, so they may reach up a layer (a check's type names the
config above it), but they count for circles: a module that needs another's
types while that one imports it is one module in two files.

Inside the burn-in the stages run one way too (docs/ARCHITECTURE.md):
records <- read <- judge <- results <- run; there, typed imports count as well.
A new module must be placed here."""

from __future__ import annotations

import ast
import os

import pytest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "slurmqual")

CORE, ENGINE, FLOWS, COMMANDS, CLI = range(5)
LAYER_NAMES = ["core", "engine", "flows", "commands", "cli"]

# Exact module names first, then package prefixes ("slurmqual.checks." holds
# every check module). The longest matching entry wins.
LAYERS: dict[str, int] = {
    # core: no knowledge of checks, Slurm or flows
    "slurmqual": CORE, "slurmqual.atomic": CORE, "slurmqual.command": CORE, "slurmqual.fsroot": CORE,
    "slurmqual.leanjson": CORE, "slurmqual.names": CORE, "slurmqual.records": CORE, "slurmqual.result": CORE,
    "slurmqual.security": CORE, "slurmqual.data": CORE, "slurmqual.hooklog": CORE,
    # engine: checks and probes, config, Slurm access, the stores and their formats, judging
    "slurmqual.checks": ENGINE, "slurmqual.checks.": ENGINE, "slurmqual.probe": ENGINE, "slurmqual.probe.": ENGINE,
    "slurmqual.slurm": ENGINE, "slurmqual.slurm.": ENGINE,
    "slurmqual.config": ENGINE, "slurmqual.config_schema": ENGINE, "slurmqual.hints": ENGINE,
    "slurmqual.evaluation": ENGINE, "slurmqual.nodestate": ENGINE, "slurmqual.nodefacts": ENGINE,
    "slurmqual.policy": ENGINE, "slurmqual.qualification": ENGINE, "slurmqual.inventory": ENGINE,
    "slurmqual.events": ENGINE, "slurmqual.counterwindow": ENGINE, "slurmqual.metrics": ENGINE,
    "slurmqual.nodetree": ENGINE, "slurmqual.testing": ENGINE, "slurmqual.configproblem": ENGINE,
    "slurmqual.slurmconf": ENGINE, "slurmqual.remediation": ENGINE, "slurmqual.gpureset": ENGINE, "slurmqual.hwid": ENGINE, "slurmqual.rma": ENGINE,
    "slurmqual.rawevidence": ENGINE, "slurmqual.siteinit": ENGINE,
    # the burn-in's records, readers, judging and results (its stages: BURNIN_STAGES); its run is a flow
    "slurmqual.burnin": ENGINE, "slurmqual.burnin.records": ENGINE, "slurmqual.burnin.read": ENGINE,
    "slurmqual.burnin.read.": ENGINE, "slurmqual.burnin.judge": ENGINE, "slurmqual.burnin.judge.": ENGINE,
    "slurmqual.burnin.results": ENGINE, "slurmqual.burnin.results.": ENGINE,
    "slurmqual.preflight": ENGINE, "slurmqual.preflight.judge": ENGINE, "slurmqual.preflight.choose": ENGINE,
    # flows: what runs on a node or drives the cluster
    "slurmqual.hooks": FLOWS, "slurmqual.requalify": FLOWS,
    "slurmqual.burnin.run": FLOWS, "slurmqual.burnin.run.": FLOWS,   # runner, task, gputask, retest
    "slurmqual.nodeinstall": FLOWS, "slurmqual.nodeinstall.": FLOWS,   # admin: install and --check
    "slurmqual.preflight.flow": FLOWS,   # a job's own preflight (srun steps, drains)
    # commands: one module per subcommand (argument parsing, printing)
    "slurmqual.commands": COMMANDS, "slurmqual.commands.": COMMANDS,
    # entry points
    "slurmqual.cli": CLI, "slurmqual.__main__": CLI, "slurmqual.hookscripts": CLI,
}

# The burn-in's stages, lowest first: a burn-in module imports its own stage or
# lower ones (typed imports included). The shared records sit below every
# stage; reading tool output needs nothing else; judging (the fabric model,
# verdicts and the retest plan) reads records only; results (run directory,
# store, report) show judgements; a run drives them all.
RECORDS, READ, JUDGE, RESULTS, RUN = range(5)
STAGE_NAMES = ["records", "read", "judge", "results", "run"]
BURNIN_STAGES: dict[str, int] = {
    "slurmqual.burnin": RECORDS, "slurmqual.burnin.records": RECORDS,
    "slurmqual.burnin.read": READ, "slurmqual.burnin.judge": JUDGE,
    "slurmqual.burnin.results": RESULTS, "slurmqual.burnin.run": RUN,
}


def modules() -> dict[str, str]:
    """Module name -> file, for every .py under the package."""
    out = {}
    for d, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


def layer(module: str) -> int | None:
    if module in LAYERS:
        return LAYERS[module]
    prefixes = [p for p in LAYERS if p.endswith(".") and module.startswith(p)]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def stage(module: str) -> int | None:
    """A burn-in module's stage: its own entry, else its subpackage's."""
    while module not in BURNIN_STAGES and "." in module:
        module = module.rpartition(".")[0]
    return BURNIN_STAGES.get(module)


def _runtime_nodes(tree: ast.AST, typed: bool = False):
    """Every node except those under `if TYPE_CHECKING:` (unless `typed`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if not typed and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(module: str, path: str, known: set[str], typed: bool = False) -> set[str]:
    """Package modules that `module` imports (at import time or lazily; with
    `typed`, also under `if TYPE_CHECKING:`)."""
    tree = ast.parse(open(path).read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(tree, typed):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in known and m != module}


def graph(typed: bool = False) -> dict[str, set[str]]:
    mods = modules()
    return {m: imports_of(m, p, set(mods), typed) for m, p in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    missing = sorted(m for m in modules() if layer(m) is None)
    assert not missing, f"place these modules in LAYERS: {missing}"


def test_no_import_goes_up_a_layer():
    up = [f"{m} ({LAYER_NAMES[layer(m)]}) imports {t} ({LAYER_NAMES[layer(t)]})"
          for m, targets in sorted(graph().items()) for t in sorted(targets)
          if layer(m) is not None and layer(t) is not None and layer(t) > layer(m)]
    assert not up, "\n".join(up)


def test_no_import_circle():
    assert cycles(graph()) == []


# Typed circles known and not yet undone: a check's type names the config whose
# schema lists the checks (checks/__init__.py). No other may appear.
def test_no_import_circle_with_typed_imports():
    """`if TYPE_CHECKING:` imports included: no two modules need each other."""
    assert cycles(graph(typed=True)) == []


def test_every_burnin_module_has_a_stage():
    missing = sorted(m for m in modules() if m.startswith("slurmqual.burnin") and stage(m) is None)
    assert not missing, f"place these modules in BURNIN_STAGES: {missing}"


def test_no_burnin_import_goes_up_a_stage():
    """records <- read <- judge <- results <- run, typed imports included."""
    up = [f"{m} ({STAGE_NAMES[stage(m)]}) imports {t} ({STAGE_NAMES[stage(t)]})"
          for m, targets in sorted(graph(typed=True).items()) if stage(m) is not None
          for t in sorted(targets) if stage(t) is not None and stage(t) > stage(m)]
    assert not up, "\n".join(up)


@pytest.mark.parametrize("source,finds", [
    ("def f():\n    from .hooks import run\n", {"slurmqual.hooks"}),             # lazy imports count
    ("from . import hooks\n", {"slurmqual.hooks"}),
    ("from .slurm.schema import nodes\n", {"slurmqual.slurm.schema.nodes"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .hooks import run\n", set()),
])
def test_the_analysis_sees_every_kind_of_import(tmp_path, source, finds):
    path = tmp_path / "m.py"
    path.write_text(source)
    known = {"slurmqual", "slurmqual.hooks", "slurmqual.slurm", "slurmqual.slurm.schema",
             "slurmqual.slurm.schema.nodes"}
    assert imports_of("slurmqual.m", str(path), known) == finds


def test_the_typed_analysis_sees_type_checking_imports(tmp_path):
    """The circle pairs.py/components.py <-> analyze.py once hid here."""
    path = tmp_path / "pairs.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .analyze import Params\n"
                    "else:\n    from . import noise\n")
    known = {"slurmqual.burnin.judge.analyze", "slurmqual.burnin.judge.noise"}
    assert imports_of("slurmqual.burnin.judge.pairs", str(path), known) == {"slurmqual.burnin.judge.noise"}
    assert imports_of("slurmqual.burnin.judge.pairs", str(path), known, typed=True) == known


def test_the_analysis_finds_a_circle_and_an_upward_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert layer("slurmqual.checks.xid") == ENGINE and layer("slurmqual.commands.install") == COMMANDS
    assert layer("slurmqual.burnin.run.runner") == FLOWS and layer("slurmqual.burnin.judge.analyze") == ENGINE
    assert stage("slurmqual.burnin.records") == RECORDS and stage("slurmqual.burnin.read.parse") == READ
    assert stage("slurmqual.burnin.judge.pairs") == JUDGE and stage("slurmqual.burnin.results.store") == RESULTS
    assert stage("slurmqual.burnin.run.task") == RUN and stage("slurmqual.checks.xid") is None


def test_only_rundir_names_the_run_directory_files():
    """plan.json, jobs.json, analysis.json and results/task-N.json are named
    (so opened) only by burnin/results/rundir.py, their one reader and writer."""
    names = ("plan.json", "jobs.json", "analysis.json", "task-*.json", "results", "logs")
    offenders = []
    for module, path in modules().items():
        if module == "slurmqual.burnin.results.rundir":
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Call) and "join" in ast.unparse(node.func) and any(
                    isinstance(a, ast.Constant) and a.value in names for a in node.args):
                offenders.append(f"{module}:{node.lineno}")
    assert offenders == []
