#!/usr/bin/env python3
"""Slurm built from source, for the releases no Debian suite packages
(25.11), and pyslurm built against it: a real libslurm, slurmctld, slurmd,
client commands and slurmrestd (JSON + JWT) for the real-Slurm test matrix.

The source archives live beside the checkout in ``../shared/sources``
(``$SLURMQUAL_SOURCES``); their README gives each archive's sha256, which is
checked before anything is built. No archive: the version is unavailable and
its tests skip with that reason (a plain clone has no ``../shared``).

Public API (tests/slurmcluster.py, tests/conftest.py, scripts/test.sh and the
bench use it):

``RELEASES``
    Slurm version label -> archive name: ``{"25.11": "slurm-25.11.7.tar.xz"}``.
``ensure_slurm(version) -> str``
    Install prefix of a ready build (bin/, sbin/, lib/libslurm*, include/),
    built on first use (about 15 min on 2 cores) and cached; concurrent
    callers (several processes) wait on a lock and share one build. Raises
    ``SlurmBuildUnavailable`` saying why (archive absent, checksum wrong, not
    root, build failed: log path and tail).
``ensure_pyslurm(version) -> str``
    Path of a pyslurm wheel built against that prefix (cached beside it).
``install_pyslurm(python, version)``
    pip-install that wheel into the venv of ``python`` (no-op when present).
``why_unavailable(version) -> str | None``
    Cheap check (no build): why a version cannot be had here, or None.

Cache: ``$SLURMQUAL_SLURM_BUILD_CACHE`` or /var/cache/slurmqual-tests, one
prefix per archive: ``slurm-25.11.7-<sha256[:12]>/`` (so a changed archive is
a new build). ``.slurmqual-ready`` is written last, holding the build's
fingerprint, so an interrupted build is redone.

    python3 tests/slurmbuild.py build [25.11] [--pyslurm-into PYTHON]   # build/reuse, print timings
    python3 tests/slurmbuild.py status                                  # ready / missing / why
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASES = {"25.11": "slurm-25.11.7.tar.xz"}
PYSLURM = {"25.11": "25.11.2"}   # the pyslurm release built for each Slurm release
BUILD_DEPS = ("build-essential", "libmunge-dev", "libjson-c-dev", "libyaml-dev", "libjwt-dev", "libhttp-parser-dev",
              "pkg-config", "python3-dev")
# --enable-multiple-slurmd: the test clusters run several slurmd on one host; without it
# slurmd refuses the job credential a second slurmd on the same munged decodes (munge
# "replay"), so every multi-node srun step fails (seen: "_verify_signature: failed decode").
CONFIGURE = ("--disable-debug", "--enable-multiple-slurmd")
_READY = ".slurmqual-ready"
_FORMAT = 1  # bump when the build steps change


class SlurmBuildUnavailable(RuntimeError):
    """This Slurm cannot be had here (no archive, bad checksum, not root,
    build failed): the message says which; tests skip on it."""


def sources_dir() -> str:
    return os.environ.get("SLURMQUAL_SOURCES", os.path.join(os.path.dirname(REPO), "shared", "sources"))


def cache_dir() -> str:
    return os.environ.get("SLURMQUAL_SLURM_BUILD_CACHE", "/var/cache/slurmqual-tests")


def archive(version: str) -> str:
    if version not in RELEASES:
        raise SlurmBuildUnavailable(f"no source build known for Slurm {version} (known: {', '.join(RELEASES)})")
    return os.path.join(sources_dir(), RELEASES[version])


def expected_sha256(version: str) -> str:
    """The archive's sha256 as the sources README states it."""
    name = RELEASES[version]
    readme = os.path.join(sources_dir(), "README.md")
    try:
        text = open(readme, encoding="utf-8").read()
    except OSError as exc:
        raise SlurmBuildUnavailable(f"{readme}: {exc.strerror}; cannot verify {name}") from None
    m = re.search(rf"sha256 of {re.escape(name)}:\s*`?([0-9a-f]{{64}})", text)
    if not m:
        raise SlurmBuildUnavailable(f"{readme} gives no sha256 for {name}")
    return m.group(1)


def why_unavailable(version: str) -> str | None:
    """Why `version` cannot be built or used here (cheap: no hashing, no build)."""
    if version not in RELEASES:
        return f"no source build known for Slurm {version}"
    path = archive(version)
    if not os.path.exists(path):
        return (f"Slurm {version} source archive {path} absent (a plain clone has no ../shared/sources; "
                "set SLURMQUAL_SOURCES)")
    if os.geteuid() != 0 and not _ready(prefix(version), version):
        return "building Slurm from source needs root (run the suite as root, as CI does: bash scripts/test.sh)"
    return None


def prefix(version: str) -> str:
    """Install prefix of `version`'s build: named by archive and checksum."""
    base = RELEASES[version].removesuffix(".tar.xz")
    return os.path.join(cache_dir(), f"{base}-{expected_sha256(version)[:12]}")


