"""Burn-in results storage: runs, measurements, verdicts, baselines, events.

One small interface (`Store`) so a server database can be added later; the
default is SQLite at a configured path (a single writer: only the analysis
job writes). Rollback journal, not WAL, so it also works on NFS. Every run is
recorded in one transaction: an interrupted analysis leaves the store as it
was, and re-recording the same run replaces it (idempotent).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# Ordered migrations: index + 1 is the schema version they bring the store to.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE runs (id TEXT PRIMARY KEY, time REAL NOT NULL, scope TEXT NOT NULL, config_digest TEXT,
                       median TEXT, threshold REAL, guard_tripped INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE measurements (run_id TEXT NOT NULL REFERENCES runs(id), idx INTEGER NOT NULL, nodes TEXT NOT NULL,
                               test TEXT NOT NULL, size INTEGER NOT NULL, busbw REAL, ok INTEGER NOT NULL,
                               problems TEXT, PRIMARY KEY (run_id, idx));
    CREATE TABLE verdicts (run_id TEXT NOT NULL REFERENCES runs(id), node TEXT NOT NULL, verdict TEXT NOT NULL,
                           score REAL, PRIMARY KEY (run_id, node));
    CREATE INDEX verdicts_node ON verdicts(node);
    CREATE TABLE baselines (node TEXT NOT NULL, test TEXT NOT NULL, score REAL NOT NULL, driver TEXT, nccl TEXT,
                            nic_fw TEXT, run_id TEXT, time REAL NOT NULL, PRIMARY KEY (node, test));
    CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, node TEXT NOT NULL, time REAL NOT NULL,
                         kind TEXT NOT NULL, detail TEXT, run_id TEXT);
    CREATE INDEX events_node ON events(node, time);
    """,
    # v2: everything keyed by measurement key (test:topology): per-key scores
    # and verdicts, the key that judged each node, the run's noise estimate;
    # v1 baselines (always all_reduce, judged on pairs) become all_reduce:pair.
    """
    ALTER TABLE verdicts ADD COLUMN key TEXT;
    ALTER TABLE runs ADD COLUMN noise TEXT;
    CREATE TABLE scores (run_id TEXT NOT NULL REFERENCES runs(id), node TEXT NOT NULL, key TEXT NOT NULL,
                         verdict TEXT NOT NULL, score REAL, PRIMARY KEY (run_id, node, key));
    CREATE INDEX scores_node ON scores(node);
    UPDATE baselines SET test = test || ':pair' WHERE instr(test, ':') = 0;
    UPDATE verdicts SET key = (SELECT j.key FROM runs r, json_each(r.median) j
                               WHERE r.id = verdicts.run_id AND j.key LIKE '%:pair' ORDER BY j.key LIMIT 1);
    """,
    # v3: which runs measured the fleet ('full') and which a few nodes against
    # references ('requalify'): the latter are judged by the former's medians.
    """
    ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'full';
    """,
    # v4: per-GPU tests get their own tables: every GPU line (v3 kept them in
    # measurements as test 'TEST@gpuN', value in busbw: moved here, same idx),
    # each run's per-GPU verdicts and scores (a GPU's history, by node or by
    # serial), and per-GPU baselines keyed by the GPU's serial (a swapped GPU
    # starts fresh).
    """
    CREATE TABLE gpu_measurements (run_id TEXT NOT NULL REFERENCES runs(id), idx INTEGER NOT NULL,
                                   node TEXT NOT NULL, gpu INTEGER NOT NULL, test TEXT NOT NULL, value REAL,
                                   unit TEXT, errors INTEGER, ok INTEGER NOT NULL, gpu_model TEXT, pci TEXT,
                                   serial TEXT, problems TEXT, PRIMARY KEY (run_id, idx));
    INSERT INTO gpu_measurements (run_id, idx, node, gpu, test, value, ok, problems)
        SELECT run_id, idx, json_extract(nodes, '$[0]'), CAST(substr(test, instr(test, '@gpu') + 4) AS INTEGER),
               substr(test, 1, instr(test, '@gpu') - 1), busbw, ok, problems
        FROM measurements WHERE instr(test, '@gpu') > 0;
    DELETE FROM measurements WHERE instr(test, '@gpu') > 0;
    CREATE TABLE gpu_scores (run_id TEXT NOT NULL REFERENCES runs(id), node TEXT NOT NULL, gpu INTEGER NOT NULL,
                             key TEXT NOT NULL, verdict TEXT NOT NULL, score REAL, serial TEXT, pci TEXT,
                             PRIMARY KEY (run_id, node, gpu, key));
    CREATE INDEX gpu_scores_node ON gpu_scores(node);
    CREATE INDEX gpu_scores_serial ON gpu_scores(serial);
    CREATE TABLE gpu_baselines (serial TEXT NOT NULL, key TEXT NOT NULL, score REAL NOT NULL, node TEXT,
                                gpu INTEGER, run_id TEXT, time REAL NOT NULL, PRIMARY KEY (serial, key));
    """,
    # v5: what each run named besides nodes (components.suspect_parts): suspect
    # switches with the nodes behind them, suspect links with their rail, each
    # node's failed NICs; `status` shows the last full run's.
    """
    ALTER TABLE runs ADD COLUMN components TEXT;
    """,
]


