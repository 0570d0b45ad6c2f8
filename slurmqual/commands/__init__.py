"""Subcommands of the CLI, one module each (see slurmqual.cli.COMMANDS)."""