def fingerprint(version: str) -> str:
    data = {"format": _FORMAT, "archive": RELEASES[version], "sha256": expected_sha256(version),
            "configure": CONFIGURE}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _ready(path: str, version: str) -> bool:
    try:
        return open(os.path.join(path, _READY)).read().strip() == fingerprint(version)
    except (OSError, SlurmBuildUnavailable):
        return False


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ensure_slurm(version: str = "25.11", log=None) -> str:
    """Prefix of a ready build of `version` (see module docstring)."""
    why = why_unavailable(version)
    if why:
        raise SlurmBuildUnavailable(why)
    path = prefix(version)
    if _ready(path, version):
        return path
    os.makedirs(cache_dir(), exist_ok=True)
    with open(os.path.join(cache_dir(), f".slurm-{version}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build, whoever asks (threads or processes)
        if not _ready(path, version):
            _build(version, path, log or sys.stderr)
    return path


def _step(argv: list[str], logfile: str, what: str, timeout: float, cwd: str | None = None,
          env: dict | None = None) -> None:
    with open(logfile, "a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                timeout=timeout, env=env or _build_env()).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        except OSError as exc:
            rc = exc.strerror
    if rc != 0:
        with open(logfile) as fh:
            tail = "".join(fh.readlines()[-15:])
        raise SlurmBuildUnavailable(f"{what} failed ({rc}); log {logfile}:\n{tail}")


def _build_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "SLURM"))}
    env.update(DEBIAN_FRONTEND="noninteractive", LC_ALL="C.UTF-8",
               PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return env


def _missing_deps() -> list[str]:
    return [p for p in BUILD_DEPS
            if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]


def _install_deps(logfile: str) -> None:
    missing = _missing_deps()
    if not missing:
        return
    if not shutil.which("apt-get"):
        raise SlurmBuildUnavailable(f"build dependencies missing ({' '.join(missing)}) and no apt-get")
    opts = ["-o", "DPkg::Lock::Timeout=300", "-o", "Acquire::Retries=3"]
    _step(["apt-get", *opts, "update", "-q"], logfile, "apt-get update", 600)
    _step(["apt-get", *opts, "install", "-y", "-q", "--no-install-recommends", *missing], logfile,
          f"apt-get install {' '.join(missing)}", 1200)


def _build(version: str, path: str, log) -> None:
    """Verify, unpack, configure, make -j2, install into `path`, check what
    the tests need is there, then write the marker. The work tree
    (`path`.build) goes once the install is complete."""
    src = archive(version)
    want = expected_sha256(version)
    got = _sha256(src)
    if got != want:
        raise SlurmBuildUnavailable(f"{src}: sha256 {got} is not the {want} its README states; not building it")
    work = path + ".build"
    logfile = path + ".build.log"
    if os.path.exists(path):
        shutil.rmtree(path)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    open(logfile, "w").close()
    t0 = time.monotonic()
    print(f"slurmbuild: building Slurm {version} from {src} into {path} (about 15 min on 2 cores; log {logfile})",
          file=log, flush=True)
    _install_deps(logfile)
    _step(["tar", "-xJf", src, "-C", work], logfile, "unpack", 600)
    (tree,) = [d for d in glob.glob(os.path.join(work, "slurm-*")) if os.path.isdir(d)]
    nice = ["nice", "-n", "10"]
    _step([*nice, "./configure", f"--prefix={path}", f"--sysconfdir={path}/etc", *CONFIGURE], logfile,
          "configure", 1800, cwd=tree)
    _check_configure(tree, logfile)
    jobs = str(max(1, min(os.cpu_count() or 1, 4)))
    _step([*nice, "make", f"-j{jobs}"], logfile, "make", 7200, cwd=tree)
    _step([*nice, "make", "install"], logfile, "make install", 1800, cwd=tree)
    problem = check_install(path)
    if problem:
        raise SlurmBuildUnavailable(f"Slurm {version} built but {problem}; log {logfile}")
    os.makedirs(os.path.join(path, "etc"), exist_ok=True)
    with open(os.path.join(path, _READY), "w") as fh:
        fh.write(fingerprint(version) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(f"slurmbuild: Slurm {version} ready in {path} ({time.monotonic() - t0:.0f}s)", file=log, flush=True)


def _check_configure(tree: str, logfile: str) -> None:
    """slurmrestd with JSON and JWT needs these found by configure; without
    them the build would succeed and the REST tests fail obscurely."""
    for what, pattern in (("slurmrestd", r"whether to compile slurmrestd\.\.\. yes"),
                          ("json-c", r"checking for json installation\.\.\. /"),
                          ("libjwt", r"checking for jwt_add_header in -ljwt\.\.\. yes"),
                          ("http-parser", r"checking for http-parser installation\.\.\. /")):
        if not _in_log(logfile, pattern):
            raise SlurmBuildUnavailable(f"configure did not find {what} (slurmrestd with JSON and JWT needs it: "
                                        f"apt-get install {' '.join(BUILD_DEPS)}); log {logfile}")


def _in_log(logfile: str, pattern: str) -> bool:
    try:
        return re.search(pattern, open(logfile, errors="replace").read()) is not None
    except OSError:
        return False


# What the tests need from a build, relative to the prefix.
NEEDED = ("sbin/slurmctld", "sbin/slurmd", "sbin/slurmrestd", "bin/scontrol", "bin/sinfo", "bin/squeue",
          "bin/sbatch", "bin/scancel", "bin/srun", "lib/slurm/libslurmfull.so", "include/slurm/slurm.h",
          "lib/slurm/auth_jwt.so", "lib/slurm/serializer_json.so", "lib/slurm/rest_auth_jwt.so",
          "lib/slurm/openapi_slurmctld.so")


def check_install(path: str) -> str | None:
    """What a finished install lacks (a plugin a missing -dev package left out), or None."""
    missing = [rel for rel in NEEDED if not os.path.exists(os.path.join(path, rel))]
    return f"lacks {', '.join(missing)} under {path}" if missing else None


# -- pyslurm ------------------------------------------------------------------------
def wheel_dir(version: str) -> str:
    return os.path.join(prefix(version), "wheels")


def ensure_pyslurm(version: str = "25.11", python: str | None = None, log=None) -> str:
    """A pyslurm wheel built against `version`'s build, for `python` (default:
    this interpreter): cached in PREFIX/wheels, so a second run reuses it."""
    path = ensure_slurm(version, log)
    python = python or sys.executable
    tag = subprocess.run([python, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
                         capture_output=True, text=True, check=True).stdout.strip()
    pattern = os.path.join(wheel_dir(version), f"pyslurm-{PYSLURM[version]}-{tag}-*.whl")
    found = sorted(glob.glob(pattern))
    if found:
        return found[-1]
    with open(os.path.join(cache_dir(), f".pyslurm-{version}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(glob.glob(pattern))
        if found:
            return found[-1]
        out = wheel_dir(version)
        tmp = out + f".tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        logfile = os.path.join(prefix(version), "pyslurm-build.log")
        t0 = time.monotonic()
        print(f"slurmbuild: building pyslurm {PYSLURM[version]} against {path} (3-5 min; log {logfile})",
              file=log or sys.stderr, flush=True)
        env = dict(_build_env(), SLURM_LIB_DIR=os.path.join(path, "lib"),
                   SLURM_INCLUDE_DIR=os.path.join(path, "include"))
        _step(["nice", "-n", "10", python, "-m", "pip", "wheel", "--no-deps", "--no-binary", "pyslurm", "--no-cache-dir",
               "--disable-pip-version-check", "-w", tmp, f"pyslurm=={PYSLURM[version]}"], logfile,
              "pip wheel pyslurm", 1800, env=env)
        os.makedirs(out, exist_ok=True)
        (built,) = glob.glob(os.path.join(tmp, "pyslurm-*.whl"))
        os.replace(built, os.path.join(out, os.path.basename(built)))
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"slurmbuild: pyslurm wheel ready ({time.monotonic() - t0:.0f}s)", file=log or sys.stderr, flush=True)
    return sorted(glob.glob(pattern))[-1]


def install_pyslurm(python: str, version: str = "25.11", log=None) -> str:
    """The wheel installed into `python`'s venv (nothing done when that
    exact pyslurm is already there); returns the wheel's path."""
    wheel = ensure_pyslurm(version, python, log)
    with open(os.path.join(cache_dir(), f".pyslurm-{version}-install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several test workers share one venv
        probe = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('pyslurm'))"],
                               capture_output=True, text=True)
        if probe.returncode != 0 or probe.stdout.strip() != PYSLURM[version]:
            p = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                                "--force-reinstall", wheel], capture_output=True, text=True)
            if p.returncode != 0:
                raise SlurmBuildUnavailable(f"pip install {wheel} failed: {p.stderr[-500:]}")
    return wheel


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="build/reuse Slurm from ../shared/sources and pyslurm against it")
    ap.add_argument("action", choices=("build", "status"))
    ap.add_argument("versions", nargs="*", help=f"Slurm versions (default: {' '.join(RELEASES)})")
    ap.add_argument("--pyslurm-into", metavar="PYTHON",
                    help="also build the pyslurm wheel and install it into this Python's venv")
    args = ap.parse_args(argv)
    rc = 0
    for version in args.versions or list(RELEASES):
        if args.action == "status":
            why = why_unavailable(version)
            state = why or ("ready " + prefix(version) if _ready(prefix(version), version) else "not built yet")
            print(f"Slurm {version}: {state}")
            continue
        t0 = time.monotonic()
        try:
            path = ensure_slurm(version)
            print(f"Slurm {version}: {path} ({time.monotonic() - t0:.0f}s)")
            if args.pyslurm_into:
                wheel = install_pyslurm(args.pyslurm_into, version)
                print(f"pyslurm {PYSLURM[version]}: {wheel} in {args.pyslurm_into} ({time.monotonic() - t0:.0f}s)")
        except SlurmBuildUnavailable as exc:
            print(f"Slurm {version}: unavailable: {exc}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
