"""Slurm's output formats, in one place, per generation.

Every Slurm record slurmqual reads goes through here:

- ``version``: which Slurm (``scontrol -V``, a JSON document's ``meta``) and
  which data format generation that implies;
- ``nodes``: node records (NodeInfo) and a node's partitions and features, of ``sinfo --json`` (22.05), ``scontrol show nodes
  --json`` (23.02+) and slurmrestd v0.0.36-v0.0.45;
- ``jobs``: job records of ``squeue --json`` / slurmrestd of each generation
  (wrapped numbers from 23.02, ``job_state`` a list from 23.11);
- ``oneliner``: ``scontrol show node --oneliner`` text, where fields after
  ``Reason=`` (Comment=, Extra=, InstanceId=, ReservationName=, ...) must not
  be read as part of the reason;
- ``numbers``: the ``{"set", "infinite", "number"}`` wrapped numbers.

The generation is picked from what the installed Slurm says about itself,
never by trying shapes until one fits. A shape we do not know is a
``FormatError`` naming the Slurm version: a drained node must never read as
idle because a field moved.
"""

from __future__ import annotations

from .errors import FormatError, SlurmError
from .jobs import JobRecord, decode_jobs
from .nodes import NodeInfo, decode_nodes, groups_from_doc, groups_from_oneliner
from .oneliner import parse_node_oneliner
from .version import SlurmVersion, doc_version, parse_version

__all__ = ["FormatError", "JobRecord", "NodeInfo", "SlurmError", "SlurmVersion", "decode_jobs", "decode_nodes",
           "doc_version", "groups_from_doc", "groups_from_oneliner", "parse_node_oneliner", "parse_version"]
