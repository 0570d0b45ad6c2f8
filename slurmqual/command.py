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
