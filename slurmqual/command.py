"""Bounded external commands: no shell, always a timeout, never a hang."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

# slurmd gives HealthCheckProgram no PATH at all; look in the usual places.
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class CommandError(Exception):
    """The command could not run, timed out, or failed; message is for humans."""


@dataclass
class CommandOutput:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run(argv: list[str], timeout: float, *, env: dict | None = None, check: bool = True) -> CommandOutput:
    """Run argv (no shell) with a hard timeout. Kills the whole process group
    on timeout, so a hung grandchild cannot keep the pipe open."""
    full_env = dict(env if env is not None else os.environ)
    full_env.setdefault("PATH", SAFE_PATH)
    if not full_env["PATH"]:
        full_env["PATH"] = SAFE_PATH
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=full_env, start_new_session=True, text=True, errors="replace",
        )
    except FileNotFoundError:
        raise CommandError(f"{argv[0]}: command not found") from None
    except OSError as exc:
        raise CommandError(f"{argv[0]}: cannot run: {exc.strerror}") from None
    try:
        out, err = proc.communicate(timeout=max(timeout, 0.01))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CommandError(f"{' '.join(argv[:3])}: timed out after {timeout:g}s") from None
    result = CommandOutput(argv, proc.returncode, out, err, time.monotonic() - start)
    if check and proc.returncode != 0:
        detail = (err.strip() or out.strip()).splitlines()[-1:] or [""]
        raise CommandError(f"{' '.join(argv[:3])}: exit {proc.returncode}: {detail[0][:200]}")
    return result


def start_logged(argv: list[str], log_path: str, header: bool = True) -> tuple[subprocess.Popen, object]:
    """Start a long tool (a burn-in test) in its own session, its output to a
    log (first line: the command, when `header`); `reap` ends it."""
    fh = open(log_path, "w")
    if header:
        fh.write(f"# slurmqual: {' '.join(argv)}\n")
        fh.flush()
    try:
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True), fh
    except OSError:
        fh.close()
        raise


def reap(proc: subprocess.Popen, fh, deadline: float) -> bool:
    """Wait for a tool `start_logged` started until `deadline` (a monotonic
    time; at least one more second), kill its whole session past it, close
    its log. True when it had to be killed."""
    import signal

    try:
        proc.wait(timeout=max(1, deadline - time.monotonic()))
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed = True
    fh.close()
    return killed


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.communicate(timeout=2)
    except (subprocess.TimeoutExpired, ValueError):
        pass
