"""Loading pyslurm (the Python binding to libslurm) safely, and telling
whether its libslurm matches the cluster.

pyslurm exists for one Slurm release at a time (25.11.x on PyPI), is built
against that release's headers and links libslurmfull.so by rpath; it must
talk to a slurmctld of the same release. Two ways it can go wrong, both
turned into a SlurmError that names the versions and the fix, never a crash:

- the library is missing or replaced (an ImportError at `import pyslurm`);
- libslurm exits the process (`fatal: Could not establish a configuration
  source`) when it finds no slurm.conf. So the first use in a process runs
  a probe in a child Python (import, slurm_init, the controller's version);
  only after the probe passed is pyslurm imported here, with its automatic
  init switched off and slurm_init given slurmqual's slurm.conf.

Nothing here imports pyslurm at module import: the hooks never load it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .adapter import SlurmError

BUILD_NOTE = ("build pyslurm against the cluster's Slurm: SLURM_LIB_DIR=PREFIX/lib "
              "SLURM_INCLUDE_DIR=PREFIX/include pip install 'slurmqual[pyslurm]' (pyslurm {release}.x exists "
              "for Slurm {release} only; docs/SLURM_VERSIONS.md), or set [slurm] adapter = \"cli\"")

# Run in a child Python: whatever libslurm does (fatal() exits), this process goes on.
_PROBE = r"""
import json, os, sys
os.environ["PYSLURM_DISABLE_AUTO_INIT"] = "1"
out = {}
try:
    import pyslurm
except Exception as exc:
    print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
out["pyslurm"] = pyslurm.__version__
out["libslurm"] = ".".join(str(v) for v in pyslurm.slurm_api_version())
print(json.dumps(out), flush=True)
pyslurm.slurm_init(sys.argv[1] or None)
try:
    out["controller"] = pyslurm.slurmctld.Config.load().version
except Exception as exc:
    out["controller_error"] = f"{exc}"
print(json.dumps(out), flush=True)
"""


def installed_version() -> str | None:
    """pyslurm's version from its metadata (no import), or None when not installed."""
    from importlib import metadata

    try:
        return metadata.version("pyslurm")
    except metadata.PackageNotFoundError:
        return None


def release(version: str) -> str:
    """"25.11.7" -> "25.11"."""
    return ".".join(version.split(".")[:2])


def probe(slurm_conf: str | None, timeout: float = 30.0) -> dict:
    """What a child Python finds: {"pyslurm", "libslurm", "controller"} or
    the error of the step that failed ("import_error", "init_error",
    "controller_error"). Never raises for pyslurm's sake."""
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_JWT", "SLURMRESTD_TOKEN")}
    if slurm_conf:
        env["SLURM_CONF"] = slurm_conf
    elif not env.get("SLURM_CONF"):
        env.pop("SLURM_CONF", None)   # an empty SLURM_CONF (slurmd's hooks) breaks libslurm
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE, slurm_conf or ""], env=env, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        said = " ".join(ln.strip() for ln in said.splitlines() if ln.strip())[-300:]
        return {"controller_error": f"no answer in {timeout:.0f} s" + (f" ({said})" if said else "")}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    try:
        found = json.loads(lines[-1]) if lines else {}
    except ValueError:
        found = {}
    if "import_error" in found or "controller" in found or "controller_error" in found:
        return found
    err = " ".join(ln.strip() for ln in p.stderr.splitlines() if ln.strip())[-300:]
    found["init_error"] = err or f"exit status {p.returncode}"
    return found


def mismatch(found: dict) -> str | None:
    """Why pyslurm cannot serve this cluster (a message naming both versions
    and the fix), or None when its libslurm is the controller's release."""
    wanted = installed_version() or "?"
    if "import_error" in found:
        return (f"pyslurm {wanted} cannot load libslurm: {found['import_error']}; pyslurm needs the libslurmfull.so "
                f"of Slurm {release(wanted)} it was built against at run time: "
                + BUILD_NOTE.format(release=release(wanted)))
    lib = found.get("libslurm", "?")
    if "init_error" in found:
        return (f"pyslurm {found.get('pyslurm', wanted)} (libslurm {lib}) could not start: {found['init_error']} "
                "(check the slurm.conf it read: [slurm] slurm_conf)")
    if "controller_error" in found:
        return (f"pyslurm {found.get('pyslurm', wanted)} (libslurm {lib}) cannot read the controller's version: "
                f"{found['controller_error']}")
    ctl = found.get("controller", "?")
    if release(lib) != release(ctl):
        return (f"pyslurm {found.get('pyslurm', wanted)} is built against libslurm {lib}, but this cluster's "
                f"slurmctld is Slurm {ctl}: " + BUILD_NOTE.format(release=release(ctl)))
    return None


def conf_problem(conf: str | None) -> str | None:
    """Why libslurm cannot read slurm.conf `conf`, or None (None: its built-in path, checked by the probe)."""
    if conf and not os.path.isfile(conf):
        return (f"pyslurm: slurm.conf {conf} not found (libslurm needs it: set [slurm] slurm_conf or SLURM_CONF "
                "to the cluster's slurm.conf)")
    if conf and not os.access(conf, os.R_OK):
        return f"pyslurm: slurm.conf {conf} not readable by this user"
    return None


_state: dict = {"module": None, "conf": None}


def load(slurm_conf: str | None, cluster_version=None):
    """The pyslurm module, initialised for `slurm_conf`, after a passing
    probe; SlurmError (the versions and the fix) otherwise. `cluster_version`:
    a callable giving the cluster's Slurm version another way (`scontrol -V`)
    for the error, when the controller does not speak libslurm's protocol.
    libslurm holds one configuration per process: a different slurm_conf
    re-initialises it."""
    conf = slurm_conf or os.environ.get("SLURM_CONF") or None
    if _state["module"] is not None and _state["conf"] == conf:
        return _state["module"]
    if installed_version() is None:
        raise SlurmError("[slurm] adapter = \"pyslurm\" but pyslurm is not installed: "
                         + BUILD_NOTE.format(release="25.11"))
    problem = conf_problem(conf)
    if problem:   # libslurm would retry a missing file for 60 s, then exit the process
        raise SlurmError(problem)
    found = probe(conf)
    if "controller_error" in found and cluster_version is not None:
        try:
            found = dict(found, controller=cluster_version(), controller_error_detail=found.pop("controller_error"))
        except Exception:  # noqa: BLE001 - the RPC's own error is then the message
            pass
    problem = mismatch(found)
    if problem:
        raise SlurmError(problem)
    os.environ["PYSLURM_DISABLE_AUTO_INIT"] = "1"
    try:
        import pyslurm
    except ImportError as exc:   # the probe passed a moment ago: the library changed under us
        raise SlurmError(mismatch({"import_error": f"{type(exc).__name__}: {exc}"})) from None
    if _state["module"] is not None:
        pyslurm.slurm_fini()
    pyslurm.slurm_init(conf)
    _state.update(module=pyslurm, conf=conf)
    return pyslurm
