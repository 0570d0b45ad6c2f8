"""The nccl-tests parser on every real sample (values checked by hand) and on broken inputs."""

import json
import subprocess
import sys

import pytest

from slurmqual.burnin.parse import parse

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
    assert p.returncode == 0 and set(out) == {"ok", "problems", "hosts", "rows", "avg_busbw"}
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
