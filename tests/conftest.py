"""Shared fixtures. Real tool outputs live in ../shared/samples (not copied here)."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = pathlib.Path(os.environ.get("SLURMQUAL_SAMPLES", REPO.parent / "shared" / "samples"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Never read or write the real config cache from tests."""
    monkeypatch.setenv("SLURMQUAL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    # ...nor the built-in default state dir and log file, where a hook records
    # a site config it cannot use (configproblem.py): tests point them at nothing.
    from slurmqual import configproblem

    # Hooks the tests start as processes (as root) get the same through the
    # environment: they must never write into this machine's own /var.
    nowhere = tmp_path_factory.mktemp("defaults")
    state, log = str(nowhere / "absent-state"), str(nowhere / "absent-log" / "slurmqual.log")
    monkeypatch.setattr(configproblem, "RECORD_STATE_DIR", state)
    monkeypatch.setattr(configproblem, "RECORD_LOG_FILE", log)
    monkeypatch.setenv("SLURMQUAL_PROBLEM_STATE_DIR", state)
    monkeypatch.setenv("SLURMQUAL_PROBLEM_LOG_FILE", log)


T0 = 1_800_000_000.0  # the `clock` fixture's start: a fixed "now" for windowed counters


@pytest.fixture
def clock(monkeypatch):
    """time.time() frozen at T0; tests move it with clock[0] = T0 + seconds."""
    import time

    now = [T0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    return now


@pytest.fixture
def samples() -> pathlib.Path:
    """Directory of real tool outputs; skip clearly when it is absent."""
    if not SAMPLES.is_dir():
        pytest.skip(f"real tool samples not found at {SAMPLES} (set SLURMQUAL_SAMPLES or check out shared/ beside the repo)")
    return SAMPLES


@pytest.fixture
def real_logrotate():
    """`slurmqual install` with the default root writes this machine's real
    /etc/logrotate.d/slurmqual (the tests give every other path). Tests doing
    that at once (xdist workers, or two checkouts' suites) rewrite it with their
    own log paths and install then fails to converge: one at a time, and what
    was there before is put back."""
    import fcntl

    path = "/etc/logrotate.d/slurmqual"
    with open("/run/lock/slurmqual-test-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            before = pathlib.Path(path).read_bytes()
        except FileNotFoundError:
            before = None
        try:
            yield
        finally:
            if before is not None:
                pathlib.Path(path).write_bytes(before)
            elif os.path.exists(path):
                os.unlink(path)


# -- the real-Slurm version matrix --------------------------------------------
# Every test that uses a module's real `cluster` fixture (tests marked `slurm`)
# runs once per Slurm version: 22.05 (this machine's Debian 12 packages), 24.11
# (a Debian trixie chroot) and the newest (a Debian sid chroot); see
# tests/slurmcluster.py and tests/chroot.py. SLURMQUAL_SLURM_VERSIONS picks
# versions, e.g. `SLURMQUAL_SLURM_VERSIONS=22.05` for a quick run.
import concurrent.futures  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
import chroot  # noqa: E402
import leakcheck  # noqa: E402
import slurmbuild  # noqa: E402
import slurmcluster  # noqa: E402


def slurm_versions() -> list[str]:
    raw = os.environ.get("SLURMQUAL_SLURM_VERSIONS", "").strip()
    if not raw:
        return list(slurmcluster.VERSIONS)
    wanted = [v.strip() for v in raw.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in slurmcluster.VERSIONS]
    if unknown:
        raise pytest.UsageError(f"SLURMQUAL_SLURM_VERSIONS: unknown {', '.join(unknown)} "
                                f"(known: {', '.join(slurmcluster.VERSIONS)})")
    return wanted


def once_version(versions: list[str]) -> str:
    """The one version a `slurm_once` module runs on: the host's (no chroot,
    no build: the cheapest cluster) when selected, else the first selected."""
    return slurmcluster.HOST_VERSION if slurmcluster.HOST_VERSION in versions else versions[0]


def on_versions(selected: list[str], named: tuple[str, ...]) -> list[str]:
    """The versions a `slurm_on(...)` module runs on: those it names that are
    selected; where none is, once, as a `slurm_once` module (a run of 25.11
    alone still runs it)."""
    chosen = [v for v in selected if v in named]
    return chosen or [once_version(selected)]


def pytest_generate_tests(metafunc):
    if "cluster" in metafunc.fixturenames and metafunc.definition.get_closest_marker("slurm"):
        versions = slurm_versions()
        # slurm_once: what the module adds is slurmqual's own logic; its Slurm-facing
        # part (healthcheck drain/resume, burn-in job chains) is tested on every
        # version by other modules, so once is enough (docs/SLURM_VERSIONS.md).
        # slurm_on(...): the versions an issue names for it (the rest of the matrix once).
        named = metafunc.definition.get_closest_marker("slurm_on")
        if named:
            versions = on_versions(versions, tuple(named.args))
        elif metafunc.definition.get_closest_marker("slurm_once"):
            versions = [once_version(versions)]
        metafunc.parametrize("cluster", versions, ids=versions, indirect=True, scope="module")


_chroots: dict[str, str | Exception] = {}  # version -> chroot path or why unavailable; one build per session


def _chroot_for(version: str, session) -> str:
    """The session's chroot for `version`: on first need, every selected
    chroot version is built (or taken from the cache) in parallel, once."""
    if version not in _chroots:
        needed = sorted({item.callspec.params["cluster"] for item in session.items
                         if hasattr(item, "callspec") and item.callspec.params.get("cluster") in chroot.SUITES}
                        | {version})
        needed = [v for v in needed if v not in _chroots]

        def build(v: str):
            try:
                return chroot.ensure_chroot(chroot.SUITES[v])
            except chroot.ChrootUnavailable as exc:
                return exc

        with concurrent.futures.ThreadPoolExecutor(len(needed)) as pool:
            for v, result in zip(needed, pool.map(build, needed)):
                _chroots[v] = result
    result = _chroots[version]
    if isinstance(result, Exception):
        pytest.skip(f"Slurm {version} (Debian {chroot.SUITES[version]} chroot) unavailable: {result}")
    return result


# -- side by side (pytest-xdist: scripts/test.sh runs `-n N --dist loadgroup`) --
# Each module's real cluster of one Slurm version is one xdist group: its tests
# run in order on one worker, against that worker's own cluster (own ports,
# state, munge and, for chroot versions, own mount namespace), while other
# workers run other modules' clusters, of any version, and the unit tests.
# A unit-test module with a module-scoped fixture (a wheel built once) is one
# group too; every other unit test goes to whichever worker is free.


def _version(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("cluster") if callspec else None


def xdist_group(item) -> str | None:
    """The xdist group `item` runs in, or None (any worker, alone)."""
    version = _version(item)
    if version:
        return f"slurm-{version}-{item.module.__name__}"
    defs = getattr(item, "_fixtureinfo", None)
    for fixturedefs in (defs.name2fixturedefs.values() if defs else ()):
        if any(d.scope in ("module", "package") and d.baseid for d in fixturedefs):
            return f"module-{item.module.__name__}"
    return None


def _needs_build(version: str) -> bool:
    """A version whose daemons are still to be built while the tests run
    (tests/slurmbuild.py, started in the background by scripts/test.sh); not
    the host's packages, not a chroot (built before pytest), not a cached build."""
    if version == slurmcluster.HOST_VERSION or version in chroot.SUITES:
        return False
    try:
        return not slurmbuild._ready(slurmbuild.prefix(version), version)
    except Exception:  # unknown or unavailable: its tests skip, wherever they are queued
        return True


def weight(item) -> int:
    """What a test counts for when its group is queued: 1, or the module's
    `slurm_weight(n)` (a module whose few tests each run a long job chain on
    a large cluster: queued by its tests alone it would start last, with
    nothing left to run beside it)."""
    mark = item.get_closest_marker("slurm_weight")
    return int(mark.args[0]) if mark and mark.args else 1


def _rank(item, sizes: dict[str, int]) -> tuple:
    """Order of the xdist work queue (--no-loadscope-reorder keeps it): unit
    modules with a module fixture, then the real clusters, largest module
    first (they are the long ones; size: its tests' weights), then the
    unit tests, then the versions still to be built, so that their build
    overlaps everything else."""
    group = xdist_group(item)
    version = _version(item)
    if version and _needs_build(version):
        return (2, -sizes[group])
    if version:
        return (0, -sizes[group])
    # A unit module with a module-scoped fixture builds something (wheels, a venv
    # for the device check: minutes at times): first, so it never runs last alone.
    return (-1, -sizes[group]) if group else (1, 0)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Mark the groups before any hook runs (xdist's worker turns the marks into
    its scopes in its own, tryfirst, pytest_collection_modifyitems: a wrapper
    comes first); only under xdist (without it, an unknown mark)."""
    if _loadgroup(config):
        for item in items:
            group = xdist_group(item)
            if group:
                item.add_marker(pytest.mark.xdist_group(group))
    return (yield)


def xdist_scope(nodeid: str) -> str:
    """The work unit of `nodeid` for xdist's controller, which sees only node
    ids: a real-Slurm module's tests of one version (`tests/test_x.py@24.11`),
    else the whole module (its module fixtures set up once)."""
    path, _, rest = nodeid.partition("::")
    if rest.endswith("]") and "[" in rest:
        last = rest[rest.rindex("[") + 1:-1].split("-")[-1]
        if last in slurmcluster.VERSIONS:
            return f"{path}@{last}"
    return path


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` scheduled by xdist_scope. xdist's own loadgroup puts
    the group into the node id (item._nodeid), which pytest 9 no longer reads:
    every test went to any worker, a module's order-dependent tests apart, one
    cluster per worker. The marks stay for an xdist that works again."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return ScopeScheduling(config, log)


def _loadgroup(config) -> bool:
    """Running under `--dist loadgroup`: the controller has option.dist, a
    worker option.loadgroup (its option.dist is "no")."""
    return bool(getattr(config.option, "loadgroup", False)) or getattr(config.option, "dist", "no") == "loadgroup"


class _QueueOrder:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        """After pytest's own reordering (each module's cluster contiguous), a
        stable sort by _rank: the same order on every worker."""
        if not _loadgroup(config):
            return
        sizes: dict[str, int] = {}
        for item in items:
            group = xdist_group(item)
            if group:
                sizes[group] = sizes.get(group, 0) + weight(item)
        items[:] = sorted(items, key=lambda item: _rank(item, sizes))


def pytest_configure(config):
    config.pluginmanager.register(_QueueOrder(), "slurmqual-queue-order")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the module's `cluster` fixture starts: pick its Slurm version
    (slurm_fixtures.start_cluster builds Cluster() with the default) and
    make sure that version's chroot exists, or skip saying why."""
    version = getattr(item, "callspec", None) and item.callspec.params.get("cluster")
    if not version:
        return
    slurmcluster.DEFAULT_VERSION = version
    if version in chroot.SUITES:
        _chroot_for(version, item.session)
    if version in slurmbuild.RELEASES:
        _built_for(version)


_built: dict[str, str | Exception] = {}  # version -> install prefix or why unavailable


def _built_for(version: str) -> str:
    """The prefix of `version` built from ../shared/sources (tests/slurmbuild.py;
    waits for a build scripts/test.sh started), or skip saying why (a plain
    clone has no source archive)."""
    if version not in _built:
        try:
            _built[version] = slurmbuild.ensure_slurm(version)
        except slurmbuild.SlurmBuildUnavailable as exc:
            _built[version] = exc
    result = _built[version]
    if isinstance(result, Exception):
        pytest.skip(f"Slurm {version} (built from source) unavailable: {result}")
    return result


@pytest.fixture(scope="session")
def pyslurm_installed() -> str:
    """pyslurm 25.11.2 built against the 25.11 build (tests/slurmbuild.py; a
    wheel cached beside it) and installed into this venv, or skip saying why."""
    try:
        return slurmbuild.install_pyslurm(sys.executable, "25.11")
    except slurmbuild.SlurmBuildUnavailable as exc:
        pytest.skip(f"pyslurm unavailable: {exc}")


# -- nothing the suite runs writes where a real install keeps its data --------------------------
# The machine's /var/lib/slurmqual and /var/log/slurmqual, and those inside the
# cached Debian chroots, belong to a real install: a test that wrote there once
# leaked a refused-config record from one test into another's `install --check`.
# Every file there newer than the session's start fails the run, named.
_SESSION_START = [0.0]


def pytest_sessionstart(session):
    _SESSION_START[0] = time.time() - 1


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # xdist workers: the controller checks once
        return
    leaked = leakcheck.written_since(_SESSION_START[0], leakcheck.install_dirs(chroot.cache_dir()))
    if leaked:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "tests wrote into a real install's directories (isolate them):\n  " + "\n  ".join(leaked[:20])
        if tr:
            tr.ensure_newline()
            tr.write_line(text, red=True)
        else:
            print(text)
        session.exitstatus = 1
