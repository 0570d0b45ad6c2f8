"""Which N nodes a job gets, and the files a launcher reads them from.

The best N passing nodes by score (worst network key / its median); with a
topology, whole switches first: the switches with the most passing nodes
are taken whole while they fit (a switch that fills the rest exactly
first), the rest from the switch that holds it with the fewest spare nodes. A job on
fewer switches crosses fewer uplinks.

Files (in the job's working directory unless --out DIR), written only when
N were found, each atomically:

- `slurmqual-preflight-<job>.hosts`: the N names, one a line (torchrun,
  mpirun --hostfile, DeepSpeed);
- `slurmqual-preflight-<job>.nodelist`: the same as a Slurm node list for
  `srun --nodelist` (e.g. `n[1-3,5]`);
- `slurmqual-preflight-<job>.master`: the rendezvous host (the first node);
- `slurmqual-preflight-<job>.exclude`: the nodes that did not pass, as a
  node list for `sbatch --exclude` (written whenever the preflight finished);
- `slurmqual-preflight-<job>.json`: the whole report (always written).
"""

from __future__ import annotations

import os

OUTPUTS = ("hosts", "nodelist", "master")


def rank(scores: dict[str, float | None]) -> list[str]:
    """Best first: higher score first; nodes without a score (speed not
    judged) after those with one, each in name order."""
    from ..burnin.judge.analyze import _natural

    return sorted(scores, key=lambda n: (scores[n] is None, -(scores[n] or 0.0), _natural(n)))


def choose(scores: dict[str, float | None], need: int, switch_of: dict[str, str] | None = None) -> list[str]:
    """`need` nodes of `scores` (the passing ones), or all of them when fewer."""
    order = rank(scores)
    if need >= len(order):
        return order
    if not switch_of or len({switch_of.get(n, "") for n in order}) < 2:
        return order[:need]
    per: dict[str, list[str]] = {}
    for n in order:  # best first within each switch
        per.setdefault(switch_of.get(n, ""), []).append(n)
    position = {n: i for i, n in enumerate(order)}
    # the fullest switches first; equal sizes: the one with the better nodes
    switches = sorted(per, key=lambda s: (-len(per[s]), sum(position[n] for n in per[s]) / len(per[s]), s))
    chosen: list[str] = []
    left = list(switches)
    while len(chosen) < need and left:
        room = need - len(chosen)
        exact = [s for s in left if len(per[s]) == room]
        if exact:                       # a whole switch that fills it exactly
            s = exact[0]
        elif len(per[left[0]]) <= room:  # the fullest switch fits whole
            s = left[0]
        else:                           # part of the switch with the fewest spare nodes
            s = min((s for s in left if len(per[s]) >= room), key=lambda s: (len(per[s]), switches.index(s)))
        chosen += per[s][:room]
        left.remove(s)
    return sorted(chosen, key=position.__getitem__)


def output_paths(directory: str, job_id: str) -> dict[str, str]:
    return {kind: os.path.join(directory, f"slurmqual-preflight-{job_id}.{kind}")
            for kind in (*OUTPUTS, "exclude", "json")}


def remove_outputs(directory: str, job_id: str) -> None:
    """A requeued job or a second preflight in the same job must never find
    the last attempt's hostfile: gone before anything runs."""
    for kind, path in output_paths(directory, job_id).items():
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def write_outputs(directory: str, job_id: str, chosen: list[str]) -> dict[str, str]:
    """The hostfile, node list and rendezvous host for `chosen` (best first)."""
    from ..atomic import write_text
    from ..slurm import compress

    paths = output_paths(directory, job_id)
    write_text(paths["hosts"], "".join(f"{n}\n" for n in chosen), durable=False)
    write_text(paths["nodelist"], compress(chosen) + "\n", durable=False)
    write_text(paths["master"], chosen[0] + "\n", durable=False)
    return {k: paths[k] for k in OUTPUTS}


def write_exclude(directory: str, job_id: str, bad: list[str]) -> str:
    """The nodes that did not pass, for `sbatch --exclude` (empty: none)."""
    from ..atomic import write_text
    from ..slurm import compress

    path = output_paths(directory, job_id)["exclude"]
    write_text(path, (compress(bad) if bad else "") + "\n", durable=False)
    return path


def write_report(directory: str, job_id: str, report: dict) -> str:
    import json

    from ..atomic import write_text

    path = output_paths(directory, job_id)["json"]
    write_text(path, json.dumps(report, indent=1, sort_keys=True) + "\n", durable=False)
    return path
