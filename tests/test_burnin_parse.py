"""The nccl-tests parser on every real sample (values checked by hand) and on broken inputs."""

import json
import os
import subprocess
import sys

import pytest

from slurmqual.burnin.read import parse as parse_mod
from slurmqual.burnin.read.parse import collective_of, parse, parse_file, parse_json, parse_run, version_from_code

S = "nccl_tests/"


def load(samples, name):
    return parse((samples / (S + name)).read_text())


def test_every_sample_is_covered(samples):
    names = {p.name for p in (samples / "nccl_tests").iterdir()}
    assert names == {
        "allreduce_2node_16xH100_mpi_IB_avg_busbw_mpi_chatter_interleaved.txt",
        "allreduce_8gpu_a100_validation0_NA_redop_noroot.txt",
        "allgather_8gpu_a100_validation0_NA_noredop.txt",
        "allreduce_1gpu_rtx5090_busbw_zero_huge_algbw.txt",
        "allreduce_2gpu_rtx5090_NCCL_DEBUG_INFO_WARN_Test_NCCL_failure_abort.txt",
        "allreduce_2018_nccl1_res_column_header_then_NCCL_failure.txt",
    }


def test_two_node_h100_with_mpi_chatter(samples):
    r = load(samples, "allreduce_2node_16xH100_mpi_IB_avg_busbw_mpi_chatter_interleaved.txt")
    assert r.ok and r.problems == []
    assert r.hosts == ["bm-h100-01", "bm-h100-02"]
    assert len(r.rows) == 32 and r.rows[0].size == 8 and r.rows[-1].size == 17179869184
    assert r.busbw_at(8589934592) == 468.46 and r.rows[-1].busbw_inplace == 469.10
    assert r.avg_busbw == 139.56 and r.nccl_version == "2.26.2"
    assert all(row.wrong == 0 for row in r.rows)


def test_old_header_with_error_column_and_na(samples):
    r = load(samples, "allreduce_8gpu_a100_validation0_NA_redop_noroot.txt")
    assert r.ok and r.hosts == ["localhost"] and len(r.rows) == 34
    assert r.rows[0].size == 0 and r.rows[-1].size == 8589934592
    assert r.rows[-1].busbw == 235.26 and r.rows[-1].busbw_inplace == 235.03 and r.rows[-1].wrong is None
    assert r.avg_busbw == 68.4048


def test_oldest_allgather_columns(samples):
    r = load(samples, "allgather_8gpu_a100_validation0_NA_noredop.txt")
    assert r.ok and r.rows[-1].size == 8589934592
    assert (r.rows[-1].busbw, r.rows[-1].busbw_inplace) == (223.39, 230.07) and r.avg_busbw == 58.2651


def test_single_gpu_zero_busbw_is_complete(samples):
    r = load(samples, "allreduce_1gpu_rtx5090_busbw_zero_huge_algbw.txt")
    assert r.ok and r.hosts == ["GENOA-06"] and len(r.rows) == 25
    assert r.avg_busbw == 0.0 and all(row.busbw == 0.0 for row in r.rows)


def test_nccl_failure_abort_is_not_a_measurement(samples):
    r = load(samples, "allreduce_2gpu_rtx5090_NCCL_DEBUG_INFO_WARN_Test_NCCL_failure_abort.txt")
    assert not r.ok and r.rows == [] and r.hosts == ["GENOA-06"]
    assert any("Test NCCL failure common.cu:392" in p for p in r.problems)
    assert "no result rows" in r.problems


def test_2018_format_with_immediate_failure(samples):
    r = load(samples, "allreduce_2018_nccl1_res_column_header_then_NCCL_failure.txt")
    assert not r.ok and r.hosts == ["node03"] and r.nccl_version == "1.0" and r.rows == []
    assert any("unhandled cuda error" in p for p in r.problems)


