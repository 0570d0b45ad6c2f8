"""`slurmqual install`: put the venv-independent pieces of a node install in
place, and `slurmqual install --check`: verify an install the way slurmd uses it.

What `install` manages (all owned by root, nothing group/world-writable, because
the hooks run as root and refuse files others could change, see security.py):

- hook wrappers PREFIX/libexec/{prolog,epilog,healthcheck}/slurmqual-HOOK, the
  paths config/slurm.conf.snippet names; each execs this venv's python in
  isolated mode, so they need no PATH and ignore PYTHON* variables;
- /etc/slurmqual/config.toml from the annotated example, only if absent (0644);
- the state, log and cache dirs the config names (0755), and the metrics dir;
- /etc/logrotate.d/slurmqual for the hooks' log file.

Idempotent: each step compares what is there with what should be, and a second
run changes nothing. `--root DIR` installs into a tree (image building, tests);
paths written into files are always the paths as the node will see them.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from .. import slurmconf
from ..slurmconf import items

DEFAULT_PREFIX = "/opt/slurmqual"
CONFIG_PATH = "/etc/slurmqual/config.toml"
CACHE_DIR = "/var/cache/slurmqual"  # config._cache_dir() as root
LOGROTATE_PATH = "/etc/logrotate.d/slurmqual"
HOOKS = ("prolog", "epilog", "healthcheck")
SLURM_CONF_CANDIDATES = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/usr/local/etc/slurm.conf")
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Keys of slurm.conf whose value is a comma-separated list: the snippet's items must be present.
LIST_KEYS = {"prologflags", "schedulerparameters", "healthchecknodestate"}
HOOK_KEYS = {"prolog": "prolog", "epilog": "epilog", "healthcheckprogram": "healthcheck"}

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def register(p: argparse.ArgumentParser, _name: str) -> None:
    p.add_argument("--check", action="store_true", help="verify an install instead of changing anything")
    p.add_argument("--dry-run", action="store_true", help="print what install would do, change nothing")
    p.add_argument("--snippet", action="store_true", help="print the slurm.conf lines for this --prefix and exit")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"install prefix: wrappers go to PREFIX/libexec (default {DEFAULT_PREFIX})")
    p.add_argument("--root", default="/", help="filesystem root to install into (default /)")
    p.add_argument("--python", default=None,
                   help="python the wrappers run, as the node sees it (default: the python running this command)")
    p.add_argument("--slurm-conf", default=None, help="slurm.conf to check (default: slurm.slurm_conf, then /etc/slurm/slurm.conf)")
    p.add_argument("--slurm-version", default=None, metavar="X.Y",
                   help="--check: judge slurm.conf as this Slurm reads it (default: `scontrol -V` of slurm.bin_dir)")
    p.add_argument("--config", default=CONFIG_PATH,
                   help="site config the hooks read (default %(default)s; another path is exported by the wrappers)")
    p.add_argument("--cache-dir", default=CACHE_DIR, help="validated-config cache of the hooks (default %(default)s)")
    p.add_argument("--node", default=None, help="SLURMD_NODENAME for the --check hook run (default: short hostname)")
    p.add_argument("--no-hook-run", action="store_true", help="--check: do not run the prolog")


# -- paths ----------------------------------------------------------------------

def wrapper_path(prefix: str, hook: str) -> str:
    return os.path.join(prefix, "libexec", hook, f"slurmqual-{hook}")


def console_script_path(prefix: str, hook: str) -> str:
    return os.path.join(prefix, "bin", f"slurmqual-{hook}")


def under(root: str, path: str) -> str:
    """A node path inside the install root."""
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def default_python() -> str:
    # Not realpath: a venv's bin/python3 is a symlink to the system python, and
    # only the venv path finds the venv's site-packages.
    return os.path.abspath(sys.executable)


def wrapper_text(hook: str, python: str, config: str = CONFIG_PATH, cache_dir: str = CACHE_DIR) -> str:
    from .. import __version__

    if hook not in HOOKS:  # it becomes Python code in the wrapper
        raise ValueError(f"unknown hook {hook!r}, expected one of {', '.join(HOOKS)}")
    py = shlex.quote(python)
    exports = ""
    if config != CONFIG_PATH:
        exports += f"SLURMQUAL_CONFIG={shlex.quote(config)}\nexport SLURMQUAL_CONFIG\n"
    if cache_dir != CACHE_DIR:
        exports += f"SLURMQUAL_CACHE_DIR={shlex.quote(cache_dir)}\nexport SLURMQUAL_CACHE_DIR\n"
    return f"""#!/bin/sh
