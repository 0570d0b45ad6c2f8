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

A passing prolog logs nothing, so it should not pay for `import logging`
(~5 ms with threading, traceback and string) before every job: setup()
checks the log file at once (a problem is reported at once, as before) and
hands back a DeferredLog that configures the `slurmqual` logger at the first
record. With syslog, the socket is tried at that first record too.
"""

from __future__ import annotations

import os
import sys

SYSLOG_SOCKET = "/dev/log"
SYSLOG_FORMAT = "slurmqual[%(process)d]: %(levelname)s %(message)s"
FILE_FORMAT = "%(asctime)s slurmqual[%(process)d] %(levelname)s %(message)s"

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


def _formatter_class() -> type:
    import logging

    class SafeFormatter(logging.Formatter):
        """Format, then make the record one record: see the module docstring."""

        def format(self, record: logging.LogRecord) -> str:
            return "\n  | ".join(clean(line) for line in super().format(record).split("\n"))

    return SafeFormatter


def _safe_formatter() -> type:
    """SafeFormatter, defined (importing logging) on first use."""
    cls = globals().get("SafeFormatter")
    if cls is None:
        cls = globals()["SafeFormatter"] = _formatter_class()
    return cls


def __getattr__(name: str):
    # hooklog.SafeFormatter (a logging.Formatter) exists once something asks for it.
    if name == "SafeFormatter":
        return _safe_formatter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def setup(hooks_cfg: dict | None):
    """The hook's logger: the configured `slurmqual` logger, or a DeferredLog
    that configures it at the first record (see the module docstring)."""
    logging = sys.modules.get("logging")
    if logging is not None and logging.getLogger("slurmqual").handlers:
        return logging.getLogger("slurmqual")
    if (hooks_cfg is None or hooks_cfg.get("syslog", True)) and os.path.exists(SYSLOG_SOCKET):
        return DeferredLog(hooks_cfg)
    if hooks_cfg is None:
        return DeferredLog(None)  # stderr
    try:
        stream = open_log_file(hooks_cfg.get("log_file"))
    except (OSError, TypeError):
        return _configure(hooks_cfg)  # now: it has a warning to give
    return DeferredLog(hooks_cfg, stream)


class DeferredLog:
    """Stands in for the `slurmqual` logger until the first record, then
    configures it (with the log file setup() opened, if any) and forwards."""

    __slots__ = ("_hooks_cfg", "_stream", "_log")

    def __init__(self, hooks_cfg: dict | None, stream=None):
        self._hooks_cfg = hooks_cfg
        self._stream = stream
        self._log = None

    def logger(self):
        """The configured logging.Logger (configured now if not yet)."""
        if self._log is None:
            stream, self._stream = self._stream, None
            self._log = _configure(self._hooks_cfg, stream)
        return self._log

    def debug(self, msg, *args, **kwargs) -> None:
        self.logger().debug(msg, *args, **kwargs)

    def info(self, msg, *args, **kwargs) -> None:
        self.logger().info(msg, *args, **kwargs)

    def warning(self, msg, *args, **kwargs) -> None:
        self.logger().warning(msg, *args, **kwargs)

    def error(self, msg, *args, **kwargs) -> None:
        self.logger().error(msg, *args, **kwargs)

    def exception(self, msg, *args, **kwargs) -> None:
        self.logger().exception(msg, *args, **kwargs)

    def critical(self, msg, *args, **kwargs) -> None:
        self.logger().critical(msg, *args, **kwargs)

    def log(self, level, msg, *args, **kwargs) -> None:
        self.logger().log(level, msg, *args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.logger(), name)

    def __del__(self) -> None:
        stream = getattr(self, "_stream", None)
        if stream is not None:  # never logged: close the file setup() opened
            stream.close()


def _configure(hooks_cfg: dict | None, stream=None):
    """Set up the `slurmqual` logger: syslog (unless a log file stream was
    already opened), else the log file, else stderr saying why."""
    import logging

    log = logging.getLogger("slurmqual")
    if log.handlers:
        if stream is not None:
            stream.close()
        return log
    formatter = _safe_formatter()
    log.setLevel(logging.INFO)
    log.propagate = False
    handler: logging.Handler | None = None
    problem = None
    use_syslog = stream is None and (hooks_cfg is None or hooks_cfg.get("syslog", True))
    if use_syslog and os.path.exists(SYSLOG_SOCKET):
        try:
            from logging.handlers import SysLogHandler

            handler = SysLogHandler(address=SYSLOG_SOCKET)
            handler.setFormatter(formatter(SYSLOG_FORMAT))
        except OSError:
            handler = None
    if handler is None and hooks_cfg is not None:
        try:
            handler = logging.StreamHandler(stream if stream is not None else open_log_file(hooks_cfg.get("log_file")))
            handler.setFormatter(formatter(FILE_FORMAT))
        except (OSError, TypeError) as exc:
            problem = str(exc)
            handler = None
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter(SYSLOG_FORMAT))
    log.addHandler(handler)
    if problem:
        log.warning("not logging to the configured log_file: %s", problem)
    return log
