"""Slurm's formats, decoded per generation from real outputs of each Slurm
release (tests/data/real/slurm/<release>/, made by capture.py there: n2
drained with a comment and an extra, n3 in a maintenance reservation, an array
job 0-2 with a submit mark and a plain job), and the CLI adapter on bad
answers: malformed output, unreachable controller, hung commands, and
creations that must never be repeated blindly."""

from __future__ import annotations

import copy
import glob
import json
import os
import time

import pytest

from slurmqual.slurm.adapter import JobRecord, SlurmError, compress, expand, jobs_of
from slurmqual.slurm.cli import CliAdapter, job_with_mark
from slurmqual.slurm.schema import (FormatError, SlurmVersion, decode_jobs, decode_nodes, doc_version,
                                    parse_node_oneliner, parse_version)

REAL = os.path.join(os.path.dirname(__file__), "data", "real", "slurm")
RELEASES = sorted(d for d in os.listdir(REAL) if os.path.isdir(os.path.join(REAL, d)) and d[:2].isdigit())
MARK = "slurmqual-submit-0123456789abcdef"


def real(release: str, name: str):
    with open(os.path.join(REAL, release, name)) as fh:
        return json.load(fh) if name.endswith(".json") else fh.read()


def node_docs(release: str) -> list[tuple[str, dict]]:
    """Every per-node document of a release the adapter may read."""
    names = ["sinfo_json.json"] if release.startswith("22.") else ["scontrol_show_nodes_json.json"]
    names += [os.path.basename(p) for p in sorted(glob.glob(os.path.join(REAL, release, "slurmrestd_v*_nodes.json")))]
    return [(n, real(release, n)) for n in names if n != "slurmrestd_v0.0.36_nodes.json"]


def test_fixtures_cover_the_host_release_at_least():
    assert "22.05" in RELEASES
    with open(os.path.join(REAL, "SOURCES.tsv")) as fh:
        listed = fh.read()
    for release in RELEASES:
        assert f"{release}/" in listed, f"{release} fixtures not described in SOURCES.tsv"


@pytest.mark.parametrize("release", RELEASES)
def test_version_from_scontrol_and_from_meta_agree(release):
    v = parse_version(real(release, "scontrol_V.txt"))
    assert f"{v.major}.{v.minor:02d}" == release
    doc_v, gen = doc_version(real(release, "squeue_json.json"), "squeue --json")
    assert doc_v == v and gen == v.cli_generation()


@pytest.mark.parametrize("release", RELEASES)
def test_nodes_of_every_document_read_drain_and_reason(release):
    version = parse_version(real(release, "scontrol_V.txt"))
    for name, doc in node_docs(release):
        nodes = {n.name: n for n in decode_nodes(doc, name, version)}
        assert sorted(nodes) == ["n1", "n2", "n3"], name
        assert nodes["n2"].drained and nodes["n2"].reason == "admin: RMA ticket 42", (name, nodes["n2"])
        assert nodes["n1"].state in ("allocated", "mixed"), name   # runs the array's first task
        assert "MAINTENANCE" in nodes["n3"].flags and nodes["n3"].hands_off, name
        assert not nodes["n3"].drained, name
        # Every document says what the oneliner of the same moment says.
        for n in parse_node_oneliner(real(release, "scontrol_show_node_oneliner.txt")):
            got = nodes[n.name]
            assert (got.state, set(got.flags), got.reason) == (n.state, set(n.flags), n.reason), (name, got, n)


def test_v0036_nodes_lack_drain_flags_and_are_refused_not_misread():
    doc = real("22.05", "slurmrestd_v0.0.36_nodes.json")
    n2 = next(n for n in doc["nodes"] if n["name"] == "n2")
    assert n2["state"] == "idle" and "state_flags" not in n2   # the drained node, as the server wrote it
    with pytest.raises(FormatError, match=r"Slurm 22\.05\.\d+ \(data format v0\.0\.36\).*state_flags"):
        decode_nodes(doc, "slurmrestd v0.0.36 nodes")