# slurmqual {hook} hook, written by `slurmqual install` (slurmqual {__version__}); re-running it rewrites this file.
# slurmd runs it as root, with no PATH (HealthCheckProgram) or job-set variables
# (Prolog/Epilog). Python runs isolated (-I): PYTHON* variables and the current
# directory are ignored. If the python is gone the hook does nothing (exit 0):
# a broken install must not stop jobs; `slurmqual install --check` reports it.
# -c, not -m: -m imports runpy, ~2 ms before every job.
PATH={SAFE_PATH}
export PATH
{exports}PY={py}
if [ ! -x "$PY" ]; then
    echo "slurmqual-{hook}: python $PY is missing: reinstall slurmqual there, then run slurmqual install" >&2
    exit 0
fi
exec "$PY" -I -c 'import sys; from slurmqual.hookscripts import {hook}; sys.exit({hook}())'
"""


def logrotate_text(log_file: str) -> str:
    return f"""# slurmqual hook log; written by `slurmqual install`, re-running it rewrites this file.
# Hooks open the log per run, so a plain rotate with `create` is safe.
{log_file} {{
    weekly
    rotate 8
    compress
    delaycompress
    missingok
    notifempty
    create 0644 root root
}}
"""


def snippet_text(prefix: str) -> str:
    from ..data import text

    snippet = text("slurm.conf.snippet")
    return snippet if prefix == DEFAULT_PREFIX else snippet.replace(DEFAULT_PREFIX + "/", prefix.rstrip("/") + "/")


# -- install --------------------------------------------------------------------

@dataclass
class Step:
    path: str                    # as the node sees it
    what: str                    # human description
    apply: Callable[[], None] = field(repr=False)


def _is_root() -> bool:
    return os.geteuid() == 0


def _chown_root(path: str) -> None:
    if _is_root():
        os.chown(path, 0, 0, follow_symlinks=False)


def _needs_fix(st: os.stat_result, mode: int) -> list[str]:
    wrong = []
    if stat.S_IMODE(st.st_mode) != mode:
        wrong.append(f"mode {stat.S_IMODE(st.st_mode):04o} -> {mode:04o}")
    if _is_root() and (st.st_uid, st.st_gid) != (0, 0):
        wrong.append(f"owner {st.st_uid}:{st.st_gid} -> root:root")
    return wrong


def _dir_steps(root: str, node_path: str, mode: int = 0o755) -> list[Step]:
    """Create node_path (and missing parents, 0755 root) or fix its owner/mode."""
    steps: list[Step] = []
    missing = []
    current = node_path
    while current not in ("/", "") and not os.path.lexists(under(root, current)):
        missing.append(current)
        current = os.path.dirname(current)
    for path in reversed(missing):
        m = mode if path == node_path else 0o755

        def make(p=under(root, path), m=m):
            os.mkdir(p, m)
            os.chmod(p, m)
            _chown_root(p)

        steps.append(Step(path, f"create directory {m:04o} root:root", make))
    real = under(root, node_path)
    if not missing:
        if os.path.islink(real):
            # A versioned prefix behind a symlink (/opt/slurmqual -> /opt/slurmqual-0.2.0): its target is the
            # dir; leave the link alone.
            if not os.path.isdir(real):
                raise InstallError(f"{node_path} is a symlink to no directory: fix or remove it and re-run")
            return steps
        st = os.lstat(real)
        if not stat.S_ISDIR(st.st_mode):
            raise InstallError(f"{node_path} exists and is not a directory: move it away and re-run")
        steps += _fix_steps(node_path, real, st, mode)
    return steps


def _fix_steps(node_path: str, real: str, st: os.stat_result, mode: int) -> list[Step]:
    """A step setting root:root and `mode` on an existing path, if either is wrong."""
    wrong = _needs_fix(st, mode)
    if not wrong:
        return []

    def fix(p=real, m=mode):
        os.chmod(p, m)
        _chown_root(p)

    return [Step(node_path, "fix " + ", ".join(wrong), fix)]


def _file_steps(root: str, node_path: str, content: str, mode: int, replace: bool) -> list[Step]:
    """Write node_path if absent (or if different and `replace`), else fix owner/mode."""
    real = under(root, node_path)
    parent = os.path.dirname(node_path)
    # Create missing parents; an existing parent (/etc/logrotate.d) is not ours to change.
    steps = _dir_steps(root, parent) if not os.path.lexists(under(root, parent)) else []

    def write(p=real, c=content, m=mode):
        tmp = f"{p}.slurmqual-install.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, m)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(c)
        os.chmod(tmp, m)
        _chown_root(tmp)
        os.replace(tmp, p)

    if not os.path.lexists(real):
        steps.append(Step(node_path, f"write file {mode:04o} root:root", write))
        return steps
    if os.path.islink(real) or not os.path.isfile(real):
        raise InstallError(f"{node_path} exists and is not a regular file: move it away and re-run")
    if replace:
        with open(real, encoding="utf-8", errors="replace") as fh:
            if fh.read() != content:
                steps.append(Step(node_path, f"rewrite file {mode:04o} root:root (content changed)", write))
                return steps
    return steps + _fix_steps(node_path, real, os.lstat(real), mode)


class InstallError(Exception):
    pass


def _load_config(path: str, fallback_text: str | None):
    """Validated config from `path`, or from `fallback_text` (the example a dry
    run would write). Never uses or writes the config cache."""
    from ..config import Config, ConfigError, load, parse_toml, validate

    if os.path.exists(path):
        return load(path, use_cache=False)
    if fallback_text is None:
        raise ConfigError(f"{path}: config file not found")

    return Config(validate(parse_toml(fallback_text.encode(), "<annotated example>"), "<annotated example>"), path)


def plan(root: str, prefix: str, python: str, config_path: str = CONFIG_PATH, cache_dir: str = CACHE_DIR) -> list[Step]:
    from ..data import text

    example = text("slurmqual.toml")
    steps: list[Step] = []
    steps += _file_steps(root, config_path, example, 0o644, replace=False)
    config = _load_config(under(root, config_path), example)
    hooks_cfg = config["hooks"]
    for d in (hooks_cfg["state_dir"], os.path.dirname(hooks_cfg["log_file"]), cache_dir):
        steps += _dir_steps(root, d)
    if hooks_cfg["metrics_dir"]:
        if os.path.isdir(under(root, hooks_cfg["metrics_dir"])):
            pass  # node_exporter's dir: its owner and mode are the exporter's business
        else:
            steps += _dir_steps(root, hooks_cfg["metrics_dir"])
    for hook in HOOKS:
        steps += _file_steps(root, wrapper_path(prefix, hook), wrapper_text(hook, python, config_path, cache_dir), 0o755, replace=True)
    if os.path.isdir(under(root, "/etc/logrotate.d")) or root not in ("", "/"):
        steps += _file_steps(root, LOGROTATE_PATH, logrotate_text(hooks_cfg["log_file"]), 0o644, replace=True)
    return _dedupe(steps)


def _dedupe(steps: list[Step]) -> list[Step]:
    seen: set[tuple[str, str]] = set()
    out = []
    for s in steps:
        if (s.path, s.what) not in seen:
            seen.add((s.path, s.what))
            out.append(s)
    return out


def _untrusted_config(root: str, config_path: str, dry_run: bool, out) -> bool:
    """A config others could write may have been changed by them: fix its owner
    and mode, but do not act on its content (dirs to create) until an admin has
    read it. True: stop here."""
    real = under(root, config_path)
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or not (st.st_mode & 0o022 or (_is_root() and st.st_uid != 0)):
        return False
    wrong = ", ".join(_needs_fix(st, 0o644)) or "mode"
    if dry_run:
        print(f"would fix {wrong}: {config_path}, then stop: review its content before installing", file=out)
        return True
    os.chmod(real, 0o644)
    _chown_root(real)
    print(f"fix {wrong}: {config_path}", file=out)
    print(f"slurmqual install: {config_path} was writable by others, who may have changed it: review it, "
          "then re-run slurmqual install", file=sys.stderr)
    return True


def run_install(root: str, prefix: str, python: str, dry_run: bool, config_path: str = CONFIG_PATH,
                cache_dir: str = CACHE_DIR, out=sys.stdout) -> int:
    from ..config import ConfigError

    if not dry_run and not _is_root() and root in ("", "/"):
        print("slurmqual install: must run as root (the hooks run as root and refuse files others own); "
              "use --dry-run to see the plan", file=sys.stderr)
        return EXIT_USAGE
    done = 0
    try:
        if _untrusted_config(root, config_path, dry_run, out):
            return EXIT_PROBLEMS
        # The config comes first: the dirs to create are named in it (a dry run,
        # or a run without one yet, plans against the example it writes).
        steps = plan(root, prefix, python, config_path, cache_dir)
        if dry_run:
            for s in steps:
                print(f"would {s.what}: {s.path}", file=out)
            print(f"{len(steps)} change(s) planned (dry run: nothing changed)" if steps
                  else "nothing to do, up to date (dry run)", file=out)
            return EXIT_OK
        for step in steps:
            step.apply()
            print(f"{step.what}: {step.path}", file=out)
            done += 1
        left = plan(root, prefix, python, config_path, cache_dir)
        if left:
            raise InstallError(f"install did not converge ({left[0].path}: {left[0].what}): please report this")
    except ConfigError as exc:
        print(f"slurmqual install: the site config is invalid, fix it and re-run:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except (InstallError, OSError) as exc:
        print(f"slurmqual install: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"slurmqual install: {done} change(s); up to date" if done else "slurmqual install: nothing to do, up to date",
          file=out)
    return EXIT_OK


# -- check ----------------------------------------------------------------------

@dataclass
class Finding:
    ok: bool
    what: str
    detail: str
    fix: str = ""


def _unsafe_chain(real: str, node_path: str) -> str | None:
    """Why a root hook would refuse this path (owner/mode of it and its parents),
    mirroring security.check_root_only but for any caller and any root."""
    current, first = real, True
    while True:
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            st = None
        if st is not None:
            sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and not first
            if st.st_uid != 0:
                return f"{current} is owned by uid {st.st_uid}, not root"
            if st.st_mode & 0o022 and not sticky:
                return f"{current} is writable by group/others (mode {stat.S_IMODE(st.st_mode):04o})"
        first = False
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _check_path(findings: list[Finding], root: str, node_path: str, what: str, want_dir: bool, mode_fix: str,
                follow_links: bool = False) -> bool:
    """follow_links: judge the resolved path (slurmd execs hooks through symlinks;
    the hooks themselves refuse symlinks in config and state paths)."""
    real = under(root, node_path)
    if not os.path.exists(real):
        fix = f"slurmqual install   (or: install -d -m 0755 -o root -g root {node_path})" if want_dir else "slurmqual install"
        findings.append(Finding(False, what, f"{node_path} is missing", fix))
        return False
    if want_dir != os.path.isdir(real):
        findings.append(Finding(False, what, f"{node_path} is not a {'directory' if want_dir else 'file'}",
                                f"move {node_path} away, then slurmqual install"))
        return False
    why = _unsafe_chain(os.path.realpath(real) if follow_links else real, node_path)
    if why:
        findings.append(Finding(False, what, f"{why}: the hooks refuse it",
                                f"chown root:root {node_path} && chmod {mode_fix} {node_path}  (and its parents: chmod go-w)"))
        return False
    findings.append(Finding(True, what, node_path))
    return True


def _find_slurm_conf(root: str, explicit: str | None, config) -> str | None:
    if explicit:
        return explicit
    candidates = []
    if config is not None and config["slurm"]["slurm_conf"]:
        candidates.append(config["slurm"]["slurm_conf"])
    candidates += SLURM_CONF_CANDIDATES
    for c in candidates:
        if os.path.isfile(under(root, c)):
            return under(root, c)
    return None


def ladder_may_reboot(config) -> bool:
    """Whether the remediation ladder ([remediation], when enabled) may run
    `scontrol reboot`: its defaults reboot for a GPU off the bus, so unless
    every action is overridden to something else."""
    rem = config.data.get("remediation") or {}
    if not rem.get("enabled"):
        return False
    overrides = [*(rem.get("checks") or {}).values(), *(rem.get("xid") or {}).values()]
    return "reboot" in overrides or not overrides


def _installed_slurm(config) -> tuple[int, int] | None:
    """(major, minor) of the Slurm this node runs (`scontrol -V`), None when unknown."""
    from ..slurm import SlurmError
    from ..slurm.cli import CliAdapter

    slurm = config["slurm"]
    try:
        v = CliAdapter(slurm["bin_dir"], slurm["timeout_s"], 1, slurm_conf=slurm["slurm_conf"]).version
    except (SlurmError, OSError):
        return None
    return (v.major, v.minor)


def parse_version(text: str) -> tuple[int, int]:
    """--slurm-version "24.11" -> (24, 11)."""
    major, dot, minor = text.partition(".")
    if not (major.isdigit() and dot and minor.split(".")[0].isdigit()):
        raise ValueError(f"--slurm-version {text!r}: expected X.Y, e.g. 24.11")
    return int(major), int(minor.split(".")[0])


def _check_slurm_conf(findings: list[Finding], root: str, prefix: str, conf_path: str | None, config,
                      slurm_version: tuple[int, int] | None = None) -> dict[str, str]:
    snippet = {}
    for raw in snippet_text(prefix).splitlines():
        line = raw.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if sep:
            snippet[key.strip()] = value.strip()
    if conf_path is None:
        findings.append(Finding(False, "slurm.conf", "not found (looked at slurm.slurm_conf and "
                                + ", ".join(SLURM_CONF_CANDIDATES) + ")", "--slurm-conf FILE, or set slurm.slurm_conf in the config"))
        return {}
    try:
        conf = slurmconf.parse(conf_path)
    except OSError as exc:
        findings.append(Finding(False, "slurm.conf", f"{conf_path}: cannot read: {exc.strerror}", "check the path and permissions"))
        return {}
    for key, want in snippet.items():
        k = key.lower()
        have = conf.get(k)
        line = f"{key}={want}"
        if have is None:
            findings.append(Finding(False, f"slurm.conf {key}", f"{conf_path} has no {key}= line",
                                    f"add `{line}` (slurmqual install --snippet prints all lines), then scontrol reconfigure"))
        elif k in HOOK_KEYS:
            hook = HOOK_KEYS[k]
            accepted = {wrapper_path(prefix, hook), console_script_path(prefix, hook)}
            if not items(have) & {a.lower() for a in accepted}:
                findings.append(Finding(False, f"slurm.conf {key}", f"{key}={have}, not slurmqual's {hook} hook",
                                        f"set `{line}`, then scontrol reconfigure"))
            else:
                findings.append(Finding(True, f"slurm.conf {key}", have))
        elif k in LIST_KEYS:
            missing = sorted(items(want) - items(have))
            if missing and k != "healthchecknodestate":
                findings.append(Finding(False, f"slurm.conf {key}", f"{key}={have} lacks {','.join(missing)}",
                                        f"add {','.join(missing)} to {key} (snippet: `{line}`), then scontrol reconfigure"))
            else:
                findings.append(Finding(True, f"slurm.conf {key}", have + ("" if not missing else f" (snippet: {want}; site choice)")))
        else:
            findings.append(Finding(True, f"slurm.conf {key}", have if have == want else f"{have} (snippet: {want}; site choice)"))
    budget = (config["hooks"]["deadline_s"] + config["hooks"]["command_timeout_s"]) if config is not None else None
    if budget is not None:
        ver = slurm_version if slurm_version is not None else _installed_slurm(config)
        for ok, what, detail, fix in slurmconf.findings(conf, ver, budget, ladder_may_reboot(config)):
            findings.append(Finding(ok, what, detail, fix))
    return conf


def wrapper_python(path: str) -> str | None:
    """The python a wrapper written by `install` runs (its PY= line)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("PY="):
                    parts = shlex.split(line[3:])
                    return parts[0] if parts else None
    except OSError:
        return None
    return None


