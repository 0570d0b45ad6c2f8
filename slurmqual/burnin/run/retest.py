"""Retest rounds: a burn-in decides its ambiguous nodes itself.

A node below the line but inside the noise margin is `retest`. The analysis
job of a run (`burnin analyze RUN --follow-up`), seeing such nodes and
retest rounds left (`burnin.max_retest_rounds`, recorded in plan.json at
submit; 0 with `submit --no-retest`), submits the next round as part of the
same run: task jobs pinned to exactly the suspects and their proven-good
partners (new partners, under other switches when a switch map is known),
with the run's partition and reservation, and a new analysis job that
depends on them. That analysis judges *all* the run's measurements.

Run directory, one file per stage, each written whole (atomic):

- plan.json, jobs.json, results/task-<i>.json: the first round (stage 0);
- retest-<k>.json: round k's suspects, pair rounds, groups, task and
  analysis job ids and its state (`submitting`, `submitted`, `failed`,
  `cancelled`); results/task-r<k>-<i>.json its task results;
- analysis.json: the latest analysis, whose `retest` section says which
  stage it judged, the next round if one was submitted, and whether the run
  is decided (`final`); an analysis by hand while the run's jobs still run
  says why it is `interim` (never final).

A reader (watch, status, requalify) compares the latest stage with its jobs'
states: a cancelled run leaves every file consistent, only unfinished.
"""

from __future__ import annotations

import time

from ..judge.plan import RoundState, to_remeasure
from ..results import rundir
from ..results.rundir import load_stage, submitted, task_id, write_stage


# -- planning the next round ----------------------------------------------------

def partners_met(raw: list[dict]) -> dict[str, set[str]]:
    """Who has been paired with whom in this run (any pair test, valid or not)."""
    from ..judge.plan import met_of

    return met_of(m.get("nodes") or [] for m in raw)


def round_state(run_dir: str, adapter_of, switch_of: dict[str, str] | None, scope: list[str],
                problems: list[str], max_rounds: int = 0) -> RoundState:
    """What the next round is planned from: the fails every earlier analysis
    of the run decided (recorded in the round it submitted, whatever became
    of that round), and the nodes of `scope` Slurm says no job can run on
    (drained or down: by this run, or by someone else since; `adapter_of`
    None: not asked). Slurm unreadable: a problem, and the plan leaves out only the run's own fails.
    `max_rounds`: the run's retest rounds; all submitted, the state is the last one's."""
    from ...slurm import SlurmError

    decided: dict[str, dict] = {}
    stages = rundir.stages(run_dir)
    for st in stages:
        for n, d in (st.get("decided") or {}).items():
            if isinstance(d, dict):  # the latest record; the round that first decided it
                first = decided.get(n, d).get("round")
                decided[n] = dict(d, round=first, held=n in (st.get("suspects") or ()) and st.get("state") == "submitted")
    cleared = carried_links(stages)
    retested = retested_in(stages)
    unavailable: dict[str, str] = {}
    wanted = set(scope)
    last = max_rounds > 0 and max((s["round"] for s in submitted(run_dir)), default=0) >= max_rounds
    if adapter_of is None:  # no rounds in this run (or no Slurm to ask)
        return RoundState(decided, unavailable, switch_of, last=last, cleared=cleared, retested=retested)
    try:
        for i in adapter_of().node_info():
            if i.name in wanted and (i.drained or i.state in ("down", "future", "unknown")):
                unavailable[i.name] = f"{i.state}{'+' + '+'.join(i.flags) if i.flags else ''}" \
                    f"{': ' + i.reason if i.reason else ''}"
    except (SlurmError, OSError) as exc:
        problems.append(f"node states unreadable ({exc}): the retest plan leaves out only this run's own fails")
    return RoundState(decided, unavailable, switch_of, last=last, cleared=cleared, retested=retested)


def retested_in(stages: list[dict]) -> dict[str, int]:
    """Node -> how many submitted retest rounds had it as a suspect (a round
    whose submission failed or was cancelled measured nothing)."""
    out: dict[str, int] = {}
    for st in stages:
        if st.get("state") == "submitted":
            for n in st.get("suspects") or ():
                if isinstance(n, str):
                    out[n] = out.get(n, 0) + 1
    return out


