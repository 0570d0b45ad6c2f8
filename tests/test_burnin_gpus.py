"""Per-GPU burn-in: parsers on real gpu_burn / dcgmproftester / nvbandwidth
outputs (tests/data/real/gpu, SOURCES.tsv), the per-GPU judgement against
the fleet, silent data corruption, and nccl-tests #wrong across partners."""

import json
import os
import subprocess
import sys

import pytest

from slurmqual.burnin.read import gpuparse
from slurmqual.burnin.judge.analyze import analyze
from slurmqual.burnin.records import Measurement
from slurmqual.burnin.judge.gpus import corrupt_nodes, drain_reason
from slurmqual.burnin.records import GpuMeasurement

REAL = os.path.join(os.path.dirname(__file__), "data", "real", "gpu")
H100 = "NVIDIA H100 80GB HBM3"


def real(name):
    return gpuparse.parse_file(os.path.join(REAL, name))


# -- parsers on real outputs ------------------------------------------------------

def test_gpu_burn_8x_a100_complete_run():
    r = real("gpu_burn_8x_A100_doubles_tc_superbench.log")
    assert r.tool == "gpu_burn" and r.ok, r.problems
    assert [x.gpu for x in r.readings] == list(range(8))
    # second half of the run: ~17 TFLOPS each (the early zeros of not-yet-reporting GPUs left out)
    assert all(16.5 < x.value < 17.5 and x.unit == "TFLOPS" and x.errors == 0 for x in r.readings)
    assert r.readings[0].gpu_model == "NVIDIA A100-SXM4-80GB"
    assert r.readings[0].serial == "GPU-b876c63f-396c-f826-5cd0-6b8409990352"


def test_gpu_burn_compare_errors_are_counted_per_gpu():
    r = real("gpu_burn_16x_FAULTY_compare_errors_issue12_EXCERPT.txt")
    assert r.ok, r.problems  # a complete run: the errors are a verdict, not a test error
    errs = {x.gpu: x.errors for x in r.readings}
    assert errs[1] == 524288000 and errs[9] == 524288000  # negative counts (int overflow) still count
    assert errs[0] == 1  # 0 in the last record, FAULTY in the summary (errors are reset at each summary)
    assert len(r.readings) == 16


def test_gpu_burn_init_error_and_cut_summary_is_a_test_error():
    r = real("gpu_burn_8x_V100_init_error_issue123_EXCERPT.txt")
    assert not r.ok
    assert any("Couldn't init a GPU test" in p for p in r.problems)
    assert any("summary names 4 of 8" in p for p in r.problems)
    assert all(x.value is None for x in r.readings)  # 0 Gflop/s is no score, and never "slow"


def test_gpu_burn_without_final_summary_is_incomplete():
    r = real("gpu_burn_1x_K80_no_summary_issue8.txt")
    assert not r.ok and any("no 'Tested N GPUs'" in p for p in r.problems)


@pytest.mark.parametrize("name,value", [
    ("dcgmproftester11_t1004_A100_dcgm3_docs_EXCERPT.txt", 252.9),
    ("dcgmproftester12_t1004_dcgm4_exponent_openshift_EXCERPT.txt", 192.0),
    ("dcgmproftester_t1004_T4_dcgm2_no_worker_prefix_EXCERPT.txt", 27.8),
])
def test_dcgmproftester_generations(name, value):
    r = real(name)
    assert r.tool == "dcgmproftester" and r.ok, r.problems
    assert [(x.gpu, x.test, x.unit) for x in r.readings] == [(0, "gemm", "TFLOPS")]
    assert r.readings[0].value == pytest.approx(value, abs=0.1)


def test_dcgmproftester_without_gflops_or_on_mig_slices_is_a_test_error():
    r = real("dcgmproftester12_t1007_dcgm4.2.3_no_gflops_issue239_EXCERPT.txt")
    assert not r.ok and not r.readings and "no gflops" in r.problems[0]
    r = real("dcgmproftester11_t1004_MIG_2workers_dcgm3_docs_EXCERPT.txt")
    assert not r.ok and "MIG slices" in r.problems[0] and r.readings[0].value is None


