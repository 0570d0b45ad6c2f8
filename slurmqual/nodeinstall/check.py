"""`slurmqual install --check`: verify an install the way slurmd uses it
(paths and modes, the config, slurm.conf as the installed Slurm reads it,
the wrappers, one real prolog run)."""

from __future__ import annotations

import os
import re
import shlex
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass

from .. import slurmconf
from ..slurmconf import items
from .layout import (CACHE_DIR, CONFIG_PATH, HEAD_UNITS, HOOKS, SLURM_CONF_CANDIDATES, SYSTEMD_DIR, TIMER_WANTS_DIR,
                     console_script_path, under, wrapper_path)
from .templates import snippet_text

LIST_KEYS = {"prologflags", "schedulerparameters", "healthchecknodestate"}
HOOK_KEYS = {"prolog": "prolog", "epilog": "epilog", "healthcheckprogram": "healthcheck"}


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


def _python_of(path: str, key: str) -> str | None:
    """The first word of the file's first `key` line (a python path), None without one."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(key):
                    parts = shlex.split(line[len(key):])
                    return parts[0] if parts else None
    except (OSError, ValueError):
        return None
    return None


def wrapper_python(path: str) -> str | None:
    """The python a wrapper written by `install` runs (its PY= line)."""
    return _python_of(path, "PY=")


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
    _check_python(findings, root, py, f"{hook} hook python", node_path, "the hook silently does nothing", "slurmqual install")


def _check_python(findings: list[Finding], root: str, py: str, what: str, runner: str, consequence: str,
                  reinstall: str) -> None:
    """The python a file we wrote runs (`runner`: a hook wrapper, a unit) exists
    and, on this machine, imports slurmqual."""
    py_real = under(root, py)
    if not (os.path.isfile(py_real) and os.access(py_real, os.X_OK)):
        findings.append(Finding(False, what, f"{runner} runs {py}, which does not exist: {consequence}",
                                f"reinstall slurmqual into that venv, or re-run `{reinstall}` "
                                "with the venv's python (it rewrites the file)"))
        return
    if root in ("", "/"):
        probe = subprocess.run([py, "-I", "-c", "import slurmqual; print(slurmqual.__version__)"], env={}, cwd="/",
                               capture_output=True, text=True, timeout=60, check=False)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            findings.append(Finding(False, what, f"{py} cannot import slurmqual: {last}",
                                    f"{os.path.dirname(py)}/pip install slurmqual, then {reinstall}"))
            return
        findings.append(Finding(True, what, f"{py} (slurmqual {probe.stdout.strip()})"))
    else:
        findings.append(Finding(True, what, py))


def unit_python(path: str) -> str | None:
    """The python the requalify service written by `install --head-node` runs (its ExecStart=)."""
    return _python_of(path, "ExecStart=")


def _check_head_units(findings: list[Finding], root: str) -> None:
    """The head node's units, when installed (`install --head-node`; a node
    without them is fine): in place, root's, their python there, the timer
    enabled, and `systemd-analyze verify` content (when the tool is here)."""
    import shutil

    paths = [os.path.join(SYSTEMD_DIR, name) for name in HEAD_UNITS]
    if not any(os.path.lexists(under(root, p)) for p in paths):
        return
    fix = "slurmqual install --head-node"
    ok = [_check_path(findings, root, p, "head-node unit", False, "0644") for p in paths]
    service, timer = paths
    if ok[0]:
        py = unit_python(under(root, service))
        if py is None:
            findings.append(Finding(False, "requalify timer python", f"{service} has no ExecStart= line", fix))
        else:
            _check_python(findings, root, py, "requalify timer python", service,
                          "swapped nodes stay drained, never requalified", fix)
    wants = os.path.join(TIMER_WANTS_DIR, os.path.basename(timer))
    if not os.path.lexists(under(root, wants)):
        findings.append(Finding(False, "requalify timer", f"{os.path.basename(timer)} is not enabled (no {wants})",
                                f"{fix}   (or: systemctl enable --now {os.path.basename(timer)})"))
    else:
        findings.append(Finding(True, "requalify timer", f"enabled ({wants})"))
    verify = shutil.which("systemd-analyze")
    if not all(ok):
        return
    if verify is None or root not in ("", "/"):
        findings.append(Finding(True, "head-node units", "systemd-analyze verify skipped ("
                                + ("not installed" if verify is None else "under --root: ExecStart= names the node's paths")
                                + ")"))
        return
    findings.append(verify_units(verify, paths))


def verify_units(tool: str, paths: list[str]) -> Finding:
    """`systemd-analyze verify` of unit files: syntax, and that ExecStart= can run."""
    try:
        proc = subprocess.run([tool, "verify", *paths], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(False, "head-node units", f"systemd-analyze verify could not run: {exc}", "")
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    if proc.returncode != 0:
        return Finding(False, "head-node units", "systemd-analyze verify: " + "; ".join(said[-3:]),
                       "slurmqual install --head-node")
    return Finding(True, "head-node units", "systemd-analyze verify: no complaints")


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
    _check_head_units(findings, root)
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
    from ..configproblem import RECORD_STATE_DIR, current, line, read_all

    node = node or socket.gethostname().split(".")[0]
    dirs = [under(root, d) for d in [RECORD_STATE_DIR, *state_dirs]]
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