def carried_links(stages: list[dict]) -> list[list[str]]:
    """The links an earlier analysis of the run cleared (recorded in the round
    it submitted, `cleared`) that no round since measured again: they stay
    cleared. A later analysis judging them on the same values undid them
    (a new clearly low pair elsewhere in the fleet, pairs.suspect_links'
    `away`) and, rounds spent, dropped them unsettled: a settled question
    asked again with no new answer. Measured again, the new values decide."""
    latest: dict[tuple[str, ...], int] = {}  # link -> the last round whose record carried it
    for st in stages:
        for x in st.get("cleared") or ():
            if isinstance(x, list) and len(x) >= 2 and all(isinstance(y, str) for y in x):
                latest[tuple(x)] = st["round"]
    again = [(st["round"], {frozenset(p) for rnd in st.get("rounds") or () for p in rnd if len(p) == 2})
             for st in stages]
    return [list(x) for x, k in latest.items()
            if not any(r >= k and frozenset(x[:2]) in pairs for r, pairs in again)]


def suspects_in(rounds: list[list[list[str]]]) -> list[str]:
    """A round's suspects: the first of each pair (a proven-good partner is
    second), both ends of a suspect link measured again."""
    return sorted({p[0] for rnd in rounds for p in rnd})


def group_pairs(rounds: list[list[list[str]]], size: int) -> list[list[str]]:
    """Task groups for a retest round: nodes linked by a pair stay in one
    group (a pair runs inside one job); linked sets are packed up to `size`."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for rnd in rounds:
        for a, b in rnd:
            parent[find(a)] = find(b)
    sets: dict[str, list[str]] = {}
    for n in sorted(parent):
        sets.setdefault(find(n), []).append(n)
    out: list[list[str]] = []
    for members in sorted(sets.values(), key=lambda m: (-len(m), m)):
        fit = [g for g in out if len(g) + len(members) <= size]
        if fit:
            min(fit, key=len).extend(members)
        else:
            out.append(list(members))
    return [sorted(g) for g in out]


# -- submitting it ----------------------------------------------------------------

class RetestSubmitError(Exception):
    pass


def submit_round(config, adapter, run_dir: str, plan: dict, stage: int,
                 rounds: list[list[list[str]]], gpu: dict[str, list[str]] | None = None,
                 decided: dict[str, dict] | None = None, cleared: list[list[str]] | None = None) -> dict:
    """Submit retest round `stage`: pinned task jobs (the run's partition,
    reservation and job names) and an analysis job depending on them. The
    record goes to retest-<stage>.json before the first sbatch (`submitting`)
    and after the last (`submitted`). Any failure or interruption cancels what
    was submitted and records `failed`/`cancelled` with the reason;
    `decided`: the fails the analysis submitting it decided (they stay fail),
    `cleared`: the suspect links it settled (they stay settled unless measured again). `gpu`
    (node -> GPU tools, gputask.retest_tools): the suspects whose GPUs run
    their tools again in this round."""
    from .runner import JobLines, submit_jobs

    groups = group_pairs(rounds, max(2, config["burnin"]["group_size"]))
    suspects = suspects_in(rounds)
    record = {"round": stage, "of": plan.get("max_retest_rounds", 0), "state": "submitting", "time": time.time(),
              "suspects": suspects, "rounds": rounds, "groups": groups, "tasks": {}, "analysis": None,
              "gpu": {n: tools for n, tools in (gpu or {}).items() if n in suspects}, "decided": decided or {},
              "cleared": [list(x) for x in cleared or ()]}
    write_stage(run_dir, record)
    lines = JobLines(config, plan["run_id"], run_dir, plan.get("partition"), plan.get("reservation"),
                     bool(plan.get("rounds")))
    ids = [task_id(stage, i) for i in range(len(groups))]
    try:
        jobs, analysis = submit_jobs(adapter, [(lines.task(t, g), lines.task_script(t)) for t, g in zip(ids, groups)],
                                     (lines.analysis(stage), lines.analysis_script(stage)), plan["run_id"])
    except BaseException as exc:
        record.update(state="failed" if isinstance(exc, Exception) else "cancelled",
                      error=str(exc) or type(exc).__name__,
                      tasks=dict(zip(ids, getattr(exc, "submitted", []))))
        write_stage(run_dir, record)
        if isinstance(exc, Exception):
            raise RetestSubmitError(record["error"]) from None
        raise
    record.update(state="submitted", tasks=dict(zip(ids, jobs)), analysis=analysis)
    write_stage(run_dir, record)
    return record


def cancel_round(adapter, run_dir: str, record: dict, why: str) -> None:
    """An analysis interrupted after it submitted the next round: that round
    is cancelled (its jobs too), so a cancelled run stops here."""
    try:
        adapter.cancel([*record.get("tasks", {}).values(), *([record["analysis"]] if record.get("analysis") else [])])
    finally:
        record.update(state="cancelled", error=why)
        write_stage(run_dir, record)


# -- deciding what this analysis does -----------------------------------------------

def guard_cap(analysis, cfg: dict) -> int:
    tested = sum(1 for v in analysis.nodes.values() if v["verdict"] != "untested")
    return max(cfg["guard_min"], int(cfg["guard_fraction"] * tested))


def settle(config, run_dir: str, plan: dict, raw: list[dict], analysis, follow_up: int | None, adapter_of,
           trusted: set[str] | None = None, switch_of: dict[str, str] | None = None, log=print,
           state: RoundState | None = None, interim: str | None = None) -> dict:
    """_settle, and for a final analysis (no round follows) `untested`: every
    node the run ends with untested, with its reason (the retest budget, no
    valid pair measurement, no proven-good partner, still within the noise
    after the last round, not retested because of its Slurm state). The
    report and the summary of `burnin analyze` say the run ended with them.
    `interim`: why the run is not finished (an analysis by hand while its
    jobs still run): the section says so, is not final and settles nothing
    (the run's own analysis job does, with every measurement)."""
    if interim:
        done = max((s["round"] for s in submitted(run_dir)), default=0)
        return {"round": done, "max_rounds": int(plan.get("max_retest_rounds") or 0), "next": None,
                "final": False, "interim": interim, "untested": {}}
    section = _settle(config, run_dir, plan, raw, analysis, follow_up, adapter_of, trusted, switch_of, log, state)
    section["untested"] = final_untested(analysis) if section["final"] else {}
    return section


def final_untested(analysis) -> dict[str, str]:
    """node -> why, for every `untested` node of the analysis."""
    return {n: v.get("why") or "no reason recorded" for n, v in sorted(analysis.nodes.items())
            if v["verdict"] == "untested"}


def _settle(config, run_dir: str, plan: dict, raw: list[dict], analysis, follow_up: int | None, adapter_of,
            trusted: set[str] | None = None, switch_of: dict[str, str] | None = None, log=print,
            state: RoundState | None = None) -> dict:
    """Decide this analysis' place in the run and change `analysis` to match:
    submit the next retest round, exactly `analysis.retest_plan` (`follow_up`:
    the round this analysis job of the run judges; None for an analysis by
    hand, which submits nothing), hold the decided fails' drains when the
    final count could trip the guard (and the drains of nodes the round
    re-measures), or, rounds spent, turn the nodes still `retest` into
    `untested` with the reason. `state`: what the analysis was judged with
    (round_state); its unavailable nodes' reasons. Returns the analysis' `retest` section."""
    max_rounds = int(plan.get("max_retest_rounds") or 0)
    done = follow_up if follow_up is not None else max((s["round"] for s in submitted(run_dir)), default=0)
    section = {"round": done, "max_rounds": max_rounds, "next": None, "final": True}
    if max_rounds and done >= max_rounds and not analysis.guard_tripped:
        _unsettled_links(analysis, done)
    retest = sorted(n for n, v in analysis.nodes.items() if v["verdict"] == "retest")
    if (not retest and not analysis.retest_plan) or max_rounds == 0:
        return section  # nothing to retest, or --no-retest: the plan is printed, as before
    if analysis.guard_tripped:
        analysis.problems.append("no retest round: the blast-radius guard tripped (a fabric-wide problem "
                                 "is not decided by retesting nodes)")
        return section
    if done < max_rounds and follow_up is not None:
        nxt = _existing(run_dir, done + 1)
        if nxt is None:
            rounds = analysis.retest_plan
            _unplanned(analysis, retest, rounds, state)
            if not rounds:
                return section
            try:
                from .gputask import retest_tools

                nxt = submit_round(config, adapter_of(), run_dir, plan, done + 1, rounds, retest_tools(analysis.nodes),
                                   decided=decisions(analysis, done), cleared=analysis.clear_links)
            except RetestSubmitError as exc:
                analysis.problems.append(f"retest round {done + 1} of {max_rounds} could not be submitted: {exc}; "
                                         f"{', '.join(retest) or 'its suspects'} stay retest (not drained); "
                                         "retest them by hand")
                section["failed"] = str(exc)
                return section
        analysis.retest_plan = nxt["rounds"]
        section.update(next={k: nxt[k] for k in ("round", "tasks", "analysis", "suspects")}, final=False)
        measured = [n for n in analysis.drain if n in nxt["suspects"]]
        if measured:
            analysis.problems.append(
                f"drains of {', '.join(measured)} held: round {done + 1} re-measures their rails to name the part")
            analysis.drain = [n for n in analysis.drain if n not in measured]
        fails = [n for n, v in analysis.nodes.items() if v["verdict"] == "fail"]
        # Still open: retests, and the nodes the budget left `untested` below
        # the line (every analysis judges them again, and a later one may fail
        # them: a 64-node fleet drained a node in round 0, and two nodes past
        # the budget failed in round 2, one more than the guard allows).
        still = [n for n, v in analysis.nodes.items() if v["verdict"] == "retest" or v["verdict"] == "untested"
                 and any(kv.get("verdict") in ("retest", "untested") for kv in v.get("keys", {}).values())]
        cap = guard_cap(analysis, config["burnin"])
        # Nodes below the line by their own level on one key (fails, retests,
        # and those the budget left undecided: pairs.clearly_below) may all
        # fail in the end: a 64-node fleet drained 2 of 8 nodes at 0.85 in
        # round 1 and held the rest in round 2, where the guard must hold all.
        slow = max((k.get("clearly_below", 0) for k in analysis.keys.values()), default=0)
        if analysis.drain and max(len(fails) + len(still), slow) > cap:
            analysis.problems.append(
                f"drains of {', '.join(analysis.drain)} held until the retest rounds end: {len(fails)} failing "
                f"and {len(still)} retest node(s) ({slow} below the line on one key) could exceed the guard's "
                f"limit of {cap}")
            section["held"] = analysis.drain
            analysis.drain = []
        log(f"retest round {done + 1} of {max_rounds} submitted for {', '.join(nxt['suspects'])}: "
            f"task jobs {','.join(nxt['tasks'].values())}, analysis job {nxt['analysis']}")
        return section
    if done >= max_rounds and retest:
        # Only a node a round re-measured is "still" below after the rounds:
        # the others were left out of every round (by the retest budget, or
        # first below the line in the last), and the reason says so.
        met = {n for s in submitted(run_dir) for rnd in s.get("rounds") or [] for pair in rnd for n in pair}
        again = [n for n in retest if n in met or not done]
        never = [n for n in retest if n not in again]
        if again:
            _undecided(analysis, again, f"still below the line within the noise after {done} retest round(s)")
        if never:
            _undecided(analysis, never, f"below the line within the noise; none of the {done} retest round(s) "
                                        "re-measured it (the retest budget kept others, or it fell below in the last)")
    if done >= max_rounds:
        analysis.retest_plan = []
    return section


def _unsettled_links(analysis, done: int) -> None:
    """Rounds spent: a suspect link no key's evidence settles (slow on one
    measurement, within what the fleet's noise and transient hits explain,
    or first measured in the last round) is not a part to replace: it
    leaves `suspect_links` with a problem line saying so, as a node still
    `retest` becomes `untested`. (At 8% noise these were most of the
    links named: 15-200 per 10 runs, none of them slow.)"""
    open_ = to_remeasure(analysis.suspect_links, getattr(analysis, "clear_links", []))
    if not open_:
        return
    drop = {tuple(x) for x in open_}
    analysis.suspect_links = [x for x in analysis.suspect_links if tuple(x) not in drop]
    shown = ", ".join("-".join(x[:2]) + (f" ({x[2]})" if len(x) > 2 else "") for x in open_[:10])
    analysis.problems.append(f"{len(open_)} suspect link(s) not settled after {done} retest round(s) (slow on one "
                             f"measurement, within the fleet's noise): not named: {shown}"
                             f"{' ...' if len(open_) > 10 else ''}")


def decisions(analysis, stage: int) -> dict[str, dict]:
    """The fails this analysis decided (stage: the round it judged), as the
    next round's record keeps them: later analyses keep them `fail`."""
    return {n: {"round": v.get("decided_in", stage), "key": v.get("key"), "score": v.get("score"),
                "failed_nics": v.get("failed_nics", [])}
            for n, v in sorted(analysis.nodes.items()) if v["verdict"] == "fail"}


def _unplanned(analysis, retest: list[str], rounds: list[list[list[str]]], state: RoundState | None) -> None:
    """`retest` nodes the next round leaves out: untested, saying why (a node
    no job can run on, or no proven-good partner left for it)."""
    planned = {n for rnd in rounds for p in rnd for n in p}
    out = [n for n in retest if n not in planned]
    unavailable = state.unavailable if state else {}
    for n in out:
        why = f"not retested: {unavailable[n]}" if n in unavailable else "no proven-good node to pair it with"
        _undecided(analysis, [n], why, clear_plan=False)


def _existing(run_dir: str, stage: int) -> dict | None:
    """A round already submitted (this analysis job was requeued): never twice."""
    d = load_stage(run_dir, stage)
    return d if d is not None and d.get("state") == "submitted" else None


def _undecided(analysis, nodes: list[str], why: str, clear_plan: bool = True) -> None:
    """Nodes no round could decide: `untested` for a stated reason (never a drain)."""
    for n in nodes:
        analysis.nodes[n]["verdict"] = "untested"
        analysis.nodes[n]["why"] = why
    analysis.problems.append(f"{', '.join(nodes)}: untested: {why} (not drained)")
    if clear_plan:
        analysis.retest_plan = []