@pytest.mark.parametrize("release", RELEASES)
def test_oneliner_reason_stops_before_comment_extra_and_reservation(release):
    text = real(release, "scontrol_show_node_oneliner.txt")
    line = next(ln for ln in text.splitlines() if ln.startswith("NodeName=n2 "))
    assert " Comment=rack 4 slot 2" in line and " Extra=burnin=2026-11" in line   # the fields that follow Reason=
    nodes = {n.name: n for n in parse_node_oneliner(text)}
    assert nodes["n2"].reason == "admin: RMA ticket 42" and nodes["n2"].drained
    assert nodes["n3"].hands_off
    n3 = next(ln for ln in text.splitlines() if ln.startswith("NodeName=n3 "))
    if " ReservationName=" in n3 and " Reason=" in n3:   # 23.02+: the reservation follows the reason
        assert nodes["n3"].reason and "ReservationName" not in nodes["n3"].reason
    for n in nodes.values():
        assert "[" not in n.reason and "=" not in n.reason.split(":")[0], n


def test_oneliner_reason_without_a_stamp_ends_at_the_next_known_field():
    # A reason with no [user@time] (reason_time 0) made from the real 22.05 line.
    line = next(ln for ln in real("22.05", "scontrol_show_node_oneliner.txt").splitlines()
                if ln.startswith("NodeName=n2 "))
    head, _, rest = line.partition(" Reason=")
    stamp_end = rest.index("] ") + 2
    nostamp = f"{head} Reason=admin: RMA ticket 42 {rest[stamp_end:]}"
    (n2,) = parse_node_oneliner(nostamp)
    assert n2.reason == "admin: RMA ticket 42"


@pytest.mark.parametrize("release", RELEASES)
def test_jobs_of_squeue_and_every_rest_version(release):
    names = ["squeue_json.json"] + [os.path.basename(p) for p in
                                    sorted(glob.glob(os.path.join(REAL, release, "slurmrestd_v*_jobs.json")))]
    for name in names:
        jobs = decode_jobs(real(release, name), name)
        tasks = sorted(j.key for j in jobs if j.array_job_id)
        array_id = next(j.array_job_id for j in jobs if j.array_job_id)
        assert tasks == [f"{array_id}_{i}" for i in range(3)], name
        states = {k: r.state for k, r in jobs_of(jobs, [array_id]).items()}
        assert set(states) == set(tasks) and set(states.values()) <= {"RUNNING", "PENDING"}, name
        assert all(r.active for r in jobs_of(jobs, [array_id]).values()), name
        assert "RUNNING" in states.values(), name
        assert job_with_mark(jobs, MARK) == array_id, name
        one = next(j for j in jobs if j.name == "one")
        assert jobs_of(jobs, [one.job_id]) == {one.job_id: one}, name
        assert job_with_mark(jobs, "slurmqual-submit-ffffffffffffffff") is None


def _newest(release_files: str):
    release = RELEASES[-1]
    return release, real(release, release_files)


def test_unknown_future_release_with_a_changed_shape_names_the_version():
    release, doc = _newest("squeue_json.json")
    future = copy.deepcopy(doc)
    meta = future["meta"]
    slurm = meta.get("slurm") or meta.get("Slurm")
    slurm["version"] = {"major": "27", "minor": "05", "micro": "0"}
    slurm["release"] = "27.05.0"
    if "data_parser" in meta.get("plugin", {}):
        meta["plugin"]["data_parser"] = "data_parser/v0.0.47"
    else:
        meta["plugin"]["type"] = "openapi/v0.0.47"
    for j in future["jobs"]:
        j["job_state"] = {"current": ["RUNNING"]}   # a shape we do not know
    with pytest.raises(FormatError, match=r"Slurm 27\.05\.0 \(data format v0\.0\.47\).*newer than slurmqual knows"):
        decode_jobs(future, "squeue --json")


def test_unknown_base_state_or_moved_state_is_an_error_never_idle():
    release = RELEASES[-1]
    name, doc = node_docs(release)[0]
    bad = copy.deepcopy(doc)
    n2 = next(n for n in bad["nodes"] if n["name"] == "n2")
    if isinstance(n2["state"], list):
        n2["state"] = ["QUARANTINED"]
    else:
        n2["state"], n2["state_flags"] = "quarantined", []
    with pytest.raises(FormatError, match=f"Slurm {release}.*no known base state"):
        decode_nodes(bad, name)
    moved = copy.deepcopy(doc)
    for n in moved["nodes"]:
        n["state"] = {"base": "IDLE", "flags": ["DRAIN"]}
    with pytest.raises(FormatError, match=f"Slurm {release}"):
        decode_nodes(moved, name)


