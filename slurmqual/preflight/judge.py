"""What a preflight's measurements say about each node.

The network is judged by the burn-in's own analysis (`burnin/judge/analyze.py`), never
by a second set of rules: against the fleet's stored medians per key (the
store the burn-ins fill) when there are some, so an allocation of 2 to 16
nodes can be judged with no fleet around it; without them against the
allocation's own median when it has at least `min_own_median` nodes; else
speed is not judged and says so. With a topology and enough nodes the
allocation is also judged against itself with the switches in view: a node
that is slow only because its switch is slow is not a slow node.

A node's preflight verdict:

- ``pass``: its checks passed (warnings and errors do not fail a job's node,
  as in the prolog) and the network found nothing against it;
- ``fail``: a check failed, or the analysis fails it (slow, a failed NIC,
  data corruption): the reason says which;
- ``suspect``: below the line but inside the noise margin (the burn-in
  would retest it; a preflight has no time to): not chosen, never drained;
- ``untested``: its checks did not report, or it has no valid network
  measurement (its pair steps failed or ran out of time): not chosen, never drained.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Exit codes of `slurmqual preflight` (docs/PREFLIGHT.md).
EXIT_OK = 0            # --need N: N chosen; without: every node passed
EXIT_USAGE = 2         # not inside a job, bad arguments or config, nothing could run
EXIT_NOT_ENOUGH = 3    # --need N: fewer than N nodes passed (the files are not written)
EXIT_SOME_FAILED = 4   # without --need: some node did not pass (the report lists them)
EXIT_INTERRUPTED = 5   # SIGTERM/SIGINT (scancel, the job's time limit): nothing written but the report


@dataclass
class NodeOutcome:
    node: str
    verdict: str = "pass"                 # pass, fail, suspect, untested
    checks: str = "missing"               # the worst check status, or missing (no report)
    failed_checks: list[str] = field(default_factory=list)
    speed: str = "not judged"             # the analysis' verdict, or "not judged"
    score: float | None = None            # worst key's score / its median (1.0: at the median)
    reason: str = ""                      # the drain reason's detail (after "slurmqual: preflight: ")
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"node": self.node, "verdict": self.verdict, "checks": self.checks,
                "failed_checks": self.failed_checks, "speed": self.speed, "score": self.score,
                "reason": self.reason, "notes": self.notes}


_CHECK_RANK = {"pass": 0, "na": 0, "skip": 0, "warn": 1, "error": 2, "fail": 3}


def check_outcome(report: dict | None) -> tuple[str, list[dict]]:
    """(worst status, failing check dicts) of one node's `slurmqual check
    --json` object; ("missing", []) for no report or one of the wrong shape."""
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list):
        return "missing", []
    worst, failed = "pass", []
    for c in report["checks"]:
        if not isinstance(c, dict) or not isinstance(c.get("status"), str) or not isinstance(c.get("name"), str):
            return "missing", []
        if _CHECK_RANK.get(c["status"], 0) > _CHECK_RANK[worst]:
            worst = c["status"]
        if c["status"] == "fail":
            failed.append(c)
    return worst, failed


def speed_mode(keys: set[str], levels: dict[str, float], nodes: int, min_own: int) -> tuple[dict[str, float], str]:
    """(the stored levels that judge, mode): ``fleet`` (every measured key has a
    stored median), ``mixed`` (some do; the others against the allocation),
    ``own`` (none; the allocation's own median), ``none`` (none and too few
    nodes: speed not judged, or only the keys with a stored median)."""
    have = {k: v for k, v in levels.items() if k in keys and v}
    if keys and len(have) == len(keys):
        return have, "fleet"
    if nodes >= min_own:
        return have, "mixed" if have else "own"
    return have, "fleet" if have else "none"


def judged_measurements(raw: list[dict], levels: dict[str, float], mode: str) -> list[dict]:
    """The measurements the analysis gets: all of them, except with too few
    nodes for an own median, where only keys with a stored median (and the
    per-node and per-GPU lines, which never pass a node alone) count."""
    if mode != "fleet" or not levels:
        return raw if mode != "none" else []
    from ..burnin.judge.analyze import Measurement, split_key

    out = []
    for d in raw:
        m = Measurement.from_dict(d)
        key = getattr(m, "key", None)
        if key is None or key in levels or split_key(key)[1] not in ("pair", "rail"):
            out.append(d)
    return out


def analyse(raw: list[dict], scope: list[str], params, baselines: dict, levels: dict[str, float],
            topology, min_own: int) -> tuple[dict | None, str, list[str]]:
    """Judge the network with the burn-in's analysis: (analysis dict or None
    when speed is not judged, mode, notes for the report)."""
    from ..burnin.judge.analyze import Measurement, analyze

    notes: list[str] = []
    ms = [Measurement.from_dict(d) for d in raw]
    keys = {m.key for m in ms if not hasattr(m, "gpu") and m.ok and m.topology in ("pair", "rail")}
    judging, mode = speed_mode(keys, levels, len(scope), min_own)
    if mode == "none":
        notes.append(f"speed not judged: no stored fleet median for {', '.join(sorted(keys)) or 'any key'} "
                     f"and {len(scope)} nodes are fewer than {min_own} to judge against each other")
        return None, mode, notes
    use = [Measurement.from_dict(d) for d in judged_measurements(raw, judging, mode)]
    if mode == "fleet" and len(judging) < len(keys):
        notes.append("not judged (no stored median, too few nodes): " + ", ".join(sorted(keys - judging.keys())))
    a = analyze(use, scope, params, baselines, fleet_level=judging or None, topology=topology)
    out = a.to_dict()
    if judging and topology is not None and len(scope) >= min_own:
        # The stored level judges each node alone; judged against itself with
        # the switches in view, the allocation says which slowness is a switch's.
        own = analyze(ms, scope, params, baselines, topology=topology).to_dict()
        out["suspect_switches"] = sorted(set(out["suspect_switches"]) | set(own["suspect_switches"]))
        out["switch_findings"] = out["switch_findings"] + own["switch_findings"]
        for n, v in out["nodes"].items():
            mine = own["nodes"].get(n) or {}
            if mine.get("behind_suspect_switch") and v["verdict"] != "pass" and mine.get("verdict") == "pass":
                v["behind_suspect_switch"] = mine["behind_suspect_switch"]
                v["verdict"] = "pass"
                v["why"] = "slow behind suspect switch " + ",".join(mine["behind_suspect_switch"]) + \
                    " (a switch, not the node)"
                if n in out["drain"]:
                    out["drain"].remove(n)
        out["problems"] = out["problems"] + [p for p in own["problems"] if p.startswith("suspect switch")]
    notes.append({"fleet": "judged against the fleet's stored medians",
                  "mixed": "judged against the fleet's stored medians where there are some, else the allocation's own",
                  "own": f"no stored fleet median: judged against the allocation's own median ({len(scope)} nodes)"}[mode])
    return out, mode, notes


def relative_score(analysis: dict, node: str) -> float | None:
    """The node's worst network key as a share of that key's median."""
    v = (analysis.get("nodes") or {}).get(node) or {}
    medians = analysis.get("median") or {}
    worst = None
    for k, kv in (v.get("keys") or {}).items():
        med, score = medians.get(k), kv.get("score")
        if med and score is not None and k.split(":")[1:2] in (["pair"], ["rail"]):
            r = score / med
            worst = r if worst is None else min(worst, r)
    return round(worst, 4) if worst is not None else None


def tested_nodes(raw: list[dict]) -> set[str]:
    """Nodes with at least one valid multi-node measurement."""
    return {n for d in raw if d.get("ok") and len(d.get("nodes") or ()) == 2 and "gpu" not in d for n in d["nodes"]}


def gpu_faults(node: str, raw: list[dict]) -> tuple[list[str], list[str]]:
    """(faults, runs that gave no number) of a node's per-GPU lines: a GPU
    whose tool counted compare errors is a fault; a run that gave no number
    (timed out, crashed) proves nothing either way; a tool not installed is
    neither (untested, as in a burn-in)."""
    faults, empty = [], []
    for d in raw:
        if "gpu" not in d or node not in (d.get("nodes") or ()):
            continue
        what = f"{d.get('tool', 'gpu tool')} GPU {d['gpu']} {d.get('test', '')}".rstrip()
        if d.get("errors"):
            faults.append(f"{what}: {d['errors']} compare errors")
        elif not d.get("ok") and "(untested)" not in str(d.get("error", "")):
            empty.append(f"{what}: {d.get('error') or 'no usable number'}")
    return faults, empty


def outcomes(nodes: list[str], reports: dict[str, dict], raw: list[dict], analysis: dict | None,
             speed_reason) -> dict[str, NodeOutcome]:
    """Every node's outcome from its check report and the analysis.
    `speed_reason(analysis, node)`: the burn-in's drain reason detail.
    A one-node allocation has no link to measure: its node is judged on its
    checks and, where they ran, its per-GPU tools (compare errors fail it, a
    run that gave no number leaves it untested), never `untested` for want
    of a partner it cannot have."""
    tested = tested_nodes(raw)
    alone = len(nodes) == 1
    out: dict[str, NodeOutcome] = {}
    for n in nodes:
        o = NodeOutcome(n)
        o.checks, failed = check_outcome(reports.get(n))
        o.failed_checks = [c["name"] for c in failed]
        v = ((analysis or {}).get("nodes") or {}).get(n) or {}
        if analysis is not None:
            o.speed = v.get("verdict", "untested")
            o.score = relative_score(analysis, n)
            if v.get("behind_suspect_switch"):
                o.notes.append("behind suspect switch " + ",".join(v["behind_suspect_switch"]) + " (not a node fault)")
            if v.get("why"):
                o.notes.append(v["why"])
        if o.checks == "error":
            o.notes.append("a check could not judge (error): not a failure, as in the prolog")
        if failed:
            o.verdict = "fail"
            first = failed[0]
            more = f" (+{len(failed) - 1} more: {','.join(c['name'] for c in failed[1:])})" if len(failed) > 1 else ""
            o.reason = f"{first['name']}: {first.get('message', '')}{more}"
        elif o.checks == "missing":
            o.verdict = "untested"
            o.notes.append("its checks did not report (the step failed or ran out of time)")
        elif o.speed == "fail":
            o.verdict = "fail"
            o.reason = speed_reason(analysis, n)
            if n not in (analysis.get("drain") or []):
                o.notes.append("slow, but the analysis' blast-radius guard holds every drain (a fabric-wide problem?)")
        elif alone and gpu_faults(n, raw)[0]:
            faults = gpu_faults(n, raw)[0]
            o.verdict = "fail"
            o.reason = faults[0] + (f" (+{len(faults) - 1} more)" if len(faults) > 1 else "")
        elif alone and gpu_faults(n, raw)[1]:
            o.verdict = "untested"
            o.notes.append("a GPU tool gave no number: " + "; ".join(gpu_faults(n, raw)[1][:3]))
        elif alone and o.speed != "fail":
            ran = sorted({d.get("tool", "?") for d in raw if "gpu" in d and d.get("ok") and n in (d.get("nodes") or ())})
            o.notes.append("one-node allocation: no link to measure; judged on its checks"
                           + (f" and its GPU tools ({', '.join(ran)})" if ran else ""))
        elif n not in tested:
            o.verdict = "untested"
            o.notes.append("no valid network measurement (its pair steps failed or ran out of time)")
        elif o.speed in ("retest",):
            o.verdict = "suspect"
            o.notes.append("below the line within the noise margin: a burn-in would retest it")
        elif o.speed == "untested" and analysis is not None:
            o.verdict = "untested"
            if not v.get("why"):
                o.notes.append("the analysis could not judge it (too few valid pair measurements)")
        out[n] = o
    return out


def drainable(outs: dict[str, NodeOutcome], analysis: dict | None) -> list[str]:
    """Nodes a preflight may drain: a failed check, or a fail the analysis
    itself would drain (never one its guard holds, never suspect/untested)."""
    drain = set((analysis or {}).get("drain") or [])
    return [n for n, o in outs.items() if o.verdict == "fail" and (o.failed_checks or n in drain)]