def test_nvbandwidth_device_local_copy_with_pci_addresses():
    r = real("nvbandwidth_v0.8_8x_H20_device_local_copy_issue48.txt")
    assert r.ok and r.version == "v0.8"
    assert [(x.gpu, x.test) for x in r.readings] == [(g, "hbm") for g in range(8)]
    assert r.readings[4].pci == "0000:9b:00.0" and r.readings[4].gpu_model == "NVIDIA H20-3e"
    assert r.readings[6].value == 1117.17


def test_nvbandwidth_host_links_and_nvlink_matrix():
    r = real("nvbandwidth_v0.10_2gpu_h2d_d2h_d2d_azurehpc.txt")
    assert r.ok, r.problems
    got = {(x.test, x.gpu): x.value for x in r.readings}
    assert got[("h2d", 1)] == 25.94 and got[("d2h", 0)] == 25.97
    assert got[("nvlink", 0)] == pytest.approx(276.13)  # its row and column, N/A diagonal left out
    r = real("nvbandwidth_v0.6_GH200_all_testcases_superbench.log")
    assert r.ok and r.readings[0].pci == "0009:01:00.0"


def test_nvbandwidth_truncated_or_asserting_is_a_test_error():
    r = real("nvbandwidth_v0.2_8x_RTX4090_h2d_d2h_issue15_EXCERPT.txt")
    assert not r.ok and "no SUM line" in r.problems[0]
    r = real("nvbandwidth_v0.7_8x_A100_d2d_assert_issue34.txt")
    assert not r.ok and not r.readings
    assert any("Invalid value when checking the pattern" in p for p in r.problems)


def test_nvbandwidth_json_document():
    # the shape json_output.cpp (v0.8) writes: our text sample re-emitted through it
    text = real("nvbandwidth_v0.8_8x_H20_device_local_copy_issue48.txt")
    doc = {"nvbandwidth": {"version": "v0.8", "GPU Device list": [
        f"{x.gpu}: {x.gpu_model} (00000000:{x.pci[5:7]}:00): (sglang-host-cuda)" for x in text.readings],
        "testcases": [{"name": "device_local_copy", "status": "Passed", "sum": 8930.99,
                       "bandwidth_description": "memcpy local GPU(column) bandwidth (GB/s)",
                       "bandwidth_matrix": [[str(x.value) for x in text.readings]]}]}}
    r = gpuparse.parse(json.dumps(doc))
    assert r.ok and [(x.gpu, x.value, x.pci) for x in r.readings] == [(x.gpu, x.value, x.pci) for x in text.readings]
    doc["nvbandwidth"]["testcases"][0].update(status="Error", error="CUDA_ERROR_OUT_OF_MEMORY")
    assert not gpuparse.parse(json.dumps(doc)).ok
    assert not gpuparse.parse('{"nvbandwidth": {"testc').ok  # cut JSON


def test_gpu_burn_2026_cuinit_returned_0_is_not_a_failure():
    # gpu_burn 2026 prints `cuInit returned 0 (no error)` per GPU on a healthy run (all 7 OK)
    r = real("gpu_burn_7x_B300_cuInit_returned_0_2026_EXCERPT.txt")
    assert not any("cuInit" in p for p in r.problems), r.problems
    assert [x.gpu for x in r.readings] == list(range(7)) and r.readings[1].value == 1.038
    assert r.readings[0].serial == "GPU-bce5282f-d716-d136-5759-b7181a7a55df"
    # what is left is true of this log: it kept one progress record, where only GPU 1 had reported
    assert {p for p in r.problems} == {f"GPU {g}: no Gflop/s reading above 0 (it never computed)" for g in (0, 2, 3, 4, 5, 6)}
    # a non-zero CUresult is still a failure (the same log, as a driver mismatch prints it)
    text = open(os.path.join(REAL, "gpu_burn_7x_B300_cuInit_returned_0_2026_EXCERPT.txt")).read()
    bad = gpuparse.parse(text.replace("cuInit returned 0 (no error)", "cuInit returned 999 (unknown error)", 1))
    assert "failure: cuInit returned 999 (unknown error)" in bad.problems