def test_unknown_flag_is_kept_and_makes_the_node_hands_off():
    name, doc = node_docs(RELEASES[-1])[0]
    doc = copy.deepcopy(doc)
    n1 = next(n for n in doc["nodes"] if n["name"] == "n1")
    if isinstance(n1["state"], list):
        n1["state"] = n1["state"] + ["QUARANTINE_PENDING"]
    else:
        n1["state_flags"] = n1["state_flags"] + ["QUARANTINE_PENDING"]
    node = next(n for n in decode_nodes(doc, name) if n.name == "n1")
    assert "QUARANTINE_PENDING" in node.flags and node.hands_off


def test_grouped_sinfo_of_newer_slurm_is_a_clear_error():
    newer = [r for r in RELEASES if not r.startswith("22.")]
    if not newer:
        pytest.skip("no fixtures of Slurm >= 23.02 yet (capture.py 24.11 / newest)")
    doc = real(newer[-1], "sinfo_json.json")
    assert "sinfo" in doc and "nodes" not in doc
    with pytest.raises(FormatError, match="grouped by state.*scontrol show nodes --json"):
        decode_nodes(doc, "sinfo --json")


def test_version_strings():
    assert parse_version("slurm 22.05.8\n") == SlurmVersion(22, 5, 8)
    assert parse_version("slurm-wlm 24.11.5") == SlurmVersion(24, 11, 5)
    assert parse_version("slurm 26.05.0-0rc1").cli_generation() == 45
    with pytest.raises(FormatError, match="older than slurmqual supports"):
        SlurmVersion(21, 8, 8).cli_generation()
    with pytest.raises(FormatError, match="no Slurm version"):
        parse_version("scontrol: error: something")


# -- the CLI adapter with stand-in tools ---------------------------------------------

def _bin(tmp_path, tool: str, body: str) -> str:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / tool).write_text("#!/bin/sh\n" + body + "\n")
    (d / tool).chmod(0o755)
    return str(d)


def _scontrol_v(tmp_path, release: str = "22.05") -> str:
    """A scontrol that answers -V like the real one of `release` and fails otherwise."""
    v = real(release, "scontrol_V.txt").strip()
    return _bin(tmp_path, "scontrol", f'[ "$1" = -V ] && {{ echo "{v}"; exit 0; }}; echo "$*" >&2; exit 1')


@pytest.mark.parametrize("body", ["echo '{not json'", "echo '{\"nodes\": 5}'", "echo '{\"nodes\": [{\"nom\": 1}]}'"])
def test_malformed_sinfo_is_a_clear_error(tmp_path, body):
    _scontrol_v(tmp_path)
    a = CliAdapter(_bin(tmp_path, "sinfo", body), timeout=5, retries=1)
    with pytest.raises(SlurmError, match="sinfo --json"):
        a.node_info()


def test_cli_picks_the_node_command_by_installed_version(tmp_path):
    """22.05 reads sinfo --json; 23.02+ reads scontrol show nodes --json (never tried one after the other)."""
    bindir = _scontrol_v(tmp_path, "22.05")
    shutil_copy = f"cat {os.path.join(REAL, '22.05', 'sinfo_json.json')}"
    _bin(tmp_path, "sinfo", shutil_copy)
    a = CliAdapter(bindir, timeout=5, retries=1)
    assert {n.name for n in a.node_info() if n.drained} == {"n2"}
    assert [c[1:] for c in a.calls] == [["-V"], ["--json"]]
    newer = [r for r in RELEASES if not r.startswith("22.")]
    if newer:
        v = real(newer[-1], "scontrol_V.txt").strip()
        doc = os.path.join(REAL, newer[-1], "scontrol_show_nodes_json.json")
        _bin(tmp_path, "scontrol", f'[ "$1" = -V ] && {{ echo "{v}"; exit 0; }}; cat {doc}')
        b = CliAdapter(bindir, timeout=5, retries=1)
        drained = {n.name for n in parse_node_oneliner(real(newer[-1], "scontrol_show_node_oneliner.txt"))
                   if n.drained}
        assert "n2" in drained and {n.name for n in b.node_info() if n.drained} == drained
        assert [c[1:] for c in b.calls] == [["-V"], ["show", "nodes", "--json"]]


