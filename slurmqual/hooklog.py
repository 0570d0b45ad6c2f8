"""Hook logging: syslog/journal when /dev/log exists (and hooks.syslog), else
the configured log file. Never raises: a hook must not fail because of logging.

Two rules because hooks run as root and log text from the node:
- the log file is opened only where root alone can write (every directory on
  the way, the file itself), without following a symlink as the last
  component; anything else falls back to stderr and says why;
- one record is one line: control characters in a message (node text such as
  firmware strings or interface names, exception messages) are escaped, and
  a newline we log on purpose (a traceback) continues as an indented
  "  | " line, so no text from a node can forge a record of its own.
"""

from __future__ import annotations

import logging
import os
import sys

SYSLOG_SOCKET = "/dev/log"

def clean(text: str) -> str:
    """Escape control and line-breaking characters (C0, DEL, C1, U+2028/9) as \\xNN/\\uNNNN."""
    out = []
    for ch in text:
        o = ord(ch)
        if o < 0x20 or o == 0x7F or 0x80 <= o < 0xA0 or o in (0x2028, 0x2029):
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


class SafeFormatter(logging.Formatter):
    """Format, then make the record one record: see the module docstring."""

    def format(self, record: logging.LogRecord) -> str:
        return "\n  | ".join(clean(line) for line in super().format(record).split("\n"))


def open_log_file(path: str):
    """A text stream appending to path, or raise OSError saying why not."""
    from .atomic import ensure_dir
    from .security import UnsafePath, check_root_only

    if not path or not os.path.isabs(path):
        raise OSError(f"log_file {path!r} is not an absolute path")
    try:
        check_root_only(os.path.dirname(path), "log dir")
    except UnsafePath as exc:
        raise OSError(str(exc)) from None
    ensure_dir(os.path.dirname(path))
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags, 0o640)
    except OSError as exc:
        raise OSError(f"{path}: {exc.strerror or exc}"
                      + (" (a symlink: refusing to follow it)" if os.path.islink(path) else "")) from None
    import stat

    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (os.geteuid() == 0 and (st.st_uid != 0 or st.st_mode & 0o022)):
        os.close(fd)
        raise OSError(f"{path}: not a regular file only root can write: refusing to log to it")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")


def setup(hooks_cfg: dict | None) -> logging.Logger:
    log = logging.getLogger("slurmqual")
    if log.handlers:
        return log
    log.setLevel(logging.INFO)
    log.propagate = False
    handler: logging.Handler | None = None
    problem = None
    use_syslog = hooks_cfg is None or hooks_cfg.get("syslog", True)
    if use_syslog and os.path.exists(SYSLOG_SOCKET):
        try:
            from logging.handlers import SysLogHandler

            handler = SysLogHandler(address=SYSLOG_SOCKET)
            handler.setFormatter(SafeFormatter("slurmqual[%(process)d]: %(levelname)s %(message)s"))
        except OSError:
            handler = None
    if handler is None and hooks_cfg is not None:
        try:
            handler = logging.StreamHandler(open_log_file(hooks_cfg.get("log_file")))
            handler.setFormatter(SafeFormatter("%(asctime)s slurmqual[%(process)d] %(levelname)s %(message)s"))
        except (OSError, TypeError) as exc:
            problem = str(exc)
            handler = None
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(SafeFormatter("slurmqual[%(process)d]: %(levelname)s %(message)s"))
    log.addHandler(handler)
    if problem:
        log.warning("not logging to the configured log_file: %s", problem)
    return log
