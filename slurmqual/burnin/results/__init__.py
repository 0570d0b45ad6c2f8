"""Burn-in stage: what a run leaves, and showing it.

The run directory's one reader and writer (rundir), the run store (store) and
the report. Imports judge and records, never run.
"""
