#!/usr/bin/env python3
"""Cached Debian chroots that hold another Slurm release, for the real-Slurm
version matrix (and any test that needs a clean Debian system).

The machine runs Debian 12 (Slurm 22.05). Newer Slurm comes from newer
Debian suites, unpacked with debootstrap into a chroot: ``trixie`` (Debian 13,
Slurm 24.11) and ``sid`` (unstable, the newest Slurm). Each chroot also holds
a venv with slurmqual's dependencies (from PyPI) for the chroot's own Python,
so the hooks slurmd runs inside it are the real thing on that Python.

Public API (stable: tests/slurmcluster.py, tests/conftest.py and the
clean-node install test use it):

``SUITES``
    Slurm version label -> Debian suite: ``{"24.11": "trixie", "newest": "sid"}``.
``ensure_chroot(suite) -> str``
    Path of a ready chroot for ``suite``, built and cached on first use
    (a few minutes; concurrent callers wait on a lock and share one build).
    Raises ``ChrootUnavailable`` (say why; tests skip on it) when the packages
    cannot be fetched or the machine cannot build chroots (not root, no
    debootstrap).
``mounted(root)``
    Context manager: ``proc`` mounted and ``/dev``, ``/sys`` bound into
    ``root`` in the host's mount namespace; unmounted on exit (also when the
    body raises, and at interpreter exit), unless another process is still
    inside ``mounted`` for the same root (shared, flock-counted).
``run_in(root, argv, binds=(), **kw)``
    Run ``argv`` chrooted into ``root`` in a private mount namespace with
    proc/dev/sys and ``binds`` (host paths, bound at the same path) mounted;
    the mounts die with the command, so nothing is ever left mounted.
``venv_python(root)``
    Path, inside the chroot, of the Python that has slurmqual's dependencies
    (put the checkout on PYTHONPATH to import slurmqual itself).
``python_version(root) -> str``
    The chroot's Python version, e.g. "3.13".
``VENV``
    Where (inside) that venv is.
``READY_MARKER``
    File present inside every chroot built here (``/etc/slurmqual-chroot``):
    a script can tell whether it runs inside one.

Cache: ``$SLURMQUAL_CHROOT_CACHE`` or /var/cache/slurmqual-tests/chroots,
one directory per suite. A build writes ``.slurmqual-ready`` (the build's
fingerprint: suite, package lists, Python dependencies) only when it is
complete, so an interrupted build is redone, and a changed package set or
dependency list rebuilds. Mirror: ``$SLURMQUAL_DEBIAN_MIRROR``, else the
``URIs:`` of the machine's apt sources (never a hard-coded host).

    python3 tests/chroot.py build trixie sid     # build/refresh the cache, print timings
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = {"24.11": "trixie", "newest": "sid"}
# debootstrap's resolver sees only these; the rest comes with apt afterwards.
BASE_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge", "python3", "python3-venv", "ca-certificates")
APT_PACKAGES = ("slurmrestd", "slurm-wlm-jwt-plugin")
VENV = "/opt/slurmqual-venv"
READY_MARKER = "/etc/slurmqual-chroot"
_READY = ".slurmqual-ready"
_FORMAT = 1  # bump when the build steps change in a way the fingerprint does not see
_APT_OPTS = ("-o", "Acquire::Check-Valid-Until=false", "-o", "Acquire::Retries=3", "-o", "DPkg::Lock::Timeout=120")


class ChrootUnavailable(RuntimeError):
    """A chroot cannot be had on this machine (packages not fetchable, not
    root, no debootstrap): the message says which; tests skip on it."""


def cache_dir() -> str:
    return os.environ.get("SLURMQUAL_CHROOT_CACHE", "/var/cache/slurmqual-tests/chroots")


def mirror() -> str:
    """Debian mirror: $SLURMQUAL_DEBIAN_MIRROR, else the first `URIs:` of the
    machine's deb822 apt sources (or a `deb` line of sources.list)."""
    env = os.environ.get("SLURMQUAL_DEBIAN_MIRROR")
    if env:
        return env
    candidates = ["/etc/apt/sources.list.d/debian.sources"]
    d = "/etc/apt/sources.list.d"
    if os.path.isdir(d):
        candidates += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".sources"))
    for path in candidates:
        try:
            text = open(path).read()
        except OSError:
            continue
        for uri in re.findall(r"^URIs:\s*(\S+)", text, re.M):
            if "security" not in uri:
                return uri
    for path in ["/etc/apt/sources.list"]:
        try:
            for line in open(path):
                m = re.match(r"deb\s+(?:\[[^]]*\]\s+)?(\S+)", line)
                if m and "security" not in m.group(1):
                    return m.group(1)
        except OSError:
            pass
    raise ChrootUnavailable("no Debian mirror: set SLURMQUAL_DEBIAN_MIRROR or add a URIs: line to "
                            "/etc/apt/sources.list.d/debian.sources")