def test_malformed_scontrol_is_a_clear_error(tmp_path):
    a = CliAdapter(_bin(tmp_path, "scontrol", "echo 'garbage here'"), timeout=5, retries=1)
    with pytest.raises(SlurmError, match="scontrol show node: unreadable output"):
        a.node_info("n1")


def test_unreachable_controller_retries_boundedly(tmp_path):
    bindir = _bin(tmp_path, "scontrol", f"echo x >> {tmp_path}/count; "
                  "echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2; exit 1")
    a = CliAdapter(bindir, timeout=5, retries=3)
    start = time.monotonic()
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        a.node_info("n1")
    assert time.monotonic() - start < 10
    assert open(tmp_path / "count").read().count("x") == 3


def test_hung_scontrol_times_out(tmp_path):
    a = CliAdapter(_bin(tmp_path, "scontrol", "sleep 60"), timeout=0.5, retries=2)
    start = time.monotonic()
    with pytest.raises(SlurmError, match="timed out"):
        a.drain(["n1"], "slurmqual: x: y")
    assert time.monotonic() - start < 5


def test_slow_sbatch_whose_job_is_found_is_called_once(tmp_path):
    """sbatch times out after slurmctld took the job: the job is found by its
    mark and sbatch is not run again. squeue answers with the real 22.05 output
    whose array job carries a mark; the mark given to sbatch is recorded, so
    the stand-in squeue only lists the job once sbatch has been called."""
    squeue_doc = real("22.05", "squeue_json.json")
    (tmp_path / "squeue.json").write_text(json.dumps(squeue_doc))
    bindir = _bin(tmp_path, "sbatch", f'echo call >> {tmp_path}/sbatch.count\n'
                  f'for a in "$@"; do case "$a" in --comment=*) echo "${{a#--comment=}}" > {tmp_path}/mark;; esac; done\n'
                  "sleep 30")
    _bin(tmp_path, "squeue", f'[ -f {tmp_path}/mark ] || {{ echo \'{{"meta": {json.dumps(squeue_doc["meta"])}, '
                  f'"errors": [], "jobs": []}}\'; exit 0; }}\n'
                  f'sed "s/{MARK}/$(cat {tmp_path}/mark)/" {tmp_path}/squeue.json')
    a = CliAdapter(bindir, timeout=1, retries=3)
    job = a.submit(["--job-name=arr", "--array=0-2"], script="sleep 1")
    assert (tmp_path / "sbatch.count").read_text().count("call") == 1
    array_id = next(j["array_job_id"] for j in squeue_doc["jobs"] if j.get("array_job_id"))
    assert job == str(array_id)


def test_slow_sbatch_that_made_nothing_is_retried_only_after_looking(tmp_path):
    squeue_doc = real("22.05", "squeue_json.json")
    (tmp_path / "squeue.json").write_text(json.dumps(squeue_doc))   # real jobs, none with our mark
    bindir = _bin(tmp_path, "sbatch", f"echo call >> {tmp_path}/sbatch.count; sleep 30")
    _bin(tmp_path, "squeue", f"echo call >> {tmp_path}/squeue.count; cat {tmp_path}/squeue.json")
    a = CliAdapter(bindir, timeout=0.5, retries=2)
    with pytest.raises(SlurmError, match="not found afterwards, so not created"):
        a.submit(["--job-name=x"], script="true")
    assert (tmp_path / "sbatch.count").read_text().count("call") == 2
    assert (tmp_path / "squeue.count").read_text().count("call") >= 2   # looked before the 2nd try and after it


def test_sbatch_rejection_is_not_retried(tmp_path):
    bindir = _bin(tmp_path, "sbatch", f"echo call >> {tmp_path}/count; "
                  "echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2; exit 1")
    a = CliAdapter(bindir, timeout=5, retries=3)
    with pytest.raises(SlurmError, match="Invalid partition name"):
        a.submit(["--partition=nope"], script="true")
    assert (tmp_path / "count").read_text().count("call") == 1


def test_real_scontrol_without_controller_is_bounded(tmp_path):
    if not os.path.exists("/usr/bin/scontrol"):
        pytest.skip("slurm-client not installed")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n"
                    "NodeName=n1 NodeAddr=127.0.0.1\nPartitionName=p Nodes=n1\n")
    a = CliAdapter(None, timeout=8, retries=2, slurm_conf=str(conf))
    start = time.monotonic()
    with pytest.raises(SlurmError):
        a.node_info("n1")
    assert time.monotonic() - start < 30