def test_nvbandwidth_sm_testcases_are_their_own_tests():
    r = real("nvbandwidth_v0.8_1x_A100_h2d_sm_t_issue42_EXCERPT.txt")  # `-t host_to_device_memcpy_sm`
    assert r.ok, r.problems
    assert [(x.gpu, x.test, x.value, x.pci) for x in r.readings] == [(0, "h2d_sm", 25.13, "0000:99:00.0")]
    # a full run: CE and SM host copies side by side, never merged into one key
    r = real("nvbandwidth_v0.6_GH200_all_testcases_superbench.log")
    got = {(x.test, x.gpu): x.value for x in r.readings}
    assert got[("h2d_sm", 0)] == 372.33 and got[("h2d", 0)] != got[("h2d_sm", 0)] and ("d2h_sm", 0) in got


def test_nvbandwidth_matrix_without_running_line_is_named_by_sum_or_description():
    r = real("nvbandwidth_v0.8_6x_A6000_d2d_read_ce_no_running_issue50_EXCERPT.txt")  # '...' in place of Running
    assert r.ok, r.problems
    nv = {x.gpu: x.value for x in r.readings if x.test == "nvlink"}
    assert sorted(nv) == list(range(6)) and nv[0] == pytest.approx(22.64)  # median of row 0 and column 0
    # quoted Running lines, no SUM: the first matrix ended where the next testcase started
    r = real("nvbandwidth_8x_H100_h2d_d2h_sm_quoted_running_no_sum_issue24.txt")
    assert r.tool == "nvbandwidth"
    assert [(x.gpu, x.test, x.value) for x in r.readings][:2] == [(0, "h2d_sm", 35.19), (1, "h2d_sm", 35.25)]
    assert len(r.readings) == 8 and not r.ok  # the second matrix ends with the quote: incomplete
    assert r.problems == ["incomplete run: device_to_host_memcpy_sm has no SUM line"]
    # the same text without its `> Running` lines: named by the description alone
    text = open(os.path.join(REAL, "nvbandwidth_8x_H100_h2d_d2h_sm_quoted_running_no_sum_issue24.txt")).read()
    bare = gpuparse.parse("\n".join(ln for ln in text.splitlines() if "Running" not in ln))
    assert {x.test for x in bare.readings} == {"h2d_sm"} and len(bare.readings) == 8


def test_nvbandwidth_default_run_with_multi_matrix_testcases():
    r = real("nvbandwidth_v0.10_7x_B300_default_run_ce_2026_EXCERPT.txt")
    assert r.ok and r.version == "v0.10.0", r.problems
    got = {(x.test, x.gpu): x.value for x in r.readings}
    assert {t for t, _ in got} == {"h2d", "d2h", "nvlink"} and len(got) == 21
    assert got[("d2h", 6)] == 56.92 and 774 < got[("nvlink", 3)] < 775  # the write CE matrix judges NVLink (as burn-in runs it)


def test_nvbandwidth_json_waived_testcases_are_not_errors():
    # a default `-j` run on one GPU: every device-to-device testcase "Waived"
    r = real("nvbandwidth_v0.5_json_1gpu_default_run_waived_dcgm_tests.json")
    assert r.ok and r.version == "v0.5", r.problems
    assert {(x.test, x.gpu): x.value for x in r.readings} == {("h2d", 0): 12.396, ("d2h", 0): 13.2,
                                                              ("h2d_sm", 0): 12.4, ("d2h_sm", 0): 13.203}


def test_unknown_output_is_not_guessed():
    r = gpuparse.parse("hello\nworld\n")
    assert r.tool is None and not r.ok


