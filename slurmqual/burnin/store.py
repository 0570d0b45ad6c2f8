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
]


class StoreError(Exception):
    pass


@dataclass
class RunRecord:
    id: str
    time: float
    scope: list[str]
    config_digest: str = ""


class Store:
    """Interface every backend implements."""

    def record_run(self, run: RunRecord, measurements: list[dict], analysis: dict,
                   versions: dict[str, dict] | None = None, test: str = "all_reduce") -> None:
        raise NotImplementedError

    def add_event(self, node: str, kind: str, detail: str, when: float | None = None, run_id: str | None = None) -> None:
        raise NotImplementedError

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
        """The node's baseline for `test` with the versions it was taken under, or None."""
        raise NotImplementedError

    def node_history(self, node: str) -> list[dict]:
        raise NotImplementedError

    def nccl_versions(self) -> dict[str, str]:
        raise NotImplementedError

    def runs(self) -> list[dict]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class SqliteStore(Store):
    def __init__(self, path: str, create: bool = True):
        if not create and not os.path.exists(path):
            raise StoreError(f"{path}: no store yet (run a burn-in first)")
        if create:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
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
    def record_run(self, run, measurements, analysis, versions=None, test="all_reduce") -> None:
        versions = versions or {}
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            for table in ("measurements", "verdicts", "events"):
                db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run.id,))
            db.execute("DELETE FROM runs WHERE id = ?", (run.id,))
            db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?)",
                       (run.id, run.time, json.dumps(run.scope), run.config_digest, json.dumps(analysis["median"]),
                        analysis["threshold"], int(analysis["guard_tripped"])))
            db.executemany("INSERT INTO measurements VALUES (?,?,?,?,?,?,?,?)", [
                (run.id, i, json.dumps(m["nodes"]), m["test"], m["size"], m.get("busbw"), int(m["ok"]),
                 json.dumps(m.get("problems", []))) for i, m in enumerate(measurements)])
            db.executemany("INSERT INTO verdicts VALUES (?,?,?,?)", [
                (run.id, n, v["verdict"], v["score"]) for n, v in analysis["nodes"].items()])
            events = []
            for n, v in analysis["nodes"].items():
                events.append((n, run.time, "burnin", f"{v['verdict']} score={v['score']}", run.id))
                if (v["verdict"] == "pass" and v["score"] is not None and not analysis["guard_tripped"]
                        and not analysis.get("fleet_slowdown")):
                    ver = versions.get(n, {})
                    old = db.execute("SELECT nccl, driver, nic_fw, time FROM baselines WHERE node=? AND test=?",
                                     (n, test)).fetchone()
                    if old and old[3] > run.time:
                        continue  # re-analysing an older run never replaces a newer baseline
                    db.execute("INSERT OR REPLACE INTO baselines VALUES (?,?,?,?,?,?,?,?)",
                               (n, test, v["score"], ver.get("driver"), ver.get("nccl"), ver.get("nic_fw"),
                                run.id, run.time))
                    events.append((n, run.time, "baseline", f"{test} {v['score']} GB/s", run.id))
                    if old:
                        for key, before in zip(("nccl", "driver", "nic_fw"), old[:3]):
                            now = ver.get(key)
                            if before and now and before != now:
                                events.append((n, run.time, "version_change", f"{key} {before} -> {now}", run.id))
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

    def add_event(self, node, kind, detail, when=None, run_id=None) -> None:
        self.db.execute("INSERT INTO events (node, time, kind, detail, run_id) VALUES (?,?,?,?,?)",
                        (node, when if when is not None else time.time(), kind, detail, run_id))

    # -- reads ---------------------------------------------------------------
    def last_burnin(self, nodes=None) -> dict[str, dict]:
        """Per node: last run's time, verdict, score, that run's median, the node's baseline. Bulk queries."""
        rows = self.db.execute("""
            SELECT v.node, r.time, v.verdict, v.score, r.median FROM verdicts v JOIN runs r ON r.id = v.run_id
            WHERE r.time = (SELECT MAX(r2.time) FROM verdicts v2 JOIN runs r2 ON r2.id = v2.run_id
                            WHERE v2.node = v.node)""").fetchall()
        base = self.baselines(nodes)
        wanted = set(nodes) if nodes is not None else None
        out = {}
        for node, t, verdict, score, median in rows:
            if wanted is not None and node not in wanted:
                continue
            med = json.loads(median or "{}")
            pair = [v for k, v in med.items() if k.endswith(":pair")] or list(med.values())
            out[node] = {"time": t, "verdict": verdict, "score": score, "median": pair[0] if pair else None,
                         "baseline": base.get(node)}
        return out

    def baselines(self, nodes=None, test="all_reduce") -> dict[str, float]:
        rows = self.db.execute("SELECT node, score FROM baselines WHERE test = ?", (test,)).fetchall()
        wanted = set(nodes) if nodes is not None else None
        return {n: s for n, s in rows if wanted is None or n in wanted}

    def last_verdict(self, node) -> dict | None:
        row = self.db.execute("""
            SELECT r.id, r.time, v.verdict, v.score FROM verdicts v JOIN runs r ON r.id = v.run_id
            WHERE v.node = ? ORDER BY r.time DESC, r.id DESC LIMIT 1""", (node,)).fetchone()
        if row is None:
            return None
        return {"run_id": row[0], "time": row[1], "verdict": row[2], "score": row[3]}

    def baseline(self, node, test="all_reduce") -> dict | None:
        row = self.db.execute("SELECT score, driver, nccl, nic_fw, run_id, time FROM baselines WHERE node=? AND test=?",
                              (node, test)).fetchone()
        if row is None:
            return None
        return dict(zip(("score", "driver", "nccl", "nic_fw", "run_id", "time"), row))

    def node_history(self, node) -> list[dict]:
        rows = self.db.execute("SELECT time, kind, detail, run_id FROM events WHERE node = ? ORDER BY time DESC, id DESC",
                               (node,)).fetchall()
        return [{"time": t, "kind": k, "detail": d, "run_id": r} for t, k, d, r in rows]

    def nccl_versions(self) -> dict[str, str]:
        return {n: v for n, v in self.db.execute("SELECT node, nccl FROM baselines WHERE nccl IS NOT NULL")}

    def runs(self) -> list[dict]:
        rows = self.db.execute("SELECT id, time, scope, guard_tripped FROM runs ORDER BY time DESC").fetchall()
        return [{"id": i, "time": t, "scope": json.loads(s), "guard_tripped": bool(g)} for i, t, s, g in rows]

    def close(self) -> None:
        self.db.close()


def open_store(path: str, create: bool = True) -> Store:
    return SqliteStore(path, create=create)


@contextmanager
def existing(path: str) -> Iterator[Store | None]:
    """The store at path, or None when there is none yet (a new cluster)."""
    try:
        store = open_store(path, create=False)
    except StoreError:
        yield None
        return
    try:
        yield store
    finally:
        store.close()
