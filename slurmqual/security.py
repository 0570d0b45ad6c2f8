"""Refuse root-owned work driven by files others can change. Hooks run as root;
a config, plugin dir or state dir writable by a user would let that user
switch checks off or run commands as root.

The rule is the one OpenSSH (`secure_filename`/`safe_path`) and sudo apply to
their own files: walk the path the way the kernel does, judging every
directory on the way and the final file itself, and follow symlinks to judge
their *targets* (a symlink's own mode is always 0777 and means nothing). A
symlink must itself be root-owned. The stdlib has no such check (os.path is
lexical; pathlib.resolve says nothing about owners), hence this module.
"""

from __future__ import annotations

import os
import stat

_MAX_LINKS = 40


class UnsafePath(Exception):
    pass


def _judge(current: str, st: os.stat_result, final: bool, what: str, path: str) -> None:
    if st.st_uid != 0:
        raise UnsafePath(f"{what} {current} is owned by uid {st.st_uid}, not root: refusing to use {path}")
    sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    if st.st_mode & 0o022 and not (sticky_dir and not final):
        raise UnsafePath(f"{what} {current} is writable by group/others "
                         f"(mode {stat.S_IMODE(st.st_mode):04o}): refusing to use {path}; chmod go-w")


def check_root_only(path: str, what: str) -> None:
    """As root: every directory on the way to path (symlinks followed) and path
    itself must be owned by root and not group/world-writable (sticky
    /tmp-style parents are allowed). A missing tail is fine: it is something
    we will create. No-op when not root."""
    if os.geteuid() != 0 or not path:
        return
    full = path if path.startswith("/") else os.path.join(os.getcwd(), path)
    pending = [p for p in full.split("/") if p]
    current = "/"
    _judge("/", os.lstat("/"), not pending, what, path)
    links = 0
    while pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        nxt = os.path.join(current, name)
        try:
            st = os.lstat(nxt)
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing there yet (e.g. a state dir we will create, as root)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid != 0:
                raise UnsafePath(f"{what} {nxt} is a symlink owned by uid {st.st_uid}, not root: refusing to use {path}")
            links += 1
            if links > _MAX_LINKS:
                raise UnsafePath(f"{what} {path}: too many levels of symbolic links")
            target = os.readlink(nxt)
            if target.startswith("/"):
                current = "/"
            pending = [p for p in target.split("/") if p] + pending
            continue
        _judge(nxt, st, not pending, what, path)
        current = nxt


def root_only_ok(path: str, what: str) -> str | None:
    """check_root_only as a value: None when safe, else the reason."""
    try:
        check_root_only(path, what)
    except UnsafePath as exc:
        return str(exc)
    except OSError as exc:
        return f"{what} {path}: {exc.strerror or exc}"
    return None


# -- what a Slurm job of ours gets --------------------------------------------------------------
# Jobs never get the submitter's whole environment (`--export=ALL`): slurmctld
# stores a batch job's environment on disk, and the submitter's may hold the
# slurmrestd JWT (SLURMRESTD_TOKEN) or other secrets. sbatch/srun
# `--export=NAME,...` propagates only those names (plus SLURM_*, which Slurm
# always passes, SLURM_CONF included); values travel by name, so no quoting.
JOB_ENV_NAMES = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "PYTHONPATH")
JOB_ENV_PREFIXES = ("NCCL_", "UCX_", "OMPI_MCA_", "PMIX_MCA_")  # what nccl-tests runs are tuned with
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSW", "CREDENTIAL", "KEY")


def job_export(config_path: str | None, env: dict | None = None) -> str:
    """The `--export=` argument for our burn-in/requalify jobs: a few named
    variables from the submitter's environment and SLURMQUAL_CONFIG."""
    env = os.environ if env is None else env
    names = [n for n in sorted(env)
             if (n in JOB_ENV_NAMES or n.startswith(JOB_ENV_PREFIXES))
             and not any(w in n.upper() for w in _SECRET_WORDS) and n.replace("_", "").isalnum()]
    if config_path:
        if "," in config_path:
            raise UnsafePath(f"site config path {config_path!r}: ',' cannot be passed to a job (--export)")
        names.append(f"SLURMQUAL_CONFIG={config_path}")
    return "--export=" + (",".join(names) if names else "NONE")


def job_command() -> str:
    """How a job runs slurmqual: this interpreter with -P (Python 3.11+), so the
    job's working directory (the submit dir) is not put first on sys.path and a
    stray `timeit.py` or `json.py` there is never imported. Not -I: that would
    also drop PYTHONPATH, which sites without an installed package rely on."""
    import shlex
    import sys

    return f"{shlex.quote(sys.executable)} -P -m slurmqual"
