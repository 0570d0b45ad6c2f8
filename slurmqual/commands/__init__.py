"""Subcommands of the CLI, one module each (see slurmqual.cli.COMMANDS)."""

from __future__ import annotations

import sys


def load_config(path: str | None):
    """The validated site config, or None after saying why on stderr (exit 2)."""
    from ..config import ConfigError, load

    try:
        return load(path)
    except ConfigError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return None