def test_cli_children_get_no_rest_token_and_a_fixed_time_format(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMRESTD_TOKEN", "eyJsecret")
    monkeypatch.setenv("SLURM_JWT", "eyJjwt")
    a = CliAdapter(_bin(tmp_path, "scontrol", "env"), timeout=5, retries=1)
    out = a._run("scontrol")
    assert "eyJsecret" not in out and "eyJjwt" not in out and "SLURM_TIME_FORMAT=standard" in out


def test_hostlists_via_library():
    assert expand("gpu[001-003,010]") == ["gpu001", "gpu002", "gpu003", "gpu010"]
    assert compress(["gpu001", "gpu002", "gpu003", "gpu010"]) == "gpu[001-003,010]"
    with pytest.raises(SlurmError, match="bad hostlist"):
        expand("gpu[001-")


def test_pending_array_tasks_kept_in_the_array_record_are_listed():
    """26.05 lists not-yet-started tasks in the array's own record
    (array_task_string); each is still tracked as A_T."""
    from slurmqual.slurm.schema.jobs import array_tasks

    newest = [r for r in RELEASES if r >= "26.05"]
    if newest:
        doc = real(newest[-1], "squeue_json.json")
        meta_rec = [j for j in doc["jobs"] if j.get("array_task_string")]
        assert meta_rec, "26.05 fixture lost its pending array record"
        doc = copy.deepcopy(doc)
        for j in doc["jobs"]:
            if j.get("array_task_string"):
                j["array_task_string"] = "2-5,7"
        keys = {j.key for j in decode_jobs(doc, "squeue --json")}
        arr = str(meta_rec[0]["array_job_id"]["number"])
        assert {f"{arr}_{t}" for t in (2, 3, 4, 5, 7)} <= keys
    assert array_tasks("2-5,7") == [2, 3, 4, 5, 7]
    assert array_tasks("0-15:4%2") == [0, 4, 8, 12]
    for bad in ("a-b", "5-2", "1-"):
        with pytest.raises(ValueError):
            array_tasks(bad)


@pytest.mark.parametrize("state,flags,active", [
    ("PENDING", (), True), ("RUNNING", (), True), ("SUSPENDED", (), True), ("COMPLETING", (), True),
    ("CONFIGURING", (), True), ("REQUEUED", (), True), ("COMPLETED", ("COMPLETING",), True),
    ("PENDING", ("REQUEUED",), True), ("COMPLETED", (), False), ("FAILED", (), False), ("CANCELLED", (), False),
    ("TIMEOUT", (), False), ("NODE_FAIL", (), False), ("PREEMPTED", (), False), ("OUT_OF_MEMORY", (), False),
])
def test_job_record_knows_whether_a_job_is_still_going(state, flags, active):
    """The one answer to "is this job still going?": a suspended analysis job is not finished."""
    assert JobRecord("1", "1", None, "x", state, flags).active is active


@pytest.mark.parametrize("gen,value", [(38, "SUSPENDED"), (40, ["SUSPENDED"]), (40, ["COMPLETED", "COMPLETING"])])
def test_decoded_suspended_and_completing_jobs_are_active(gen, value):
    doc = real(RELEASES[0] if gen == 38 else RELEASES[-1], "squeue_json.json")
    rec = dict(doc["jobs"][0], job_state=value)
    (job, *_) = decode_jobs(dict(doc, jobs=[rec]), "squeue --json")
    assert job.active


def test_poll_for_looks_until_found_or_the_time_is_up():
    """The creation-mark look both the CLI and pyslurm adapters use: a
    SlurmError from the look is 'not found yet', 0 seconds is one look."""
    from slurmqual.slurm.adapter import poll_for

    looks = []

    def find():
        looks.append(1)
        if len(looks) < 3:
            raise SlurmError("squeue: slurmctld busy")
        return "4242"

    assert poll_for(find, 5.0, interval=0.01) == "4242" and len(looks) == 3
    looks.clear()
    assert poll_for(lambda: looks.append(1), 0) is None and len(looks) == 1
    start = time.monotonic()
    assert poll_for(lambda: None, 0.2, interval=0.05) is None
    assert 0.2 <= time.monotonic() - start < 2
