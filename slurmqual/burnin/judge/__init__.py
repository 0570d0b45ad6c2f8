"""Burn-in stage: the fabric model and judging.

Noise and margins, pair keys, NICs/links/switches (components), GPUs, the
topology, the verdicts (analyze) and who meets whom (plan: a run's rounds and
the retest plan each analysis carries). Imports only the records below it.
"""
