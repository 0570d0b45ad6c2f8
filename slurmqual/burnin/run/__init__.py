"""Burn-in stage: running a run (a flow; the top of the burn-in).

Submit, watch and drain (runner), the task on the nodes (task, gputask), the
retest rounds (retest). Imports every stage below it.
"""