def baseline_key(test: str) -> str:
    """A test name (``all_reduce``) means its pair key; a full key is kept."""
    from ..records import make_key

    return test if ":" in test else make_key(test, "pair")


class StoreError(Exception):
    pass


class NoStoreYet(StoreError):
    """The store file does not exist: a cluster before its first burn-in.
    Readers that answer "nothing recorded" (history) tell it from a broken store."""


@dataclass
class RunRecord:
    id: str
    time: float
    scope: list[str]
    config_digest: str = ""


class Store:
    """Interface every backend implements."""

    def record_run(self, run: RunRecord, measurements: list[dict], analysis: dict,
                   versions: dict[str, dict] | None = None, test: str | None = None) -> None:
        raise NotImplementedError

    def accept_baseline(self, nodes: list[str], test: str | None = None, who: str = "admin") -> list[dict]:
        raise NotImplementedError

    def all_baselines(self, nodes: list[str] | None = None) -> dict[str, dict[str, float]]:
        raise NotImplementedError

    def fleet_medians(self) -> dict[str, float]:
        raise NotImplementedError

    def fleet_noise(self) -> dict[str, float]:
        """Per key, the run-to-run noise the latest full run measuring it estimated."""
        raise NotImplementedError

    def add_event(self, node: str, kind: str, detail: str, when: float | None = None, run_id: str | None = None) -> None:
        raise NotImplementedError

    def add_events(self, events: list[tuple]) -> None:
        """Bulk: (node, time, kind, detail, run_id) rows in one transaction (the hooks' event spool)."""
        for node, when, kind, detail, run_id in events:
            self.add_event(node, kind, detail, when, run_id)

    def last_burnin(self, nodes: list[str] | None = None) -> dict[str, dict]:
        raise NotImplementedError

    def last_verdicts(self, nodes: list[str] | None = None) -> dict[str, dict]:
        """Bulk: each node's last burn-in verdict (same rows as last_burnin)."""
        return self.last_burnin(nodes)

    def baselines(self, nodes: list[str] | None = None, test: str = "all_reduce") -> dict[str, float]:
        raise NotImplementedError

    def last_verdict(self, node: str) -> dict | None:
        """The node's verdict in its latest run: {run_id, time, verdict, score}, or None."""
        raise NotImplementedError

    def baseline(self, node: str, test: str = "all_reduce") -> dict | None:
        """The node's baseline for `test` (its pair key) or a full key, with the versions it was taken under, or None."""
        raise NotImplementedError

    def node_history(self, node: str) -> list[dict]:
        raise NotImplementedError

    def nccl_versions(self) -> dict[str, str]:
        raise NotImplementedError

    def last_components(self) -> dict | None:
        raise NotImplementedError

    def runs(self) -> list[dict]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class SqliteStore(Store):
    def __init__(self, path: str, create: bool = True):
        if not create and not os.path.exists(path):
            raise NoStoreYet(f"{path}: no store yet (run a burn-in first)")
        if create:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{path}: cannot create the store's directory: {exc.strerror or exc}") from None
        self.path = path
        try:
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=DELETE")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a usable slurmqual store: {exc}") from None
        self.path = path

    # -- schema --------------------------------------------------------------
    def version(self) -> int:
        row = self.db.execute("SELECT name FROM sqlite_master WHERE name='schema_version'").fetchone()
        if row is None:
            return 0
        return self.db.execute("SELECT version FROM schema_version").fetchone()[0]

    def _migrate(self) -> None:
        current = self.version()
        if current > len(MIGRATIONS):
            raise StoreError(f"store schema v{current} is newer than this slurmqual (v{len(MIGRATIONS)}): upgrade slurmqual")
        for v in range(current, len(MIGRATIONS)):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if self.version() > v:  # a concurrent first analysis migrated while we waited for the lock
                    self.db.execute("COMMIT")
                    continue
                if v == 0:
                    self.db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                    self.db.execute("INSERT INTO schema_version VALUES (0)")
                for stmt in filter(str.strip, MIGRATIONS[v].split(";")):
                    self.db.execute(stmt)
                self.db.execute("UPDATE schema_version SET version = ?", (v + 1,))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    # -- writes --------------------------------------------------------------
    def record_run(self, run, measurements, analysis, versions=None, test=None) -> None:
        """One transaction: the run, its measurements, per-node and per-key
        verdicts, events, and baselines. A baseline moves only on a pass of the
        node, per key, and only up or sideways (within the run's noise); a node
        below its own baseline keeps the old one until an admin accepts."""
        versions = versions or {}
        db = self.db
        noise = analysis.get("noise") or {}
        frozen = analysis["guard_tripped"] or analysis.get("fleet_slowdown")
        try:
            db.execute("BEGIN IMMEDIATE")
            for table in ("measurements", "gpu_measurements", "verdicts", "scores", "gpu_scores", "events"):
                db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run.id,))
            db.execute("DELETE FROM runs WHERE id = ?", (run.id,))
            from ..judge.components import suspect_parts

            db.execute("INSERT INTO runs (id, time, scope, config_digest, median, threshold, guard_tripped, noise, kind, "
                       "components) VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (run.id, run.time, json.dumps(run.scope), run.config_digest, json.dumps(analysis["median"]),
                        analysis["threshold"], int(analysis["guard_tripped"]), json.dumps(noise),
                        analysis.get("run_kind") or "full", json.dumps(suspect_parts(analysis))))
            db.executemany("INSERT INTO measurements VALUES (?,?,?,?,?,?,?,?)", [
                (run.id, i, json.dumps(m["nodes"]), m["test"], m["size"], m.get("busbw"), int(m["ok"]),
                 json.dumps(m.get("problems", []))) for i, m in enumerate(measurements) if "gpu" not in m])
            db.executemany("INSERT INTO gpu_measurements VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", [
                (run.id, i, m["nodes"][0], m["gpu"], m["test"], m.get("value"), m.get("unit"), m.get("errors"),
                 int(m["ok"]), m.get("gpu_model"), m.get("pci"), m.get("serial"),
                 json.dumps(m.get("problems", [m["error"]] if m.get("error") else [])))
                for i, m in enumerate(measurements) if "gpu" in m])
            gpus = [(n, int(g), e) for n, v in analysis["nodes"].items()
                    for g, tests in (v.get("gpus") or {}).items() for e in tests.values()]
            db.executemany("INSERT INTO gpu_scores VALUES (?,?,?,?,?,?,?,?)", [
                (run.id, n, g, e["key"], e["verdict"], e["score"], e.get("serial"), e.get("pci")) for n, g, e in gpus])
            db.executemany("INSERT INTO verdicts (run_id, node, verdict, score, key) VALUES (?,?,?,?,?)", [
                (run.id, n, v["verdict"], v["score"], v.get("key")) for n, v in analysis["nodes"].items()])
            db.executemany("INSERT INTO scores VALUES (?,?,?,?,?)", [
                (run.id, n, k, kv["verdict"], kv["score"])
                for n, v in analysis["nodes"].items() for k, kv in (v.get("keys") or {}).items()])
            events = []
            for n, v in analysis["nodes"].items():
                events.append((n, run.time, "burnin", f"{v['verdict']} score={v['score']}"
                               + (f" ({v['key']})" if v.get("key") else ""), run.id))
                if v["verdict"] != "pass" or v["score"] is None or frozen:
                    continue
                per_key = v.get("keys") or {baseline_key(test or "all_reduce"): {"verdict": "pass", "score": v["score"]}}
                ver = versions.get(n, {})
                for key, kv in per_key.items():
                    if kv["verdict"] != "pass" or kv["score"] is None:
                        continue
                    # its own level (without suspect partners) where the analysis gives one
                    own = kv.get("own", kv["score"])
                    events += self._move_baseline(n, key, own if own is not None else kv["score"],
                                                  noise.get(key, 0.0), ver, run)
            if not frozen:
                for n, g, e in gpus:
                    if e["verdict"] == "pass" and e["score"] is not None and e.get("serial"):
                        self._move_gpu_baseline(n, g, e, noise.get(e["key"], 0.0), run)
            for n in analysis.get("drain", []):
                events.append((n, run.time, "drain", f"burnin score {analysis['nodes'][n]['score']}", run.id))
            db.executemany("INSERT INTO events (node, time, kind, detail, run_id) VALUES (?,?,?,?,?)", events)
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise StoreError(f"{self.path}: could not record run {run.id}: {exc}") from None
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _move_baseline(self, node: str, key: str, score: float, noise: float, ver: dict, run) -> list[tuple]:
        """Inside record_run's transaction: set or keep one baseline; return the events."""
        db = self.db
        old = db.execute("SELECT nccl, driver, nic_fw, time, score FROM baselines WHERE node=? AND test=?",
                         (node, key)).fetchone()
        if old and old[3] > run.time:
            return []  # re-analysing an older run never replaces a newer baseline
        if old and score < old[4] * (1 - noise):
            # Down by more than the noise: keep the old level (reported below
            # baseline while it is far enough under it) until an admin accepts.
            return []
        db.execute("INSERT OR REPLACE INTO baselines VALUES (?,?,?,?,?,?,?,?)",
                   (node, key, score, ver.get("driver"), ver.get("nccl"), ver.get("nic_fw"), run.id, run.time))
        events = [(node, run.time, "baseline", f"{key} {score} GB/s", run.id)]
        if old:
            for name, before in zip(("nccl", "driver", "nic_fw"), old[:3]):
                now = ver.get(name)
                if before and now and before != now:
                    events.append((node, run.time, "version_change", f"{name} {before} -> {now}", run.id))
        return events

    def _move_gpu_baseline(self, node: str, gpu: int, entry: dict, noise: float, run) -> None:
        """Inside record_run's transaction: a passing GPU's baseline, keyed by
        its serial, moves like a node's: up or sideways, never down by more
        than the noise, never from an older run."""
        old = self.db.execute("SELECT score, time FROM gpu_baselines WHERE serial=? AND key=?",
                              (entry["serial"], entry["key"])).fetchone()
        if old and (old[1] > run.time or entry["score"] < old[0] * (1 - noise)):
            return
        self.db.execute("INSERT OR REPLACE INTO gpu_baselines VALUES (?,?,?,?,?,?,?)",
                        (entry["serial"], entry["key"], entry["score"], node, gpu, run.id, run.time))

    def accept_baseline(self, nodes: list[str], test: str | None = None, who: str = "admin") -> list[dict]:
        """An admin accepts each node's level in its latest run as its new
        baseline (per key; `test` limits it to that test or key). Recorded in
        history. Keys whose latest verdict is fail or untested are refused."""
        from ..records import split_key

        out = []
        try:
            self.db.execute("BEGIN IMMEDIATE")
            for node in nodes:
                row = self.db.execute("""SELECT v.run_id, r.time FROM verdicts v JOIN runs r ON r.id = v.run_id
                                         WHERE v.node = ? ORDER BY r.time DESC, r.id DESC LIMIT 1""",
                                      (node,)).fetchone()
                if row is None:
                    out.append({"node": node, "key": None, "accepted": False, "why": "no burn-in yet"})
                    continue
                run_id, when = row
                for key, verdict, score in self.db.execute(
                        "SELECT key, verdict, score FROM scores WHERE run_id=? AND node=? ORDER BY key",
                        (run_id, node)).fetchall():
                    if test and key != test and split_key(key)[0] != test:
                        continue
                    if verdict in ("fail", "untested") or score is None:
                        out.append({"node": node, "key": key, "accepted": False,
                                    "why": f"latest verdict {verdict}: requalify it first"})
                        continue
                    old = self.db.execute("SELECT score FROM baselines WHERE node=? AND test=?", (node, key)).fetchone()
                    self.db.execute("INSERT OR REPLACE INTO baselines (node, test, score, run_id, time) "
                                    "VALUES (?,?,?,?,?)", (node, key, score, run_id, when))
                    self.db.execute("INSERT INTO events (node, time, kind, detail, run_id) VALUES (?,?,?,?,?)",
                                    (node, time.time(), "baseline_accepted",
                                     f"{key} {old[0] if old else None} -> {score} GB/s by {who}", run_id))
                    out.append({"node": node, "key": key, "accepted": True, "old": old[0] if old else None,
                                "new": score})
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise StoreError(f"{self.path}: could not accept baselines: {exc}") from None
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        return out

    def add_event(self, node, kind, detail, when=None, run_id=None) -> None:
        self.db.execute("INSERT INTO events (node, time, kind, detail, run_id) VALUES (?,?,?,?,?)",
                        (node, when if when is not None else time.time(), kind, detail, run_id))

    def add_events(self, events) -> None:
        try:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany("INSERT INTO events (node, time, kind, detail, run_id) VALUES (?,?,?,?,?)", events)
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise StoreError(f"{self.path}: could not record events: {exc}") from None

    # -- reads ---------------------------------------------------------------
    def last_burnin(self, nodes=None) -> dict[str, dict]:
        """Per node: last run's time, verdict, score, the median that judged it
        (analyze.median_for), the node's baseline for that key. Bulk queries."""
        from ..judge.analyze import median_for

        rows = self.db.execute("""
            SELECT v.node, r.time, v.verdict, v.score, r.median, v.key, r.id FROM verdicts v JOIN runs r ON r.id = v.run_id
            WHERE r.time = (SELECT MAX(r2.time) FROM verdicts v2 JOIN runs r2 ON r2.id = v2.run_id
                            WHERE v2.node = v.node)""").fetchall()
        base = self.all_baselines(nodes)
        wanted = set(nodes) if nodes is not None else None
        out = {}
        for node, t, verdict, score, median, key, run_id in rows:
            if wanted is not None and node not in wanted:
                continue
            key, med = median_for({"median": json.loads(median or "{}"), "nodes": {node: {"key": key}}}, node)
            out[node] = {"time": t, "verdict": verdict, "score": score, "median": med, "key": key,
                         "baseline": base.get(key or "", {}).get(node), "run_id": run_id}
        return out

    def last_burnin_walk(self, nodes=None) -> dict[str, dict]:
        """Like last_burnin (without per-key detail), fast at a year of runs (`status`): walk the runs
        newest first and stop once every wanted node has its verdict; a daily
        full run answers all of them from its own rows (primary key lookups)."""
        if nodes is None:
            return self.last_burnin(nodes)
        left = set(nodes)
        found: dict[str, tuple] = {}
        for run_id, t, median in self.db.execute("SELECT id, time, median FROM runs ORDER BY time DESC, id DESC"):
            if not left:
                break
            if len(left) <= 256:
                names = sorted(left)
                rows = self.db.execute(f"SELECT node, verdict, score, key FROM verdicts WHERE run_id = ? AND node IN "
                                       f"({','.join('?' * len(names))})", (run_id, *names)).fetchall()
            else:
                rows = self.db.execute("SELECT node, verdict, score, key FROM verdicts WHERE run_id = ?",
                                       (run_id,)).fetchall()
            for node, verdict, score, key in rows:
                if node in left:
                    left.discard(node)
                    found[node] = (t, verdict, score, median, key, run_id)
        from ..judge.analyze import median_for

        base = self.all_baselines(list(found))
        out = {}
        for node, (t, verdict, score, median, key, run_id) in found.items():
            key, med = median_for({"median": json.loads(median or "{}"), "nodes": {node: {"key": key}}}, node)
            out[node] = {"time": t, "verdict": verdict, "score": score, "median": med, "key": key,
                         "baseline": base.get(key or "", {}).get(node), "run_id": run_id}
        return out

    def baselines(self, nodes=None, test="all_reduce") -> dict[str, float]:
        rows = self.db.execute("SELECT node, score FROM baselines WHERE test = ?", (baseline_key(test),)).fetchall()
        wanted = set(nodes) if nodes is not None else None
        return {n: s for n, s in rows if wanted is None or n in wanted}

    def fleet_medians(self) -> dict[str, float]:
        """Per key, the fleet median of the latest full run that did not trip
        the guard (a requalify is judged against it); {} when there is none."""
        row = self.db.execute("SELECT median FROM runs WHERE kind = 'full' AND guard_tripped = 0 "
                              "ORDER BY time DESC, id DESC LIMIT 1").fetchone()
        return {k: v for k, v in json.loads(row[0] or "{}").items() if isinstance(v, (int, float))} if row else {}

    def fleet_noise(self) -> dict[str, float]:
        """Per key, the noise (relative sd of one run) the latest full run
        that measured the key estimated, guard tripped or not (the spread is
        the fleet's either way); {} when there is none. What sizes the first
        round's GPU runs (burnin.gpu_runs = "auto")."""
        out: dict[str, float] = {}
        for (noise,) in self.db.execute("SELECT noise FROM runs WHERE kind = 'full' ORDER BY time DESC, id DESC "
                                        "LIMIT 50"):
            try:
                got = json.loads(noise or "{}")
            except ValueError:
                continue
            for k, v in (got.items() if isinstance(got, dict) else ()):
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                    out.setdefault(k, float(v))
        return out

    def all_baselines(self, nodes=None) -> dict[str, dict[str, float]]:
        """key -> node -> baseline, for every measurement key; per-GPU keys
        (``gemm:gpu:MODEL``): GPU serial -> baseline (of the GPUs last seen in `nodes`)."""
        wanted = set(nodes) if nodes is not None else None
        out: dict[str, dict[str, float]] = {}
        for n, key, score in self.db.execute("SELECT node, test, score FROM baselines"):
            if wanted is None or n in wanted:
                out.setdefault(key, {})[n] = score
        for n, key, serial, score in self.db.execute("SELECT node, key, serial, score FROM gpu_baselines"):
            if wanted is None or n in wanted:
                out.setdefault(key, {})[serial] = score
        return out

    def gpu_history(self, node: str | None = None, serial: str | None = None) -> list[dict]:
        """Per-GPU scores and verdicts, newest run first, of a node's GPUs or of
        one GPU (by serial, wherever it was), each with the run's fleet median
        for its key and the GPU's baseline."""
        where, args = ("g.node = ?", (node,)) if serial is None else ("g.serial = ?", (serial,))
        rows = self.db.execute(f"""
            SELECT r.id, r.time, g.node, g.gpu, g.key, g.verdict, g.score, g.serial, g.pci, r.median, b.score
            FROM gpu_scores g JOIN runs r ON r.id = g.run_id
            LEFT JOIN gpu_baselines b ON b.serial = g.serial AND b.key = g.key
            WHERE {where} ORDER BY r.time DESC, r.id DESC, g.gpu, g.key""", args).fetchall()
        medians: dict[str, dict] = {}
        out = []
        for run_id, t, n, gpu, key, verdict, score, ser, pci, median, base in rows:
            med = medians.setdefault(run_id, json.loads(median or "{}")).get(key)
            out.append({"run_id": run_id, "time": t, "node": n, "gpu": gpu, "key": key, "verdict": verdict,
                        "score": score, "serial": ser, "pci": pci, "median": med, "baseline": base})
        return out

    def last_gpus(self, runs_of: dict[str, str]) -> dict[str, list[dict]]:
        """node -> its GPUs' rows (as gpu_history's) in the given run of that node
        (its last burn-in, from last_burnin_walk): primary-key lookups, for `status`."""
        by_run: dict[str, list[str]] = {}
        for node, run_id in runs_of.items():
            by_run.setdefault(run_id, []).append(node)
        out: dict[str, list[dict]] = {}
        for run_id, names in by_run.items():
            row = self.db.execute("SELECT time, median FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                continue
            medians = json.loads(row[1] or "{}")
            for i in range(0, len(names), 256):
                part = names[i:i + 256]
                for node, gpu, key, verdict, score, ser, pci, base in self.db.execute(f"""
                        SELECT g.node, g.gpu, g.key, g.verdict, g.score, g.serial, g.pci, b.score
                        FROM gpu_scores g LEFT JOIN gpu_baselines b ON b.serial = g.serial AND b.key = g.key
                        WHERE g.run_id = ? AND g.node IN ({','.join('?' * len(part))}) ORDER BY g.gpu, g.key""",
                        (run_id, *part)):
                    out.setdefault(node, []).append(
                        {"run_id": run_id, "time": row[0], "node": node, "gpu": gpu, "key": key, "verdict": verdict,
                         "score": score, "serial": ser, "pci": pci, "median": medians.get(key), "baseline": base})
        return out

    def last_verdict(self, node) -> dict | None:
        row = self.db.execute("""
            SELECT r.id, r.time, v.verdict, v.score FROM verdicts v JOIN runs r ON r.id = v.run_id
            WHERE v.node = ? ORDER BY r.time DESC, r.id DESC LIMIT 1""", (node,)).fetchone()
        if row is None:
            return None
        return {"run_id": row[0], "time": row[1], "verdict": row[2], "score": row[3]}

    def baseline(self, node, test="all_reduce") -> dict | None:
        row = self.db.execute("SELECT score, driver, nccl, nic_fw, run_id, time FROM baselines WHERE node=? AND test=?",
                              (node, baseline_key(test))).fetchone()
        if row is None:
            return None
        return dict(zip(("score", "driver", "nccl", "nic_fw", "run_id", "time"), row))

    def node_history(self, node) -> list[dict]:
        rows = self.db.execute("SELECT time, kind, detail, run_id FROM events WHERE node = ? ORDER BY time DESC, id DESC",
                               (node,)).fetchall()
        return [{"time": t, "kind": k, "detail": d, "run_id": r} for t, k, d, r in rows]

    def nccl_versions(self) -> dict[str, str]:
        return {n: v for n, v in self.db.execute("SELECT node, nccl FROM baselines WHERE nccl IS NOT NULL")}

    def last_components(self) -> dict | None:
        """The last full run's suspect parts (components.suspect_parts) with
        its id and time; None before any full run."""
        row = self.db.execute("SELECT id, time, components FROM runs WHERE kind = 'full' "
                              "ORDER BY time DESC, id DESC LIMIT 1").fetchone()
        if row is None:
            return None
        parts = json.loads(row[2]) if row[2] else {"switches": [], "links": [], "failed_nics": {}}
        return {"run_id": row[0], "time": row[1], **parts}

    def runs(self) -> list[dict]:
        rows = self.db.execute("SELECT id, time, scope, guard_tripped FROM runs ORDER BY time DESC").fetchall()
        return [{"id": i, "time": t, "scope": json.loads(s), "guard_tripped": bool(g)} for i, t, s, g in rows]

    def close(self) -> None:
        self.db.close()


def open_store(path: str, create: bool = True) -> Store:
    return SqliteStore(path, create=create)


@contextmanager
def existing(path: str) -> Iterator[Store | None]:
    """The store at path, or None when there is none yet (a new cluster).
    Only a missing file is "no store": an unreadable, corrupted or newer-schema
    store raises StoreError (read as empty it would silently drop every
    baseline and with them the fleet-slowdown protection)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:  # e.g. a directory on the way we may not read
        raise StoreError(f"{path}: cannot read the store: {exc.strerror}") from None
    store = open_store(path, create=False)
    try:
        yield store
    finally:
        store.close()
