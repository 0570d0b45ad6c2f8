"""Re-qualification after a hardware swap (GPU, NIC, cable).

Slurm never starts a job on a drained node, so requalify makes room for the
test: a maintenance reservation holds the swapped nodes plus known-good
reference nodes; the swapped nodes are resumed inside it; every check (the
slow level, DCGM diagnostics, included) runs on them; then a burn-in pairs
each swapped node with reference nodes. Pass: new baseline, back to service. Fail: drained with the reason.
The reservation is always deleted at the end, also on failure or cancel.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time

from .slurm import reason as reasons


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


class RequalifyError(Exception):
    pass


class Cancelled(Exception):
    pass


def pick_references(store, candidates: list, swapped: set[str], count: int, now: float, max_age_s: float) -> list[str]:
    """Qualified, in-service nodes with a recent baseline, most recently burned in first."""
    last = store.last_burnin([n.name for n in candidates])
    good = []
    for n in candidates:
        b = last.get(n.name)
        if (n.name in swapped or n.drained or n.hands_off or b is None or b["verdict"] != "pass"
                or b["baseline"] is None or now - b["time"] > max_age_s):
            continue
        good.append((b["time"], n.name))
    return [name for _t, name in sorted(good, reverse=True)[:count]]


def progress(run_dir: str) -> str:
    """`tasks 1/3 done, 12 measurements so far` from a run directory's result files."""
    from .burnin.results import rundir

    try:  # retest rounds' tasks included
        total = len(rundir.planned_tasks(run_dir, rundir.read_plan(run_dir)))
    except rundir.RunDirError:
        total = 0
    results = rundir.read_results(run_dir)[0]
    done = sum(res.get("complete") is not False for _p, res in results)
    measured = sum(len(res["measurements"]) for _p, res in results)
    return f"tasks {done}/{total} done, {measured} measurements so far"


def pairing_rounds(swapped: list[str], refs: list[str], partners: int) -> list[list[list[str]]]:
    """Each swapped node meets `partners` different reference nodes, one per round."""
    from .burnin.judge.plan import retest_plan

    return [[list(p) for p in rnd] for rnd in retest_plan(swapped, refs, partners)]