def _check_wrapper(findings: list[Finding], root: str, node_path: str, hook: str) -> None:
    if not _check_path(findings, root, node_path, f"{hook} hook", False, "0755", follow_links=True):
        return
    real = under(root, node_path)
    if not os.access(real, os.X_OK):
        findings.append(Finding(False, f"{hook} hook", f"{node_path} is not executable", f"chmod 0755 {node_path}"))
        return
    py = wrapper_python(real)
    if py is None:
        return  # not one of ours (a console script or a site wrapper): the hook run judges it
    py_real = under(root, py)
    if not (os.path.isfile(py_real) and os.access(py_real, os.X_OK)):
        findings.append(Finding(False, f"{hook} hook python", f"{node_path} runs {py}, which does not exist: the hook "
                                "silently does nothing", "reinstall slurmqual into that venv, or re-run `slurmqual install` "
                                "with the venv's python (it rewrites the wrappers)"))
        return
    if root in ("", "/"):
        probe = subprocess.run([py, "-I", "-c", "import slurmqual; print(slurmqual.__version__)"], env={}, cwd="/",
                               capture_output=True, text=True, timeout=60, check=False)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            findings.append(Finding(False, f"{hook} hook python", f"{py} cannot import slurmqual: {last}",
                                    f"{os.path.dirname(py)}/pip install slurmqual, then slurmqual install"))
            return
        findings.append(Finding(True, f"{hook} hook python", f"{py} (slurmqual {probe.stdout.strip()})"))
    else:
        findings.append(Finding(True, f"{hook} hook python", py))