HEADER = """# Using devices
#  Rank  0 Group  0 Pid   1 on gpu001 device  0 [0x1b] NVIDIA H100
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
ROW = "  8589934592    2147483648     float     sum      -1    34381  2.4984e+02  4.6846e+02      {w}    34365  249.96  468.67      0\n"
TAIL = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 139.56\n"


def test_exponent_numbers():
    r = parse(HEADER + ROW.format(w=0) + TAIL)
    assert r.ok and r.rows[0].busbw == 468.46


def test_wrong_results_make_it_not_ok():
    r = parse(HEADER + ROW.format(w=3) + TAIL.replace("0 OK", "3 FAILED"))
    assert not r.ok and r.rows[0].wrong == 3
    assert any("#wrong > 0" in p for p in r.problems) and "out of bounds values: 3 FAILED" in r.problems


@pytest.mark.parametrize("text,problem", [
    (HEADER + ROW.format(w=0), "incomplete run: no '# Out of bounds values' summary"),
    (HEADER + ROW.format(w=0)[:60] + "\n" + TAIL, "truncated or malformed row"),
    (HEADER + ROW.format(w=0).replace("34381", "abc") + TAIL, "unreadable numbers in row"),
    ("random garbage\n", "no results table header"),
    ("", "no results table header"),
])
def test_broken_inputs(text, problem):
    r = parse(text)
    assert not r.ok and any(p.startswith(problem) for p in r.problems), r.problems


def test_cli_parse_json_schema(samples, tmp_path):
    f = samples / S / "allreduce_2node_16xH100_mpi_IB_avg_busbw_mpi_chatter_interleaved.txt"
    p = subprocess.run([sys.executable, "-m", "slurmqual", "burnin", "parse", str(f), "--json"], capture_output=True, text=True)
    out = json.loads(p.stdout)
    assert p.returncode == 0 and set(out) == {"ok", "problems", "hosts", "rows", "avg_busbw", "nccl_version", "test",
                                              "gpu_models"}
    assert out["gpu_models"] == ["NVIDIA H100 80GB HBM3"] and out["nccl_version"] == "2.26.2"
    assert set(out["rows"][0]) == {"size", "busbw", "busbw_inplace", "wrong"}
    bad = tmp_path / "bad.txt"
    bad.write_text("nothing here")
    p = subprocess.run([sys.executable, "-m", "slurmqual", "burnin", "parse", str(bad), "--json"], capture_output=True, text=True)
    assert p.returncode == 1 and json.loads(p.stdout)["ok"] is False


def _stand_in(tmp_path, model, hosts):
    import os

    fm = tmp_path / "fabric.json"
    fm.write_text(json.dumps(model))
    exe = os.path.join(os.path.dirname(__file__), "fakebin", "all_reduce_perf")
    env = {"PATH": "/usr/bin:/bin", "SLURMQUAL_FABRIC_MODEL": str(fm)}
    p = subprocess.run([sys.executable, exe, "-b", "1G", "-e", "8G", "--hosts", hosts], capture_output=True, text=True, env=env)
    return p.returncode, parse(p.stdout)


def test_stand_in_output_parses_with_modelled_bandwidth(tmp_path):
    rc, r = _stand_in(tmp_path, {"base": 400, "nodes": {"b": 0.5}, "links": {"a,c": 0.25}}, "a,b")
    assert rc == 0 and r.ok and r.hosts == ["a", "b"] and [x.size for x in r.rows] == [1 << 30, 2 << 30, 4 << 30, 8 << 30]
    assert r.busbw_at(8 << 30) == round(400 * 0.5 * 8192 / (8192 + 64), 2)  # node factor, size ramp
    _, link = _stand_in(tmp_path, {"base": 400, "links": {"a,c": 0.25}}, "c,a")
    assert link.busbw_at(8 << 30) == round(100 * 8192 / (8192 + 64), 2)
    rc, failed = _stand_in(tmp_path, {"fail": ["b"]}, "a,b")
    assert rc == 1 and not failed.ok and any("Test NCCL failure" in p for p in failed.problems)


def test_benign_warn_and_chatter_keep_a_complete_run_ok():
    warn = "gpu001:4766:4781 [1] graph/search.cc:1135 NCCL WARN Could not find a path for pattern 4, falling back to simple order\n"
    info = "gpu001:4766:4781 [1] NCCL INFO Channel 00/02 : 0 1\n"
    r = parse(HEADER + warn + ROW.format(w=0) + info + TAIL)
    assert r.ok and len(r.rows) == 1 and r.hosts == ["gpu001"]


def test_failure_after_a_complete_table_is_not_ok():
    r = parse(HEADER + ROW.format(w=0) + TAIL + "gpu001: Test NCCL failure common.cu:1005 'remote process exited'\n")
    assert not r.ok and r.rows[0].busbw == 468.46
    assert r.problems == ["failure: gpu001: Test NCCL failure common.cu:1005 'remote process exited'"]


# -- real outputs of the forms the shared samples lack (tests/data/real/nccl_tests, SOURCES.tsv) --

REAL = os.path.join(os.path.dirname(__file__), "data", "real", "nccl_tests")


def real(name):
    return parse_file(os.path.join(REAL, name))


def test_every_real_file_has_a_source_line_and_a_test():
    with open(os.path.join(REAL, "SOURCES.tsv")) as fh:
        listed = {line.split("\t")[0] for line in fh if line.strip() and not line.startswith("#")}
    files = {n for n in os.listdir(REAL) if n != "SOURCES.tsv"}
    assert files == listed
    with open(__file__) as fh:
        me = fh.read()
    assert all(f'"{n}"' in me for n in files)


def test_mpirun_tag_output_with_stderr_lines_of_other_ranks():
    r = real("allreduce_mpi_tag_output_stderr_interleaved_nccltests2.18_rtx5090.txt")
    assert r.ok and r.problems == []
    assert r.hosts == ["lab"] and r.gpu_models == ["NVIDIA GeForce RTX 5090"]
    assert r.test == "all_reduce"  # from "# Collective test starting: all_reduce_perf_mpi"
    assert r.nccl_version == "2.29.7"  # nccl-library=22907
    assert [x.size for x in r.rows] == [1048576 << i for i in range(8)]
    assert (r.rows[-1].busbw, r.rows[-1].busbw_inplace, r.rows[-1].wrong) == (2.30, 2.31, 0)
    assert r.busbw_at(16777216) == 2.17 and r.avg_busbw == 1.57614


def test_older_error_column_marks_the_rows_out_of_bounds_counted():
    # 2020: `error` 1e+00 out of place and in place, "Out of bounds values : 2 FAILED", pasted without '#'
    r = real("allgather_2020_error_column_1e+00_oob_2_FAILED_no_hash_issue37_EXCERPT.txt")
    assert not r.ok and r.avg_busbw == 128.942
    assert [(x.size, x.busbw, x.busbw_inplace, x.wrong) for x in r.rows] == [(4294967296, 129.05, 128.84, 2)]
    assert any(p.startswith("wrong results (`error` beyond") for p in r.problems)
    assert "out of bounds values: 2 FAILED" in r.problems


def test_error_column_within_the_float_bound_is_not_wrong(samples):
    # the same older column at rounding level (1e-06 .. 5e-07 in float sums) on a clean run
    r = load(samples, "allreduce_8gpu_a100_validation0_NA_redop_noroot.txt")
    assert all(x.wrong is None for x in r.rows)


def test_srun_label_prefix():
    r = real("allreduce_srun_label_4node_mi250x_rccl_EXCERPT.txt")
    assert r.ok and r.problems == [] and len(r.rows) == 17
    assert r.rows[0].size == 65536 and r.rows[-1].size == 4294967296
    assert (r.rows[-1].busbw, r.rows[-1].busbw_inplace) == (92.89, 92.88) and r.busbw_at(8388608) == 13.72
    assert r.avg_busbw == 43.7269 and r.hosts == [] and r.gpu_models == []


def test_pre_2_13_alltoall_rows_with_an_empty_redop_cell():
    r = real("alltoall_pre2.13_empty_redop_8node_v100_EXCERPT.txt")
    assert r.ok and r.problems == []
    assert [(x.size, x.busbw, x.busbw_inplace) for x in r.rows] == [(268435456, 0.51, 0.51), (536870912, 0.51, 0.51)]
    # `error` is the largest deviation (1e+00 in place), not a count: "Out of bounds values : 0 OK" judges.
    assert all(x.wrong is None for x in r.rows) and r.avg_busbw == 0.507636


def _labelled(text, style):
    """The same output as a launcher would prefix it: every line, or every other line (mixed)."""
    prefix = {"srun": lambda i: "%2d: " % (i % 3), "mpirun": lambda i: "[1,%d]<stdout>:" % (i % 2)}[style]
    return "\n".join(prefix(i) + line if style == "srun" or i % 2 else line
                     for i, line in enumerate(text.splitlines()))


@pytest.mark.parametrize("style", ["srun", "mpirun"])
def test_every_sample_parses_the_same_behind_launcher_prefixes(samples, style):
    for p in sorted((samples / "nccl_tests").iterdir()):
        plain = parse(p.read_text(errors="replace"))
        prefixed = parse(_labelled(p.read_text(errors="replace"), style))
        assert prefixed.to_dict() == plain.to_dict(), p.name


def test_names_and_version_codes():
    assert collective_of("/opt/nccl-tests/build/all_reduce_perf_mpi") == "all_reduce"
    assert collective_of("alltoall_perf") == "alltoall" and collective_of("bash") is None and collective_of("_perf") is None
    assert version_from_code(22907) == "2.29.7" and version_from_code(21805) == "2.18.5"
    assert version_from_code(2708) == "2.7.8"


# -- forms no public output was found for: produced by the stand-in, which writes
#    them the way nccl-tests' src/util.cu and common.cu do (see SOURCES.tsv) --

def _run_stand_in(tmp_path, model, hosts, test="all_reduce_perf", args=()):
    import shutil

    fm = tmp_path / "fabric.json"
    fm.write_text(json.dumps(model))
    exe = tmp_path / test
    shutil.copy(os.path.join(os.path.dirname(__file__), "fakebin", "all_reduce_perf"), exe)
    env = {"PATH": "/usr/bin:/bin", "SLURMQUAL_FABRIC_MODEL": str(fm)}
    p = subprocess.run([sys.executable, str(exe), "-b", "1G", "-e", "8G", "--hosts", hosts, *args],
                       capture_output=True, text=True, env=env)
    log = tmp_path / f"{test}.log"
    log.write_text(p.stdout)
    return p.returncode, str(log)


def test_timestamp_and_cputime_columns_are_mapped_through_the_header(tmp_path):
    rc, log = _run_stand_in(tmp_path, {"base": 400, "nodes": {"b": 0.5}}, "a,b", args=("-S", "1", "-C", "1"))
    text = open(log).read()
    assert "cputime" in text and "timestamp" in text
    r = parse_file(log)
    assert rc == 0 and r.ok, r.problems
    assert r.busbw_at(8 << 30) == round(200 * 8192 / (8192 + 64), 2) and len(r.rows) == 4
    assert r.test == "all_reduce" and r.nccl_version == "2.21.5" and r.gpu_models == ["NVIDIA H100 80GB HBM3"]
    # A row whose timestamp cell is cut is malformed, not shifted.
    broken = "\n".join(line.rsplit(" ", 1)[0] if line.strip()[:1].isdigit() else line for line in text.splitlines())
    assert not parse(broken).ok and any(p.startswith("truncated or malformed row") for p in parse(broken).problems)


def test_legacy_alltoall_and_device_names_per_node(tmp_path):
    model = {"base": 300, "legacy": True, "gpus": {"b": "NVIDIA H200"}, "label": "srun"}
    rc, log = _run_stand_in(tmp_path, model, "a,b", test="alltoall_perf")
    r = parse_file(log)
    assert rc == 0 and r.ok and r.test is None  # legacy output does not name the test
    assert r.gpu_models == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"] and r.hosts == ["a", "b"]
    assert r.busbw_at(8 << 30) == round(300 * 8192 / (8192 + 64), 2)


def test_json_output_agrees_with_the_text(tmp_path):
    out = tmp_path / "r.json"
    rc, log = _run_stand_in(tmp_path, {"base": 400, "noise": 0.02, "seed": 5, "gpus": {"b": "NVIDIA H200"}},
                            "a,b", test="alltoall_perf", args=("-J", str(out)))
    text, doc = parse_file(log), parse_json(out.read_text())
    assert rc == 0 and doc.ok and doc.source == "json" and text.ok
    assert doc.test == "alltoall" and doc.nccl_version == "2.21.5" and doc.hosts == ["a", "b"]
    assert doc.gpu_models == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert [x.size for x in doc.rows] == [x.size for x in text.rows]
    assert all(abs(j.busbw - t.busbw) <= 0.005 for j, t in zip(doc.rows, text.rows))
    assert parse_run(log, str(out)).source == "json"


def test_json_of_a_failed_run_is_a_test_error(tmp_path):
    out = tmp_path / "r.json"
    rc, log = _run_stand_in(tmp_path, {"fail": ["b"]}, "a,b", args=("-J", str(out)))
    r = parse_run(log, str(out))
    assert rc == 1 and not r.ok and r.rows == []
    assert any(p.startswith("incomplete or invalid JSON output") for p in r.problems)
    assert any("Test NCCL failure" in p for p in r.problems)


@pytest.mark.parametrize("mutate,problem", [
    (lambda d: d.pop("average_bus_bandwidth"), "incomplete run: no average_bus_bandwidth summary"),
    (lambda d: d.update(out_of_bounds={"count": 3, "okay": "false"}), "out of bounds values: 3 FAILED"),
    (lambda d: d["results"][0]["out_of_place"].update(nwrong=2.0), "wrong results (#wrong > 0)"),
    (lambda d: d["results"][1]["in_place"].update(bus_bw="nan"), "unreadable result in JSON output"),
    (lambda d: d.update(errors=["remote process exited"]), "failure: remote process exited"),
    (lambda d: d.update(results=[]), "no result rows"),
])
def test_broken_json(tmp_path, mutate, problem):
    out = tmp_path / "r.json"
    _run_stand_in(tmp_path, {}, "a,b", args=("-J", str(out)))
    doc = json.loads(out.read_text())
    mutate(doc)
    r = parse_json(json.dumps(doc))
    assert not r.ok and any(p.startswith(problem) for p in r.problems), r.problems


def test_killed_mid_table_is_a_test_error(tmp_path):
    rc, log = _run_stand_in(tmp_path, {"truncate": ["a"], "label": "mpirun"}, "a,b")
    r = parse_file(log)
    assert rc == 137 and not r.ok and len(r.rows) == 1
    assert any(p.startswith("truncated or malformed row") for p in r.problems)
    assert "incomplete run: no '# Out of bounds values' summary" in r.problems


def test_a_concluded_line_missing_after_the_summary_is_incomplete(tmp_path):
    _, log = _run_stand_in(tmp_path, {}, "a,b")
    text = open(log).read()
    assert parse(text).ok
    r = parse(text.split("# Collective test concluded")[0])
    assert not r.ok and r.problems == ["incomplete run: no '# Collective test concluded' line"]


# -- bounded work on hostile logs --

def test_megabyte_lines_and_bad_bytes_cost_nothing(tmp_path):
    _, log = _run_stand_in(tmp_path, {}, "a,b")
    good = open(log, "rb").read()
    head, tail = good.split(b"#\n#  ", 1)
    evil = tmp_path / "evil.log"
    evil.write_bytes(head + b"NCCL WARN " * 100_000 + b"\n" + b"# Rank " + b" " * 1_000_000 + b"x\n"
                     + b"\xff\xfe garbage \xc3\x28\n" + b"#\n#  " + tail)
    r = parse_file(str(evil))
    assert r.ok and r.rows and [x.busbw for x in r.rows] == [x.busbw for x in parse_file(log).rows]


def test_a_log_over_the_size_cap_is_read_partly_and_judged_not_ok(tmp_path, monkeypatch):
    _, log = _run_stand_in(tmp_path, {}, "a,b")
    monkeypatch.setattr(parse_mod, "MAX_FILE", 2000)
    r = parse_file(log)
    assert not r.ok and any(p.startswith("log larger than") for p in r.problems)


# -- numbers no hardware produces, and logs holding more than one run --

@pytest.mark.parametrize("busbw,problem", [
    ("-4.6846e+02", "negative busbw -468.46 GB/s at size 8589934592"),
    ("1.2000e+03", "impossible busbw 1200 GB/s at size 8589934592 (over the 900 GB/s NVIDIA H100 can move)"),
    ("inf", "unreadable numbers in row"),
    ("nan", "unreadable numbers in row"),
])
def test_a_busbw_no_hardware_produces_is_a_test_error(busbw, problem):
    r = parse(HEADER + ROW.format(w=0).replace("4.6846e+02", busbw) + TAIL)
    assert not r.ok and any(p.startswith(problem) for p in r.problems), r.problems


def test_the_bound_follows_the_gpu_model():
    # 1,200 GB/s is impossible for an H100 but not for a B200 or an unnamed GPU; 20 TB/s is for any.
    row = ROW.format(w=0).replace("4.6846e+02", "1.2000e+03")
    assert parse(HEADER.replace("NVIDIA H100", "NVIDIA B200") + row + TAIL).ok
    assert parse(HEADER.replace("NVIDIA H100", "Some Accelerator") + row + TAIL).ok
    huge = parse(HEADER.replace("NVIDIA H100", "Some Accelerator") + row.replace("1.2000e+03", "2e+04") + TAIL)
    assert not huge.ok and any(p.startswith("impossible busbw 20000 GB/s") for p in huge.problems)
    assert parse_mod.max_busbw_gbps(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"]) == 900
    assert parse_mod.max_busbw_gbps(["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 5090"]) == parse_mod.MAX_BUSBW_GBPS


def test_json_with_a_negative_busbw_is_a_test_error(tmp_path):
    out = tmp_path / "r.json"
    _run_stand_in(tmp_path, {}, "a,b", args=("-J", str(out)))
    doc = json.loads(out.read_text())
    assert parse_json(json.dumps(doc)).ok
    doc["results"][0]["in_place"]["bus_bw"] = -1.5
    r = parse_json(json.dumps(doc))
    assert not r.ok and any(p.startswith("negative busbw -1.5 GB/s") for p in r.problems), r.problems


def test_two_result_tables_that_disagree_are_a_test_error(samples, tmp_path):
    # Two runs appended to one log (a retried task writing the same file): which one measured the node?
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    _, first = _run_stand_in(tmp_path / "a", {"base": 400}, "a,b")
    _, second = _run_stand_in(tmp_path / "b", {"base": 200}, "a,b")
    one, two = open(first).read(), open(second).read()
    assert parse(one).ok and parse(two).ok
    r = parse(one + two)
    assert not r.ok and len(r.rows) == 4, r.problems
    assert any(p.startswith("2 result tables in one log that disagree (size 1073741824: ") for p in r.problems)
    # A real log printed twice (tee'd into the same file) is one run: it is kept once.
    real_log = (samples / (S + "allreduce_2node_16xH100_mpi_IB_avg_busbw_mpi_chatter_interleaved.txt")).read_text()
    twice = parse(real_log + real_log)
    assert twice.ok and len(twice.rows) == 32 and twice.busbw_at(8589934592) == 468.46
