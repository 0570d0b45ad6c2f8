"""The files `slurmqual install` writes (hook wrappers, logrotate, the head
node's systemd units) and the slurm.conf snippet it prints."""

from __future__ import annotations

import shlex

from .layout import CACHE_DIR, CONFIG_PATH, DEFAULT_PREFIX, HEAD_UNITS, HOOKS, SAFE_PATH


def hook_code(hook: str) -> str:
    """The Python the wrapper runs (python -I -c): the hook's console-script function."""
    if hook not in HOOKS:  # it becomes Python code in the wrapper
        raise ValueError(f"unknown hook {hook!r}, expected one of {', '.join(HOOKS)}")
    return f"import sys; from slurmqual.hookscripts import {hook}; sys.exit({hook}())"


def wrapper_text(hook: str, python: str, config: str = CONFIG_PATH, cache_dir: str = CACHE_DIR) -> str:
    from .. import __version__

    code = hook_code(hook)
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
exec "$PY" -I -c '{code}'
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


def requalify_command(python: str, config: str = CONFIG_PATH) -> str:
    """The service's ExecStart: this venv's python runs `requalify --swapped`
    (isolated: no PYTHON* variables; no PATH or prefix assumed)."""
    cmd = f"{shlex.quote(python)} -I -m slurmqual requalify --swapped"
    return cmd + (f" --config {shlex.quote(config)}" if config != CONFIG_PATH else "")


def head_unit_text(name: str, python: str, config: str = CONFIG_PATH) -> str:
    """One of HEAD_UNITS as `install --head-node` writes it: the bundled unit
    (slurmqual/data) with a header saying who wrote it and the ExecStart of this venv."""
    from .. import __version__
    from ..data import text

    if name not in HEAD_UNITS:
        raise ValueError(f"unknown unit {name!r}, expected one of {', '.join(HEAD_UNITS)}")
    body = "\n".join(f"ExecStart={requalify_command(python, config)}" if ln.startswith("ExecStart=") else ln
                      for ln in text(name).splitlines())
    return f"# Written by `slurmqual install --head-node` (slurmqual {__version__}); re-running it rewrites this file.\n" \
           + body + "\n"
