"""Hook and requalify events reach `slurmqual history` through the spool."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from slurmqual import events
from slurmqual.burnin.results.store import open_store


def _config(tmp_path):
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[hooks]\nsyslog = false\nlog_file = "{tmp_path}/sq.log"\nstate_dir = "{tmp_path}/state"\n'
                   f'[store]\npath = "{tmp_path}/s.db"\n')
    os.chmod(tmp_path, 0o755)
    return cfg


def _history(cfg, node):
    env = dict(os.environ, SLURMQUAL_CONFIG=str(cfg))
    p = subprocess.run([sys.executable, "-m", "slurmqual", "history", node, "--json"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_spooled_events_are_ingested_once_even_before_the_first_burnin(tmp_path):
    cfg = _config(tmp_path)
    state = str(tmp_path / "state")
    events.record(state, "n1", "drain", "slurmqual: peermem: not loaded", when=100.0, source="healthcheck")
    events.record(state, "n1", "resume", "checks pass", when=200.0, source="healthcheck")
    events.record(state, "n2", "guard_hold", "slurmqual: versions: driver 535 != 550", when=150.0, source="prolog")
    got = _history(cfg, "n1")
    assert [(e["kind"], e["detail"]) for e in got["events"]] == [
        ("resume", "healthcheck: checks pass"), ("drain", "healthcheck: slurmqual: peermem: not loaded")]
    assert events.pending(state) == []
    again = _history(cfg, "n1")  # ingesting twice never duplicates
    assert len(again["events"]) == 2
    assert [e["kind"] for e in _history(cfg, "n2")["events"]] == ["guard_hold"]


def test_garbage_in_the_spool_is_skipped_not_fatal(tmp_path):
    cfg = _config(tmp_path)
    d = tmp_path / "state" / "events"
    d.mkdir(parents=True)
    (d / "1.0-n1-xx.json").write_text("{oops")
    events.record(str(tmp_path / "state"), "n1", "drain", "x", when=5.0)
    assert [e["kind"] for e in _history(cfg, "n1")["events"]] == ["drain"]
    store = open_store(str(tmp_path / "s.db"), create=False)
    try:
        assert len(store.node_history("n1")) == 1
    finally:
        store.close()
