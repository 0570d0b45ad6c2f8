"""Where a node install puts things, as the node sees them (`--root` maps
them into a tree)."""

from __future__ import annotations

import os
import sys

DEFAULT_PREFIX = "/opt/slurmqual"
CONFIG_PATH = "/etc/slurmqual/config.toml"
CACHE_DIR = "/var/cache/slurmqual"  # config._cache_dir() as root
LOGROTATE_PATH = "/etc/logrotate.d/slurmqual"
HOOKS = ("prolog", "epilog", "healthcheck")
SLURM_CONF_CANDIDATES = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/usr/local/etc/slurm.conf")
# The head node's units (`install --head-node`): requalify --swapped every 15 minutes.
SYSTEMD_DIR = "/etc/systemd/system"
HEAD_UNITS = ("slurmqual-requalify-swapped.service", "slurmqual-requalify-swapped.timer")
TIMER_WANTS_DIR = SYSTEMD_DIR + "/timers.target.wants"
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


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
