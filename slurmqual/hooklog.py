"""Hook logging: syslog/journal when /dev/log exists (and hooks.syslog), else
the configured log file. Never raises: a hook must not fail because of logging."""

from __future__ import annotations

import logging
import os
import sys


def setup(hooks_cfg: dict | None) -> logging.Logger:
    log = logging.getLogger("slurmqual")
    if log.handlers:
        return log
    log.setLevel(logging.INFO)
    log.propagate = False
    handler: logging.Handler | None = None
    use_syslog = hooks_cfg is None or hooks_cfg.get("syslog", True)
    if use_syslog and os.path.exists("/dev/log"):
        try:
            from logging.handlers import SysLogHandler

            handler = SysLogHandler(address="/dev/log")
            handler.setFormatter(logging.Formatter("slurmqual[%(process)d]: %(levelname)s %(message)s"))
        except OSError:
            handler = None
    if handler is None and hooks_cfg is not None:
        path = hooks_cfg.get("log_file")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handler = logging.FileHandler(path)
            handler.setFormatter(logging.Formatter("%(asctime)s slurmqual[%(process)d] %(levelname)s %(message)s"))
        except (OSError, TypeError):
            handler = None
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
    log.addHandler(handler)
    return log