def test_cli_parse_recognises_gpu_tools():
    path = os.path.join(REAL, "nvbandwidth_v0.8_8x_H20_device_local_copy_issue48.txt")
    out = subprocess.run([sys.executable, "-m", "slurmqual", "burnin", "parse", path, "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tool"] == "nvbandwidth" and len(doc["readings"]) == 8
    bad = os.path.join(REAL, "nvbandwidth_v0.7_8x_A100_d2d_assert_issue34.txt")
    assert subprocess.run([sys.executable, "-m", "slurmqual", "burnin", "parse", bad],
                          capture_output=True, text=True).returncode == 1


# -- judgement ----------------------------------------------------------------------

def fleet_lines(nodes=30, model=H100, base=700.0, slow=None, test="gemm"):
    """Per-GPU lines as a site's own tool writes them (the --measurements format),
    values spread like the real 8x A100 gpu_burn run above (~0.5%)."""
    spread = [x.value / 17.0 for x in real("gpu_burn_8x_A100_doubles_tc_superbench.log").readings]
    out = []
    for i in range(nodes):
        for g in range(8):
            v = base * spread[(i + g) % 8]
            if slow and (f"n{i:02d}", g) == slow[0]:
                v = base * slow[1]
            out.append({"nodes": [f"n{i:02d}"], "gpu": g, "test": test, "value": round(v, 2), "unit": "TFLOPS",
                        "errors": 0, "gpu_model": model, "pci": f"0000:{0x18 + 0x20 * g:02x}:00.0"})
    return out


def judge(lines):
    return analyze([Measurement.from_dict(d) for d in lines])


def retested(lines, *nodes, factor=1.0):
    """lines plus a retest round's: every GPU of `nodes` run again (x factor),
    each line saying its round as gputask.run_gpu_retests writes it."""
    return lines + [{**d, "value": round(d["value"] * factor, 2), "retest": 1} for d in lines if d["nodes"][0] in nodes]


def test_slow_gpu_is_retest_on_one_run_and_fails_on_two_naming_the_gpu():
    once = judge(fleet_lines(slow=(("n03", 3), 0.8)))
    assert once.nodes["n03"]["verdict"] == "retest" and not once.drain  # one run can land anywhere
    assert once.nodes["n03"]["gpu"]["why"].endswith("in one run (a second confirms)")
    assert once.keys[f"gemm:gpu:{H100}"]["drain_line_runs"] == {"2": once.keys[f"gemm:gpu:{H100}"]["drain_line"]}
    a = judge(retested(fleet_lines(slow=(("n03", 3), 0.8)), "n03", factor=1.004))
    assert a.drain == ["n03"]
    v = a.nodes["n03"]
    assert v["verdict"] == "fail" and v["gpu"]["gpu"] == 3
    reason = drain_reason(v["gpu"], a.threshold)
    assert reason.startswith("GPU 3 (0000:78:00.0) gemm 561.1 TFLOPS < 90% of median 69")  # median of 560, 562.2
    assert v["gpu"]["why"].endswith("(median of 2 runs)")
    assert v["gpus"]["3"]["gemm"]["verdict"] == "fail" and v["gpus"]["0"]["gemm"]["verdict"] == "pass"
    assert v["gpus"]["3"]["gemm"]["runs"] == 2 and v["gpus"]["3"]["gemm"]["why"].endswith("(median of 2 runs)")
    assert a.nodes["n04"]["verdict"] == "pass"
    assert a.median[f"gemm:gpu:{H100}"] == pytest.approx(700, rel=0.01)


def test_gpu_just_below_the_line_is_retest_not_drain():
    a = judge(fleet_lines(slow=(("n03", 3), 0.885)))
    assert a.nodes["n03"]["verdict"] in ("retest", "fail")
    assert a.nodes["n05"]["verdict"] == "pass"


def test_one_run_below_the_line_within_a_noisy_fleets_noise_passes_and_only_the_rest_is_retest():
    """A fleet whose GPUs read 5% apart run to run: the 90% line is 2 sds
    under the median, so noise alone puts one node in six below it. After
    one run only GPUs beyond what that noise explains go to a retest round."""
    import random

    rng = random.Random(7)
    lines = fleet_lines(nodes=64)
    for d in lines:
        d["value"] = round(d["value"] * (1 + rng.gauss(0, 0.05)), 2)
    for d in lines:
        if (d["nodes"][0], d["gpu"]) == ("n05", 2):
            d["value"] = 0.6 * 700.0   # far beyond the noise: retest
        if (d["nodes"][0], d["gpu"]) == ("n07", 4):
            d["value"] = 0.88 * 700.0  # below the line, within the noise: pass
    a = judge(lines)
    key = a.keys[f"gemm:gpu:{H100}"]
    assert a.nodes["n05"]["gpus"]["2"]["gemm"]["verdict"] == "retest"
    entry = a.nodes["n07"]["gpus"]["4"]["gemm"]
    assert entry["verdict"] == "pass" and "within the fleet's noise" in entry["why"]
    assert 0.04 < key["noise"] < 0.06 and key["retest_line"] < key["line"]
    below = [n for n, v in a.nodes.items() for g in v["gpus"].values() if g["gemm"]["score"] < key["line"]]
    retest = {n for n, v in a.nodes.items() if v["verdict"] == "retest"}
    assert len(set(below)) >= 8 and len(retest) <= 4  # about 1 in 6 nodes below the line; retest: at most a few


def test_a_gpu_15_percent_slow_in_a_fleet_reading_3_percent_apart_is_drained_after_a_round():
    """The drain margin is measured from the healthy level (where noise puts
    no healthy GPU of the fleet), not down from the line: at 3% run-to-run
    noise the margin from the line (0.9 x (1 - 2.8 x 0.03) = 0.82) left a
    GPU at 0.85 undecided after every round."""
    import random

    rng = random.Random(3)
    lines = fleet_lines(nodes=64, slow=(("n09", 6), 0.85))
    for d in lines:
        d["value"] = round(d["value"] * (1 + rng.gauss(0, 0.03)), 2)
    first = judge(lines)
    assert first.nodes["n09"]["gpus"]["6"]["gemm"]["verdict"] == "retest"
    rerun = [{**d, "value": round(d["value"] * (1 + rng.gauss(0, 0.03)), 2)}
             for _ in range(2) for d in lines if d["nodes"][0] == "n09"]
    a = judge(lines + rerun)
    assert a.nodes["n09"]["gpus"]["6"]["gemm"]["verdict"] == "fail" and a.drain == ["n09"]
    key = a.keys[f"gemm:gpu:{H100}"]
    assert key["drain_line_runs"]["3"] == key["line"]  # the healthy level's margin lies above the line here


def test_mixed_models_are_never_compared():
    lines = fleet_lines(20) + fleet_lines(20, model="NVIDIA H200", base=900.0)
    for d in lines[160:]:
        d["nodes"] = ["m" + d["nodes"][0]]
    a = judge(lines)
    assert not a.drain and set(a.median) == {f"gemm:gpu:{H100}", "gemm:gpu:NVIDIA H200"}
    assert a.median["gemm:gpu:NVIDIA H200"] == pytest.approx(900, rel=0.01)


def test_compare_errors_fail_the_gpu_without_a_median():
    lines = fleet_lines(3)
    lines[5]["errors"] = 2
    a = judge(lines)
    assert a.drain == ["n00"] and a.nodes["n00"]["gpu"]["errors"] == 2
    assert "data corruption: 2 compare errors" in drain_reason(a.nodes["n00"]["gpu"], 0.9)


def test_gpu_test_error_is_untested_never_pass():
    lines = fleet_lines(5)
    lines[0] = {**lines[0], "ok": False, "value": None}
    a = judge(lines)
    assert a.nodes["n00"]["verdict"] == "untested" and not a.drain
    assert any("test error" in p and "GPU 0" in p for p in a.problems)


def test_gpu_guard_holds_a_fleet_wide_drain():
    lines = fleet_lines(20)
    for d in lines:
        if d["gpu"] == 0 and int(d["nodes"][0][1:]) < 6:
            d["value"] = 300.0
    a = judge(retested(lines, *{d["nodes"][0] for d in lines}))
    assert a.guard_tripped and not a.drain and len(a.would_drain) == 6


@pytest.mark.parametrize("bad,why", [
    ({"gpu": "3"}, "'gpu'"), ({"gpu": -1}, "'gpu'"), ({"value": "fast"}, "'value'"),
    ({"value": 1e12}, "'value'"), ({"errors": -1}, "'errors'"), ({"nodes": ["a", "b"]}, "exactly one node"),
    ({"nodes": ["gpu[1-3]"]}, "gpu"), ({"value": None}, "'value' is required"),
])
def test_bad_gpu_lines_are_clear_errors(bad, why):
    d = {**fleet_lines(1)[0], **bad}
    with pytest.raises(ValueError, match=why.replace("[", r"\[")):
        Measurement.from_dict(d)


def test_gpu_line_round_trips():
    d = fleet_lines(1)[0]
    m = Measurement.from_dict(d)
    assert isinstance(m, GpuMeasurement) and GpuMeasurement.from_dict(m.to_dict()) == m


# -- nccl-tests #wrong ----------------------------------------------------------------

def pair(a, b, ok=True, wrong=False):
    return Measurement.from_dict({"nodes": [a, b], "busbw": 100.0 if ok else None, "size": 8589934592,
                                  "test": "all_reduce", "ok": ok, "wrong": wrong})


def test_wrong_with_two_partners_that_are_clean_elsewhere_is_data_corruption():
    ms = [pair("a", "b", False, True), pair("a", "c", False, True), pair("b", "d"), pair("c", "d"),
          pair("d", "e"), pair("b", "e"), pair("c", "e")]
    assert corrupt_nodes(ms) == {"a": ["b", "c"]}
    an = analyze(ms)
    assert an.nodes["a"]["verdict"] == "fail" and an.nodes["a"]["corruption"] == ["b", "c"]


def test_a_single_wrong_stays_a_test_error():
    ms = [pair("a", "b", False, True), pair("a", "c"), pair("b", "d"), pair("c", "d")]
    assert corrupt_nodes(ms) == {}
    assert analyze(ms).nodes["a"].get("corruption") is None


def test_a_retest_round_reruns_only_the_tools_that_left_a_gpu_retest():
    from slurmqual.burnin.run.gputask import retest_tools

    lines = fleet_lines(slow=(("n03", 3), 0.8)) + fleet_lines(test="hbm", base=3000.0, slow=(("n05", 1), 0.8))
    for d in lines[-8 * 30:]:
        d["unit"] = "GB/s"
    lines += [{**d, "test": "burn"} for d in fleet_lines(slow=(("n05", 2), 0.8))]
    a = judge(lines)
    assert {n: v["verdict"] for n, v in a.nodes.items() if v["verdict"] != "pass"} == {"n03": "retest", "n05": "retest"}
    assert retest_tools(a.nodes) == {"n03": ["dcgmproftester"], "n05": ["gpu_burn", "nvbandwidth"]}
    confirmed = judge(retested(lines, "n03", "n05", factor=0.999))
    assert retest_tools(confirmed.nodes) == {} and confirmed.drain == ["n03", "n05"]


def test_a_retest_round_reruns_nvbandwidth_for_a_gpu_its_sm_testcases_left_retest():
    from slurmqual.burnin.run.gputask import retest_tools

    nodes = {"n01": {"gpus": {"0": {"h2d_sm": {"test": "h2d_sm", "verdict": "retest"}}}},
             "n02": {"gpus": {"0": {"h2d_sm": {"test": "h2d_sm", "verdict": "pass"}}}}}
    assert retest_tools(nodes) == {"n01": ["nvbandwidth"]}


def test_a_one_gpu_node_has_no_nvlink_test_where_nvbandwidth_waives_device_to_device():
    """nvbandwidth waives device-to-device testcases on one GPU ("Waived:" in
    text, status "Waived" in -j): the burn-in lines carry no nvlink test for
    it (n/a), where they said "untested" and the node could never pass."""
    from slurmqual.burnin.run.gputask import lines_of

    for name in ("nvbandwidth_v0.6_GH200_all_testcases_superbench.log",
                 "nvbandwidth_v0.5_json_1gpu_default_run_waived_dcgm_tests.json"):
        r = real(name)
        lines = lines_of("nvbandwidth", "n1", r, 1, None, "gpu-nvbandwidth-n1.log")
        assert "nvlink" not in {d["test"] for d in lines}, name
        assert "nvlink" in r.waived
        assert {d["test"] for d in lines if d["ok"]} >= {"h2d", "d2h"}
    # eight GPUs with their device-to-device matrix: nothing waived, NVLink measured
    r = real("nvbandwidth_v0.10_7x_B300_default_run_ce_2026_EXCERPT.txt")
    assert r.waived == [] and {d["test"] for d in lines_of("nvbandwidth", "n1", r, 7, None, "x") if d["ok"]} >= {"nvlink"}


def test_a_healthy_gpu_in_a_heavy_tailed_fleet_is_not_drained_on_runs_its_tail_explains():
    """Heavy-tailed run-to-run noise (a throttled or disturbed run, student-t):
    eight GPUs of the fleet read 0.70-0.86 on their first run and about 1.0 on
    both repeats (the fleet's own tail). A healthy GPU whose first run read
    0.77 and one of its two repeats 0.86 has the upper median of its three
    runs under the line: the gaussian margin drained it (the 'whole run'
    family of bench_components_sim: 18 healthy nodes drained in 100 fleets,
    each on one GPU test). The fleet's tail puts two runs that low on some
    GPU by chance: it stays retest. A GPU at 0.8 on all five of its runs
    (two rounds) is beyond that tail and is drained."""
    import random

    rng = random.Random(11)
    lines = fleet_lines(nodes=64)
    for d in lines:
        d["value"] = round(d["value"] * (1 + rng.gauss(0, 0.02)), 2)
    at = {(d["nodes"][0], d["gpu"]): d for d in lines}
    tail = {("n%02d" % (3 + 5 * i), i % 8): f for i, f in enumerate((0.70, 0.72, 0.75, 0.78, 0.80, 0.82, 0.84, 0.86))}
    runs = {gpu: [f, 1.0 + rng.gauss(0, 0.02), 1.0 + rng.gauss(0, 0.02)] for gpu, f in tail.items()}
    runs[("n40", 1)] = [0.77, 0.86, 0.99]           # healthy: one low repeat
    runs[("n50", 2)] = [0.80, 0.80, 0.81, 0.79, 0.80]  # slow on every run
    more = []
    for gpu, fs in runs.items():
        d = at[gpu]
        d["value"] = round(700.0 * fs[0], 2)
        more += [{**d, "value": round(700.0 * f, 2), "retest": 1 + i // 2} for i, f in enumerate(fs[1:])]
    a = judge(lines + more)
    key = a.keys[f"gemm:gpu:{H100}"]
    assert 700.0 * 0.86 < key["drain_line_runs"]["3"]  # the gaussian margin alone: below it on two of three
    victim = a.nodes["n40"]["gpus"]["1"]["gemm"]
    assert victim["verdict"] == "retest" and a.nodes["n40"]["verdict"] == "retest"
    assert "n40" not in a.drain
    assert a.nodes["n50"]["gpus"]["2"]["gemm"]["verdict"] == "fail" and "n50" in a.drain
    assert all(a.nodes[x]["verdict"] == "pass" for x, _g in tail)
