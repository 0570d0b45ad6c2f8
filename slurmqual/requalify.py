"""Re-qualification after a hardware swap (GPU, NIC, cable).

Slurm never starts a job on a drained node, so requalify makes room for the
test: a maintenance reservation holds the swapped nodes plus known-good
reference nodes; the swapped nodes are resumed inside it; the fast+standard
checks run on them; then a burn-in pairs each swapped node with reference
nodes. Pass: new baseline, back to service. Fail: drained with the reason.
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


def pairing_rounds(swapped: list[str], refs: list[str], partners: int) -> list[list[list[str]]]:
    """Each swapped node meets `partners` different reference nodes, one per round."""
    from .burnin.plan import retest_plan

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
    def _marker(self, node: str) -> str:
        return os.path.join(self.state_dir, "requalify", f"{node}.json")

    def _mark(self) -> None:
        from .atomic import ensure_dir, write_text

        ensure_dir(os.path.join(self.state_dir, "requalify"))
        for n in self.nodes:
            write_text(self._marker(n), json.dumps({"node": n, "id": self.id, "pid": os.getpid(), "time": time.time()}))

    def _unmark(self) -> None:
        for n in self.nodes:
            try:
                os.unlink(self._marker(n))
            except FileNotFoundError:
                pass

    # -- the workflow ----------------------------------------------------------
    def run(self) -> dict:
        from .burnin.store import StoreError, open_store

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
        created = False
        old_handlers = {s: signal.signal(s, self._cancel) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            self.adapter.create_reservation(self.reservation, self.nodes + refs, 24 * 60)
            created = True
            self.out(f"reservation {self.reservation} created (maint, ignore_jobs)")
            drained = [n for n in self.nodes if info[n].drained]
            if drained:
                self.adapter.resume(drained)
            results = self._checks()
            failed_checks = {n: r for n, r in results.items() if r is not None}
            for n, why in failed_checks.items():
                self.out(f"{n}: checks fail: {why}")
            testable = [n for n in self.nodes if n not in failed_checks]
            analysis = self._burnin(testable, refs) if testable else {"nodes": {}, "drain": []}
            return self._verdicts(analysis, failed_checks, before)
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
                self._wait_jobs_gone(jobs)
                self._delete_reservation()
            self._unmark()
            for s, h in old_handlers.items():
                signal.signal(s, h)

    def _cancel(self, signum, _frame):
        raise Cancelled(f"cancelled by signal {signum}")

    def _wait_jobs_gone(self, jobs: list[str], timeout: float = 90) -> None:
        """Cancelled jobs still end (kill wait, epilog) inside the reservation."""
        end = time.monotonic() + timeout
        while jobs and time.monotonic() < end:
            try:
                states = self.adapter.job_states(jobs)
            except Exception:  # noqa: BLE001
                return
            if not any(v in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED") for v in states.values()):
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

    def _checks(self) -> dict[str, str | None]:
        """Fast + standard checks on each swapped node, inside the reservation."""
        out: dict[str, str | None] = {}
        exe = [sys.executable, "-m", "slurmqual", "check", "--level", "standard", "--json"]
        if self.config.path:
            exe += ["--config", self.config.path]
        from .command import CommandError, run

        started = time.time()
        for n in self.nodes:
            argv = [*self.adapter.srun_argv(), f"--reservation={self.reservation}", f"--job-name={self.reservation}", "--immediate=30", "-N1", "-n1", f"--nodelist={n}", "--time=5", "--export=ALL",
                    *exe, "--node", n]
            env = dict(os.environ)
            if getattr(self.adapter, "slurm_conf", None):
                env["SLURM_CONF"] = self.adapter.slurm_conf
            try:
                res = run(argv, timeout=self.config["hooks"]["deadline_s"] + 60, check=False, env=env)
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
        try:
            with open(os.path.join(self.state_dir, "nodes", f"{node}.json")) as fh:
                st = json.load(fh)
        except (OSError, ValueError):
            return None
        bad = [c for c in st.get("checks", []) if c.get("status") == "fail"]
        if st.get("time", 0) >= since - 1 and bad:
            return f"{bad[0]['name']}: {bad[0]['message']}"
        return None

    def _burnin(self, nodes: list[str], refs: list[str]) -> dict:
        from .burnin.runner import submit

        partners = min(len(refs), max(2, self.config["burnin"]["rounds"] - 1))
        rounds = pairing_rounds(nodes, refs, partners)
        sub = submit(self.config, self.adapter, nodes + refs, None, self.reservation, explicit_rounds=rounds)
        self.jobs = [sub["array_job"], sub["analysis_job"]]
        self.out(f"burn-in {sub['run_id']}: array {sub['array_job']}, analysis {sub['analysis_job']}")
        path = os.path.join(sub["run_dir"], "analysis.json")
        deadline = time.monotonic() + 4 * 3600
        while time.monotonic() < deadline:
            states = self.adapter.job_states([sub["analysis_job"]])
            state = states.get(sub["analysis_job"], "GONE")
            if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                break
            time.sleep(2)
        self.jobs = []
        try:
            with open(path) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            raise RequalifyError(f"burn-in produced no analysis (see {sub['run_dir']}/logs)") from None

    def _verdicts(self, analysis: dict, failed_checks: dict[str, str], before: dict[str, float]) -> dict:
        summary = {}
        now = {i.name: i for i in self.adapter.node_info()} if failed_checks else {}
        for n in self.nodes:
            if n in failed_checks:
                current = now.get(n)
                if current is not None and current.drained and reasons.check_of(current.reason) not in (None, "admin"):
                    reason = current.reason  # the prolog already drained it with the precise reason
                else:
                    check, _, detail = failed_checks[n].partition(": ")
                    reason = reasons.make(check, detail) if detail and not check.startswith("checks could not") \
                        else reasons.make("requalify", failed_checks[n])
                    self.adapter.drain([n], reason)
                summary[n] = {"result": "fail", "reason": reason}
                self.out(f"{n}: FAIL: {reason}")
                continue
            v = analysis["nodes"].get(n, {"verdict": "untested", "score": None})
            if v["verdict"] == "pass":
                prev = before.get(n)
                note = f"; own previous baseline {prev:.1f}" if prev else ""
                summary[n] = {"result": "pass", "score": v["score"], "previous_baseline": prev}
                self.out(f"{n}: PASS, score {v['score']:.1f} GB/s{note}; new baseline recorded, back in service")
            elif n in analysis.get("drain", []):
                summary[n] = {"result": "fail", "score": v["score"]}
                self.out(f"{n}: FAIL, score {v['score']}; drained by the burn-in")
            else:
                reason = reasons.make("requalify", f"burn-in {v['verdict']}, score {v['score']}")
                self.adapter.drain([n], reason)
                summary[n] = {"result": v["verdict"], "score": v["score"], "reason": reason}
                self.out(f"{n}: {v['verdict'].upper()}: drained ({reason})")
        return summary