class Requalify:
    def __init__(self, config, adapter, nodes: list[str], reference: int, out=print):
        self.config = config
        self.adapter = adapter
        self.nodes = nodes
        self.reference = reference
        self.out = out
        self.id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(2)
        self.reservation = f"slurmqual-requalify-{self.id}"
        self.state_dir = config["hooks"]["state_dir"]
        self.jobs: list[str] = []

    # -- markers that make `status` say "pending" ---------------------------
    def _mark(self) -> None:
        from .nodestate import mark_requalify

        mark_requalify(self.state_dir, self.nodes, self.id)

    def _unmark(self) -> None:
        from .nodestate import unmark_requalify

        unmark_requalify(self.state_dir, self.nodes)

    # -- the workflow ----------------------------------------------------------
    def run(self) -> dict:
        from .burnin.results.store import StoreError, open_store
        from .policy import may_resume

        info = {n.name: n for n in self.adapter.node_info()}
        unknown = [n for n in self.nodes if n not in info]
        if unknown:
            raise RequalifyError(f"unknown nodes: {','.join(unknown)}")
        try:
            store = open_store(self.config["store"]["path"], create=False)
        except StoreError as exc:
            raise RequalifyError(f"requalify needs reference nodes from an earlier burn-in: {exc}") from None
        try:
            refs = pick_references(store, list(info.values()), set(self.nodes), self.reference, time.time(),
                                   self.config["burnin"]["max_age_days"] * 86400)
            before = store.baselines(self.nodes)
        finally:
            store.close()
        if not refs:
            raise RequalifyError("no qualified reference node with a recent baseline")
        self.out(f"requalify {self.id}: {','.join(self.nodes)} against reference {','.join(refs)}")
        self._mark()
        self.decided: dict[str, str] = {}   # node -> "pass" | "fail": anything else is drained on the way out
        created = False
        why = "ended without a verdict"
        old_handlers = {s: signal.signal(s, self._cancel) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            self.adapter.create_reservation(self.reservation, self.nodes + refs, 24 * 60)
            created = True
            self._event_all("requalify", f"started {self.id} against {','.join(refs)}")
            self.out(f"reservation {self.reservation} created (maint, ignore_jobs)")
            # The admin named these nodes: requalify resumes them inside the reservation,
            # whoever drained them (the reservation keeps production jobs off).
            drained = [n for n in self.nodes if may_resume(info[n], "admin", force=True)]
            if drained:
                self.adapter.resume(drained)
            self._wait_responding(self.nodes)
            results = self._checks()
            failed_checks = {n: r for n, r in results.items() if r is not None}
            for n, why_n in failed_checks.items():
                self.out(f"{n}: checks fail: {why_n}")
            testable = [n for n in self.nodes if n not in failed_checks]
            analysis = self._burnin(testable, refs) if testable else {"nodes": {}, "drain": []}
            return self._verdicts(analysis, failed_checks, before)
        except BaseException as exc:
            why = str(exc) or type(exc).__name__
            raise
        finally:
            for s in old_handlers:  # a second Ctrl-C must not cut the cleanup short
                signal.signal(s, signal.SIG_IGN)
            jobs = list(self.jobs)
            for job in jobs:
                try:
                    self.adapter.cancel([job])
                except Exception:  # noqa: BLE001 - cleanup must go on
                    pass
            try:  # e.g. a check step left held after our own prolog refused the node
                self.adapter.cancel_by_name(self.reservation)
            except Exception:  # noqa: BLE001
                pass
            if created:
                # Before the reservation goes: a node that did not pass must not take production jobs.
                self._drain_undecided(why)
                self._wait_jobs_gone(jobs)
                self._delete_reservation()
            self._unmark()
            for s, h in old_handlers.items():
                signal.signal(s, h)

    def _cancel(self, signum, _frame):
        raise Cancelled(f"cancelled by signal {signum}")

    def _event_all(self, kind: str, detail: str, nodes: list[str] | None = None) -> None:
        from . import events

        for n in nodes or self.nodes:
            try:
                events.record(self.state_dir, n, kind, detail, source="requalify")
            except (OSError, ValueError):
                pass

    def _drain_undecided(self, why: str) -> None:
        """Every exit that is not a verdict ends with the node drained
        `slurmqual: requalify: <why>` (unless someone else drained it meanwhile)."""
        from .policy import may_drain, precise_drain

        todo = [n for n in self.nodes if n not in getattr(self, "decided", {})]
        if not todo:
            return
        reason = reasons.make("requalify", why)
        try:
            now = {i.name: i for i in self.adapter.node_info()}
        except Exception:  # noqa: BLE001 - slurmctld slow: drain anyway
            now = {}
        for n in todo:
            cur = now.get(n)
            if precise_drain(cur):
                continue  # e.g. our prolog refused the node with its precise reason
            decision = may_drain(cur, reason, "requalify")
            if not decision and not decision.noop and cur is not None and cur.drained:
                self.out(f"{n}: left drained as it is: {decision.why}")
                continue
            try:
                self.adapter.drain([n], reason)
                self.out(f"{n}: drained: {reason}")
            except Exception as exc:  # noqa: BLE001
                self.out(f"WARNING: {n}: could not drain ({reason}): {exc}")
        self._event_all("requalify", f"{self.id} did not finish: {why}", todo)

    def _settle_swap(self, node: str, failed: str | None = None) -> None:
        """A swapped part (hwid.py) is settled once its node passes; a fail
        leaves it swapped, held by the failure's drain reason `failed`."""
        from .nodestate import StateError, clear_swap, fail_swap

        try:
            if failed is None:
                clear_swap(self.state_dir, node)
            else:
                fail_swap(self.state_dir, node, failed)
        except (OSError, ValueError, StateError) as exc:
            self.out(f"WARNING: {node}: could not record its swap's requalify: {exc}")

    def _drained_reason(self, node: str) -> str | None:
        """Our reason the node is drained with now (the burn-in's own drain)."""
        try:
            cur = {i.name: i for i in self.adapter.node_info(node)}.get(node)
        except Exception:  # noqa: BLE001 - the record is a help, not the verdict
            return None
        return cur.reason if cur is not None and cur.drained and reasons.is_ours(cur.reason) else None

    def _drain(self, node: str, reason: str) -> None:
        """A verdict's drain, through the shared ownership rules."""
        from .policy import may_drain

        try:
            cur = {i.name: i for i in self.adapter.node_info(node)}.get(node)
        except Exception:  # noqa: BLE001
            cur = None
        decision = may_drain(cur, reason, "requalify")
        if decision:
            self.adapter.drain([node], reason)
        elif not decision.noop:
            self.out(f"{node}: not drained: {decision.why}")

    def _wait_jobs_gone(self, jobs: list[str], timeout: float = 90) -> None:
        """Cancelled jobs still end (kill wait, epilog) inside the reservation."""
        end = time.monotonic() + timeout
        while jobs and time.monotonic() < end:
            try:
                records = self.adapter.jobs(jobs)
            except Exception:  # noqa: BLE001
                return
            if not any(r.active for r in records.values()):
                return
            time.sleep(1)

    def _delete_reservation(self) -> None:
        last: Exception | None = None
        for _ in range(60):  # cancelled jobs may still be ending inside it
            try:
                self.adapter.delete_reservation(self.reservation)
                self.out(f"reservation {self.reservation} deleted")
                return
            except Exception as exc:  # noqa: BLE001
                last = exc
                time.sleep(1)
        self.out(f"WARNING: could not delete reservation {self.reservation}: {last}")

    def _wait_responding(self, nodes: list[str], timeout: float = 180) -> None:
        """A just-resumed node is briefly not responding; a step started then
        fails. Wait until Slurm sees every node up and responding."""
        end = time.monotonic() + timeout
        waiting = list(nodes)
        while waiting and time.monotonic() < end:
            try:
                now = {i.name: i for i in self.adapter.node_info()}
            except Exception:  # noqa: BLE001
                now = {}
            # Responding is what matters: a node a check drained meanwhile has its answer already.
            waiting = [n for n in nodes if n not in now or "NOT_RESPONDING" in now[n].flags
                       or now[n].state not in ("idle", "mixed", "allocated", "completing")]
            if waiting:
                time.sleep(1)
        if waiting:
            raise RequalifyError(f"nodes not responding after resume ({timeout:g}s): {','.join(waiting)}")

    def _checks(self) -> dict[str, str | None]:
        """Every check, the slow level (DCGM diagnostics) included, on each
        swapped node, inside the reservation: a swap is when a GPU's memory and
        PCIe deserve the long test."""
        out: dict[str, str | None] = {}
        import math

        from .security import job_export

        exe = [sys.executable, "-P", "-m", "slurmqual", "check", "--level", "slow", "--json"]
        limit = self.config["hooks"]["deadline_s"] + 60
        if "dcgm" not in self.config["checks"].get("disabled", []):
            limit += self.config["checks"].get("dcgm", {}).get("timeout_s", 900.0)
        if self.config.path:
            exe += ["--config", self.config.path]
        from .command import CommandError, run

        started = time.time()
        for n in self.nodes:
            argv = [*self.adapter.srun_argv(), f"--reservation={self.reservation}", f"--job-name={self.reservation}", "--immediate=120", "-N1", "-n1", f"--nodelist={n}", f"--time={math.ceil(limit / 60) + 1}", job_export(self.config.path),
                    *exe, "--node", n]
            env = {k: v for k, v in os.environ.items() if k != "SLURMRESTD_TOKEN"}  # srun needs no JWT
            if getattr(self.adapter, "slurm_conf", None):
                env["SLURM_CONF"] = self.adapter.slurm_conf
            try:
                res = run(argv, timeout=limit + 120, check=False, env=env)  # + the wait for the node (--immediate)
            except CommandError as exc:
                out[n] = f"checks could not run: {exc}"
                continue
            try:
                data = json.loads(res.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                # E.g. our own prolog failed on the node (and drained it with the reason).
                out[n] = self._from_state_file(n, started) or \
                    f"checks could not run: {(res.stderr.strip().splitlines() or ['no output'])[-1][:120]}"
                continue
            bad = [c for c in data["checks"] if c["status"] == "fail"]
            out[n] = f"{bad[0]['name']}: {bad[0]['message']}" if bad else None
        return out

    def _from_state_file(self, node: str, since: float) -> str | None:
        """The failing check the node's own prolog recorded when it refused our step."""
        from .nodestate import StateError, read

        try:
            st = read(self.state_dir, node)
        except StateError:
            return None
        bad = [c for c in st.checks.values() if c["status"] == "fail"] if st is not None else []
        if st is not None and st.time >= since - 1 and bad:
            return f"{bad[0]['name']}: {bad[0].get('message', '')}"
        return None

    def _burnin(self, nodes: list[str], refs: list[str]) -> dict:
        from .burnin.run.runner import submit

        partners = min(len(refs), max(2, self.config["burnin"]["rounds"] - 1))
        rounds = pairing_rounds(nodes, refs, partners)
        # A Ctrl-C/SIGTERM/SIGHUP outside submit's own sbatch calls (which cancel
        # what they submitted) waits until the jobs are in self.jobs, which the
        # cleanup cancels: one that came after sbatch answered but before
        # requalify had the ids left the burn-in running in the reservation,
        # which then could never be deleted (seen on 22.05 under load).
        pending: list[int] = []
        held = {s: signal.signal(s, lambda signum, _f: pending.append(signum))
                for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)} if _main_thread() else {}
        try:
            try:
                sub = submit(self.config, self.adapter, nodes + refs, None, self.reservation, explicit_rounds=rounds)
            except KeyboardInterrupt as exc:  # submit's own SIGTERM handler, while it held the signal
                raise Cancelled(f"cancelled by {exc}" if str(exc).startswith("signal ") else "cancelled") from None
            self.jobs = [*sub["task_jobs"], sub["analysis_job"]]
        finally:
            for s, handler in held.items():
                signal.signal(s, handler)
        if pending:
            raise Cancelled(f"cancelled by signal {pending[0]}")
        self.out(f"burn-in {sub['run_id']}: task job {sub['array_job']}, analysis {sub['analysis_job']}")
        return self._follow(sub["run_dir"], time.monotonic() + 4 * 3600)

    def _follow(self, run_dir: str, deadline: float) -> dict:
        """Wait for the burn-in's decision within requalify's own time: its
        analysis may submit retest rounds (swapped nodes it cannot decide,
        paired with reference nodes they have not met, inside the
        reservation); each round's jobs are cancelled with requalify's."""
        from .burnin.results import rundir

        stage = rundir.current(run_dir)
        last_line, last_time = "", 0.0
        while time.monotonic() < deadline:
            self.jobs = [*stage["tasks"].values(), *([stage["analysis"]] if stage["analysis"] else [])]
            job = self.adapter.jobs([stage["analysis"]]).get(stage["analysis"])
            if job is None or not job.active:
                nxt = rundir.current(run_dir)
                if nxt["round"] > stage["round"]:
                    self.out(f"burn-in: {rundir.describe(nxt)}")
                    stage = nxt
                    continue
                break
            what = "burn-in" if not stage["round"] else f"burn-in retest round {stage['round']} of {stage['of']}"
            line = f"{what}: {progress(run_dir)}; analysis {job.state.lower()}"
            if line != last_line or time.monotonic() - last_time > 60:
                self.out(f"{time.strftime('%H:%M:%S')} {line}")
                last_line, last_time = line, time.monotonic()
            time.sleep(2)
        else:
            raise RequalifyError(f"burn-in did not finish within 4 h (see {run_dir}/logs)")
        try:
            analysis = rundir.read_analysis(run_dir)
            if analysis is None:
                raise rundir.RunDirError("no analysis.json")
        except rundir.RunDirError:
            # E.g. the analysis job was cancelled while the tasks still run: they
            # stay in self.jobs so the cleanup cancels them (and the reservation can go).
            raise RequalifyError(f"burn-in produced no analysis (see {run_dir}/logs)") from None
        rt = analysis.get("retest") or {}
        if rt.get("round", 0) < stage["round"] or rt.get("final") is False:
            raise RequalifyError(f"the burn-in's retest round {stage['round']} ended without an analysis "
                                 f"(see {run_dir}/logs)")
        self.jobs = []
        return analysis

    @staticmethod
    def _burnin_reason(analysis: dict, node: str, v: dict) -> str:
        """Why a node the burn-in did not drain ends drained: a `fail` (the
        analysis leaves a node in requalify's maintenance reservation to
        requalify) gets the burn-in's own reason, naming the NIC or the median;
        anything else (untested, retest) says so."""
        if v["verdict"] == "fail" and v.get("score") is not None:
            from .burnin.run.runner import drain_reason

            return drain_reason(analysis, node, v["score"])
        return reasons.make("requalify", f"burn-in {v['verdict']}, score {v['score']}")

    def _verdicts(self, analysis: dict, failed_checks: dict[str, str], before: dict[str, float]) -> dict:
        from .policy import precise_drain

        summary = {}
        now = {i.name: i for i in self.adapter.node_info()} if failed_checks else {}
        for n in self.nodes:
            if n in failed_checks:
                current = now.get(n)
                if precise_drain(current):
                    reason = current.reason  # the prolog already drained it with the precise reason
                else:
                    check, _, detail = failed_checks[n].partition(": ")
                    reason = reasons.make(check, detail) if detail and not check.startswith("checks could not") \
                        else reasons.make("requalify", failed_checks[n])
                    self._drain(n, reason)
                summary[n] = {"result": "fail", "reason": reason}
                self.decided[n] = "fail"
                self._settle_swap(n, reason)
                self.out(f"{n}: FAIL: {reason}")
                self._event_all("requalify", f"{self.id} fail: {reason}", [n])
                continue
            v = analysis["nodes"].get(n, {"verdict": "untested", "score": None})
            if v["verdict"] == "pass":
                prev = before.get(n)
                note = f"; own previous baseline {prev:.1f}" if prev else ""
                summary[n] = {"result": "pass", "score": v["score"], "previous_baseline": prev}
                self.decided[n] = "pass"
                self._settle_swap(n)
                self._event_all("requalify", f"{self.id} pass, score {v['score']}", [n])
                self.out(f"{n}: PASS, score {v['score']:.1f} GB/s{note}; new baseline recorded, back in service")
            elif n in analysis.get("drain", []):
                # An analysis before the swapped nodes were left to requalify (or one
                # re-run by hand) drained it already: the same reason, said the same way.
                reason = self._drained_reason(n) or self._burnin_reason(analysis, n, v)
                summary[n] = {"result": "fail", "score": v["score"], "reason": reason}
                self.decided[n] = "fail"
                self._settle_swap(n, reason)
                self._event_all("requalify", f"{self.id} fail: {reason}", [n])
                self.out(f"{n}: FAIL: drained ({reason})")
            else:
                reason = self._burnin_reason(analysis, n, v)
                self._drain(n, reason)
                self.decided[n] = "fail"
                self._settle_swap(n, reason)
                self._event_all("requalify", f"{self.id} {v['verdict']}: {reason}", [n])
                summary[n] = {"result": v["verdict"], "score": v["score"], "reason": reason}
                self.out(f"{n}: {v['verdict'].upper()}: drained ({reason})")
        return summary