def _hook_run(findings: list[Finding], hook_path: str, node: str, timeout: float) -> None:
    """Run the prolog as slurmd would: as root, cwd /, no PATH, no SLURM_CONF,
    only SLURMD_NODENAME. A passing prolog makes no Slurm call; a failing one
    drains the node exactly as the next job's prolog would."""
    env = {"SLURMD_NODENAME": node}
    start = time.monotonic()
    try:
        proc = subprocess.run([hook_path], env=env, cwd="/", capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        findings.append(Finding(False, "prolog run", f"{hook_path} did not finish within {timeout:g}s",
                                "see the hook log (journalctl -t slurmqual or hooks.log_file); lower hooks.deadline_s"))
        return
    except OSError as exc:
        findings.append(Finding(False, "prolog run", f"{hook_path} cannot be executed: {exc.strerror}",
                                "check its #! line and mode; slurmqual install rewrites it"))
        return
    took = time.monotonic() - start
    err = proc.stderr.strip()
    if re.search(r"missing|not installed|No such file|not found", err):
        findings.append(Finding(False, "prolog run", f"the hook cannot find Python/slurmqual: {err.splitlines()[-1]}",
                                "reinstall slurmqual, then slurmqual install (it rewrites the wrappers)"))
    elif proc.returncode != 0:
        findings.append(Finding(False, "prolog run", f"exit {proc.returncode} after {took:.2f}s: a check fails on {node} "
                                "(the prolog drained it, as the next job's would)" + (f": {err.splitlines()[-1]}" if err else ""),
                                f"slurmqual check --node {node}; fix the node, the healthcheck resumes it"))
    else:
        findings.append(Finding(True, "prolog run", f"exit 0 in {took:.2f}s, with no PATH and no SLURM_CONF"
                                + (f" (stderr: {err.splitlines()[-1]})" if err else "")))


def run_check(root: str, prefix: str, slurm_conf: str | None, node: str | None, hook_run: bool,
              config_path: str = CONFIG_PATH, cache_dir: str = CACHE_DIR,
              slurm_version: tuple[int, int] | None = None) -> list[Finding]:
    from ..config import ConfigError, load

    findings: list[Finding] = []
    config = None
    if _check_path(findings, root, config_path, "site config", False, "0644"):
        try:
            config = load(under(root, config_path), use_cache=False)
            findings.append(Finding(True, "site config", "valid"))
        except ConfigError as exc:
            findings.append(Finding(False, "site config", str(exc).replace("\n", "; "),
                                    f"slurmqual config validate {config_path}, fix the keys it names"))
    if config is not None:
        dirs = [("state dir", config["hooks"]["state_dir"]), ("log dir", os.path.dirname(config["hooks"]["log_file"])),
                ("cache dir", cache_dir)]
    else:
        from ..config_schema import HooksCfg

        d = HooksCfg()
        dirs = [("state dir", d.state_dir), ("log dir", os.path.dirname(d.log_file)), ("cache dir", cache_dir)]
    for what, path in dirs:
        _check_path(findings, root, path, what, True, "0755")
    _check_config_problem(findings, root, node, [d for what, d in dirs if what == "state dir"])
    conf = _check_slurm_conf(findings, root, prefix, _find_slurm_conf(root, slurm_conf, config), config, slurm_version)
    hook_paths = {}
    for hook in HOOKS:
        key = {"healthcheck": "healthcheckprogram"}.get(hook, hook)
        configured = sorted(items(conf.get(key, "")))
        path = next((p for p in (conf.get(key, "").split(",")) if "slurmqual" in p), None) if configured else None
        path = (path or wrapper_path(prefix, hook)).strip()
        hook_paths[hook] = path
        _check_wrapper(findings, root, path, hook)
    if hook_run and root not in ("", "/"):
        findings.append(Finding(True, "prolog run", "skipped under --root (the wrappers name the node's paths)"))
    elif hook_run:
        timeout = 60.0
        if config is not None:
            timeout = config["hooks"]["deadline_s"] + config["hooks"]["command_timeout_s"] + 30
        prolog = under(root, hook_paths["prolog"])
        if os.path.isfile(prolog) and os.access(prolog, os.X_OK):
            _hook_run(findings, prolog, node or socket.gethostname().split(".")[0], timeout)
        else:
            findings.append(Finding(False, "prolog run", f"{hook_paths['prolog']} is not there to run", "slurmqual install"))
    return findings


def _check_config_problem(findings: list[Finding], root: str, node: str | None, state_dirs: list[str]) -> None:
    """A hook that could not use the site config since the node's last judged run (configproblem.py)."""
    from .. import nodestate
    from ..configproblem import DEFAULT_STATE_DIR, current, line, read_all

    node = node or socket.gethostname().split(".")[0]
    dirs = [under(root, d) for d in [DEFAULT_STATE_DIR, *state_dirs]]
    last = {node: max((st.time for d in dirs for st in nodestate.read_all(d, {node})[0].values()), default=None)}
    for n, rec in current(read_all(dirs, {node}), last).items():
        findings.append(Finding(False, "hooks", f"no checks run: {line(n, rec)}",
                                "fix the site config (see above); the next hook run clears this"))


def print_findings(findings: list[Finding], out=sys.stdout) -> None:
    for f in findings:
        print(f"{'ok' if f.ok else 'PROBLEM':<8} {f.what}: {f.detail}", file=out)
        if not f.ok and f.fix:
            print(f"{'':<8}   fix: {f.fix}", file=out)
    bad = sum(not f.ok for f in findings)
    print(f"{bad} problem(s)" if bad else "install looks right", file=out)


def main(args: argparse.Namespace) -> int:
    prefix = os.path.abspath(args.prefix)
    root = os.path.abspath(args.root)
    if args.snippet:
        sys.stdout.write(snippet_text(prefix))
        return EXIT_OK
    if not os.path.isdir(root):
        print(f"slurmqual install: --root {root} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        try:
            version = parse_version(args.slurm_version) if args.slurm_version else None
        except ValueError as exc:
            print(f"slurmqual install: {exc}", file=sys.stderr)
            return EXIT_USAGE
        findings = run_check(root, prefix, args.slurm_conf, args.node, not args.no_hook_run,
                             args.config, args.cache_dir, version)
        print_findings(findings)
        return EXIT_PROBLEMS if any(not f.ok for f in findings) else EXIT_OK
    return run_install(root, prefix, args.python or default_python(), args.dry_run, args.config, args.cache_dir)