def python_requirements() -> list[str]:
    """slurmqual's runtime dependencies, as pyproject.toml lists them."""
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def fingerprint(suite: str, python: bool = True) -> str:
    """What a build depends on: a change rebuilds (python=False: the Debian part only)."""
    data = {"format": _FORMAT, "suite": suite, "base": BASE_PACKAGES, "apt": APT_PACKAGES,
            "python": python_requirements() if python else None}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def venv_python(root: str) -> str:
    """The chroot's Python with slurmqual's dependencies (a path inside the chroot)."""
    return f"{VENV}/bin/python"


def _why_cannot_build() -> str | None:
    if os.geteuid() != 0:
        return "building a Debian chroot needs root (run the suite as root, as CI does: bash scripts/test.sh)"
    for tool in ("debootstrap", "unshare", "chroot", "mount"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            return f"{tool} missing: apt-get install debootstrap (scripts/test.sh does it as root)"
    return None


def _ready(path: str, suite: str) -> bool:
    try:
        return open(os.path.join(path, _READY)).read().strip() == fingerprint(suite)
    except OSError:
        return False


def ensure_chroot(suite: str, log=None) -> str:
    """Path of a ready chroot for `suite` (see module docstring)."""
    path = os.path.join(cache_dir(), suite)
    if _ready(path, suite):
        return path
    why = _why_cannot_build()
    if why:
        raise ChrootUnavailable(why)
    os.makedirs(cache_dir(), exist_ok=True)
    with open(os.path.join(cache_dir(), f".{suite}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per suite, whoever asks
        if not _ready(path, suite):
            _build(suite, path, log or sys.stderr)
    return path


def _step(argv: list[str], logfile: str, what: str, timeout: float, fetch: bool = True) -> None:
    with open(logfile, "a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=timeout, env=_build_env()).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    if rc != 0:
        with open(logfile) as fh:
            tail = "".join(fh.readlines()[-15:])
        msg = f"{what} failed ({rc}); log {logfile}:\n{tail}"
        raise ChrootUnavailable(msg) if fetch else RuntimeError(msg)


def _build_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(DEBIAN_FRONTEND="noninteractive", LC_ALL="C.UTF-8",
               PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return env


def _build(suite: str, path: str, log) -> None:
    """debootstrap + apt into path.build (kept across a failed venv step),
    then the venv, then rename into place."""
    tmp = path + ".build"
    if os.path.exists(path):
        _assert_unmounted(path)
        shutil.rmtree(path)
    base_fp = fingerprint(suite, python=False)
    base_marker = os.path.join(tmp, ".slurmqual-base-ready")
    try:
        base_done = open(base_marker).read().strip() == base_fp
    except OSError:
        base_done = False
    logfile = os.path.join(cache_dir(), f"{suite}.build.log")
    open(logfile, "w").close()
    t0 = time.monotonic()
    print(f"chroot: building Debian {suite} in {path} (log {logfile})", file=log, flush=True)
    if not base_done:
        if os.path.exists(tmp):
            _assert_unmounted(tmp)
            shutil.rmtree(tmp)
        _build_base(suite, tmp, logfile)
        with open(base_marker, "w") as fh:
            fh.write(base_fp + "\n")
    t1 = time.monotonic()
    _build_venv(suite, tmp, logfile)
    t2 = time.monotonic()
    with open(os.path.join(tmp, READY_MARKER.lstrip("/")), "w") as fh:
        fh.write(f"{suite}\n")
    with open(os.path.join(tmp, _READY), "w") as fh:
        fh.write(fingerprint(suite) + "\n")
    os.rename(tmp, path)
    print(f"chroot: {suite} ready in {t2 - t0:.0f}s (debootstrap+apt {t1 - t0:.0f}s, venv {t2 - t1:.0f}s)",
          file=log, flush=True)


def _build_base(suite: str, tmp: str, logfile: str) -> None:
    _step(["debootstrap", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES), suite, tmp, mirror()],
          logfile, f"debootstrap {suite} from {mirror()}", 1800)
    # Never start the packages' daemons while installing.
    with open(os.path.join(tmp, "usr/sbin/policy-rc.d"), "w") as fh:
        fh.write("#!/bin/sh\nexit 101\n")
    os.chmod(os.path.join(tmp, "usr/sbin/policy-rc.d"), 0o755)
    shutil.copy("/etc/resolv.conf", os.path.join(tmp, "etc/resolv.conf"))
    apt = ["apt-get", *_APT_OPTS]
    _step(run_in_argv(tmp, [*apt, "update", "-qq"]), logfile, f"apt-get update in {suite}", 900)
    _step(run_in_argv(tmp, [*apt, "install", "-y", "-qq", "--no-install-recommends", *APT_PACKAGES]),
          logfile, f"apt-get install {' '.join(APT_PACKAGES)} in {suite}", 1800)
    _step(run_in_argv(tmp, [*apt, "clean"]), logfile, "apt-get clean", 300, fetch=False)


def _build_venv(suite: str, tmp: str, logfile: str) -> None:
    """A venv with slurmqual's dependencies for the chroot's Python. The wheels
    are fetched on the host, with the host's pip and its settings (index,
    proxy, CA bundle: the chroot's Python may not trust a site's
    TLS-inspecting proxy), as binary wheels for the chroot's Python version,
    then installed inside without network."""
    venv = os.path.join(tmp, VENV.lstrip("/"))
    if os.path.exists(venv):
        shutil.rmtree(venv)
    pyver = python_version(tmp)
    wheels = os.path.join(cache_dir(), f"wheels-{suite}")
    if os.path.exists(wheels):
        shutil.rmtree(wheels)
    target = ["--implementation", "cp", "--python-version", pyver, "--abi", "cp" + pyver.replace(".", ""),
              "--abi", "abi3", "--abi", "none", "--platform", "manylinux_2_28_x86_64", "--platform",
              "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "--platform", "any"]
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    for req in [*python_requirements(), "pytest"]:
        try:
            _step([*pip, "download", "--only-binary=:all:", *target, "-d", wheels, req], logfile,
                  f"pip download {req} for Python {pyver}", 900)
        except ChrootUnavailable:
            # No wheel on the index (e.g. python-hostlist ships an sdist only):
            # build one here; such packages are pure Python.
            _step([*pip, "wheel", "--no-deps", "-w", wheels, req], logfile,
                  f"pip wheel {req} (no binary wheel for Python {pyver})", 900)
    _step(run_in_argv(tmp, ["python3", "-m", "venv", VENV]), logfile, f"python3 -m venv in {suite}", 300, fetch=False)
    _step(run_in_argv(tmp, [f"{VENV}/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--no-index", "--find-links", wheels, *python_requirements(), "pytest"], binds=[wheels]),
          logfile, f"pip install of slurmqual's dependencies in {suite}", 900, fetch=False)
    shutil.rmtree(wheels)


def python_version(root: str) -> str:
    """"3.13" for a chroot whose python3 is python3.13."""
    target = os.readlink(os.path.join(root, "usr/bin/python3"))
    m = re.search(r"python(\d+\.\d+)", target)
    if not m:
        raise RuntimeError(f"cannot tell the Python version of {root}/usr/bin/python3 -> {target}")
    return m.group(1)


def _assert_unmounted(path: str) -> None:
    real = os.path.realpath(path)
    for mp in _mountpoints():
        if mp == real or mp.startswith(real + "/"):
            raise RuntimeError(f"{mp} is still mounted; refusing to delete {path}")


def _mountpoints() -> list[str]:
    with open("/proc/self/mountinfo") as fh:
        return [line.split()[4].replace("\\040", " ") for line in fh]


# -- running inside a chroot --------------------------------------------------
_NS_SCRIPT = r"""set -e
R=$1; shift
n=$1; shift
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
i=0
while [ "$i" -lt "$n" ]; do
    b=$1; shift; i=$((i + 1))
    if [ -d "$b" ]; then mkdir -p "$R$b"; else [ -e "$R$b" ] || : > "$R$b"; fi
    mount --rbind "$b" "$R$b"
done
exec chroot "$R" "$@"
"""


def run_in_argv(root: str, argv: list[str], binds: tuple[str, ...] | list[str] = ()) -> list[str]:
    """argv that runs `argv` chrooted into `root` in a private mount namespace
    (proc, /dev, /sys and `binds`, directories or files, mounted there; they
    vanish with it).
    Without --fork, unshare and chroot exec: the pid is the command's."""
    binds = [os.path.abspath(b) for b in binds]
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _NS_SCRIPT, "sh",
            root, str(len(binds)), *binds, *argv]


def run_in(root: str, argv: list[str], binds=(), **kw) -> subprocess.CompletedProcess:
    return subprocess.run(run_in_argv(root, argv, binds), **kw)


_MOUNTS = ("proc", "dev", "sys")
_atexit_roots: set[str] = set()
_held: dict[str, list] = {}  # root -> [count in this process, open "users" file holding LOCK_SH]


@contextlib.contextmanager
def mounted(root: str):
    """proc, /dev and /sys mounted into `root` in the host's namespace for the
    body; unmounted after it unless another process still uses them (see
    module docstring). Prefer run_in where one command is enough."""
    root = os.path.realpath(root)
    with _mutex(root):
        if root not in _held:
            _mount_all(root)
            users = open(os.path.join(root, ".slurmqual-mount-users"), "a")
            fcntl.flock(users, fcntl.LOCK_SH)
            _held[root] = [0, users]
        _held[root][0] += 1
    try:
        yield root
    finally:
        _release(root)


def _release(root: str, all_: bool = False) -> None:
    with _mutex(root):
        if root not in _held:
            return
        _held[root][0] = 0 if all_ else _held[root][0] - 1
        if _held[root][0] > 0:
            return
        users = _held.pop(root)[1]
        fcntl.flock(users, fcntl.LOCK_UN)
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            users.close()  # another process still inside mounted(root)
            return
        try:
            _umount_all(root)
        finally:
            users.close()


@contextlib.contextmanager
def _mutex(root: str):
    with open(os.path.join(root, ".slurmqual-mount-mutex"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _mount_all(root: str) -> None:
    current = set(_mountpoints())
    for name in _MOUNTS:
        target = os.path.join(root, name)
        if target in current:
            continue
        argv = (["mount", "-t", "proc", "proc", target] if name == "proc"
                else ["mount", "--rbind", f"/{name}", target])
        subprocess.run(argv, check=True)
        if name != "proc":  # never let an unmount inside propagate back to the host's /dev, /sys
            subprocess.run(["mount", "--make-rslave", target], check=True)
    if root not in _atexit_roots:
        _atexit_roots.add(root)
        atexit.register(_atexit_umount, root)


def _umount_all(root: str) -> None:
    for name in reversed(_MOUNTS):
        target = os.path.join(root, name)
        if target in _mountpoints():
            subprocess.run(["umount", "-R", "-l", target], check=False)


def _atexit_umount(root: str) -> None:
    try:
        _release(root, all_=True)
    except Exception:  # noqa: BLE001 - interpreter exit: best effort
        pass


def main(argv: list[str]) -> int:
    import argparse
    import concurrent.futures

    ap = argparse.ArgumentParser(description="build/refresh the cached Debian chroots of the Slurm test matrix")
    ap.add_argument("action", choices=("build",))
    ap.add_argument("suites", nargs="*", help=f"Debian suites (default: {' '.join(SUITES.values())})")
    ap.add_argument("--versions", help="Slurm version labels instead, as SLURMQUAL_SLURM_VERSIONS "
                                       "(22.05 needs no chroot)")
    args = ap.parse_args(argv)
    suites = args.suites or list(SUITES.values())
    if args.versions:
        suites = [SUITES[v.strip()] for v in args.versions.split(",") if v.strip() in SUITES]

    def build(suite: str) -> tuple[str, str, float]:
        t0 = time.monotonic()
        try:
            return suite, ensure_chroot(suite), time.monotonic() - t0
        except ChrootUnavailable as exc:
            return suite, f"unavailable: {exc}", -1.0

    rc = 0
    with concurrent.futures.ThreadPoolExecutor(max(1, len(suites))) as pool:
        for suite, what, took in pool.map(build, suites):
            if took < 0:
                rc = 1
                print(f"chroot {suite}: {what}", file=sys.stderr)
            else:
                print(f"chroot {suite}: {what} ({took:.0f}s)")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
