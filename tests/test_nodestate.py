"""Node state files merge per check: a prolog never erases what the healthcheck recorded."""

from __future__ import annotations

import json
import multiprocessing

from slurmqual import nodestate
from slurmqual.inventory import read_state_versions
from slurmqual.result import CheckResult, Status


def test_prolog_keeps_healthcheck_versions_and_checks(tmp_path):
    d = str(tmp_path)
    nodestate.record_run(d, "n1", "healthcheck", [CheckResult("versions", Status.PASS, "pinned"),
                                                  CheckResult("peermem", Status.PASS, "loaded")],
                         {"driver": "550.54.15", "nic_fw": "28.39.1002", "kernel": "6.1.0-18-amd64"}, now=100.0)
    nodestate.record_run(d, "n1", "prolog", [CheckResult("peermem", Status.FAIL, "not loaded")], {}, now=200.0)
    st = nodestate.read(d, "n1")
    assert st.versions == {"driver": "550.54.15", "nic_fw": "28.39.1002", "kernel": "6.1.0-18-amd64"}
    assert st.checks["versions"]["time"] == 100.0 and st.checks["versions"]["hook"] == "healthcheck"
    assert st.checks["peermem"]["status"] == "fail" and st.checks["peermem"]["hook"] == "prolog"
    assert st.status == "fail" and st.failing == ["peermem"] and st.hook == "prolog" and st.time == 200.0
    versions, bad = read_state_versions(d)
    assert versions["n1"]["driver"] == "550.54.15" and bad == []
    # The on-disk format keeps the fields older readers use.
    raw = json.loads((tmp_path / "nodes" / "n1.json").read_text())
    assert raw["status"] == "fail" and {c["name"] for c in raw["checks"]} == {"versions", "peermem"}


def test_unreadable_file_is_reported_by_read_and_replaced_by_update(tmp_path):
    d = str(tmp_path)
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "n1.json").write_text("{oops")
    try:
        nodestate.read(d, "n1")
        raise AssertionError("expected StateError")
    except nodestate.StateError as exc:
        assert "n1.json" in str(exc)
    states, bad = nodestate.read_all(d)
    assert states == {} and bad == ["n1.json"]
    nodestate.record_run(d, "n1", "epilog", [CheckResult("peermem", Status.PASS, "ok")], {}, now=5.0)
    assert nodestate.read(d, "n1").status == "pass"
    assert nodestate.read(d, "n2") is None


def _writer(args):
    d, i = args
    nodestate.record_run(d, "n1", "epilog", [CheckResult(f"c{i}", Status.PASS, "ok")], {f"v{i}": str(i)})


def test_concurrent_writers_lose_nothing(tmp_path):
    d = str(tmp_path)
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_writer, [(d, i) for i in range(24)])
    st = nodestate.read(d, "n1")
    assert set(st.checks) == {f"c{i}" for i in range(24)} and len(st.versions) == 24


def test_bad_node_name_refused(tmp_path):
    for bad in ("../x", ".hidden", ""):
        try:
            nodestate.path(str(tmp_path), bad)
            raise AssertionError(bad)
        except ValueError:
            pass
