"""Outputs of one live device check on an NVIDIA H200 (tests/data/real/device,
SOURCES.tsv there): the readers and probes must read what the real tools and
driver printed on that machine, as they did there."""

import pathlib

import pytest

from slurmqual import config
from slurmqual.burnin.read import gpuparse, parse
from slurmqual.probe import nvsmi

DEVICE = pathlib.Path(__file__).parent / "data" / "real" / "device"


def text(name: str) -> str:
    return (DEVICE / name).read_text()


def test_every_file_has_its_source_row():
    listed = {line.split("\t")[0] for line in text("SOURCES.tsv").splitlines() if not line.startswith("#")}
    present = {p.name for p in DEVICE.iterdir() if p.name != "SOURCES.tsv"}
    assert present == listed


def test_nvidia_smi_xml_and_text_agree_on_the_h200():
    xml, plain = nvsmi.parse_xml(text("h200_nvidia_smi_q_x_drv580.xml")), nvsmi.parse_text(text("h200_nvidia_smi_q_drv580.txt"))
    assert xml.driver == plain.driver == "580.159.04"
    assert len(xml.gpus) == len(plain.gpus) == 1
    for g in (xml.gpus[0], plain.gpus[0]):
        assert (g.pci, g.product, g.ecc_mode, g.persistence, g.mig) == \
            ("0000:00:06.0", "NVIDIA H200", "Enabled", "Enabled", "Disabled")
        assert g.unc_volatile == 0 and g.remap_pending is False and g.remap_failure is False
        assert not any(g.clock_events.values())


def test_topo_matrix_with_driver_580_underline_escapes_is_read():
    """Driver 580 wraps the header in ESC[4m ... ESC[0m even into a file: the
    header must still be found (before the fix every GPU row was skipped, {})."""
    raw = text("h200_nvidia_smi_topo_m_ansi_header_drv580.txt")
    assert "\x1b[4m" in raw
    assert nvsmi.parse_topo_nvlink_peers(raw) == {0: {}}


def test_gpu_burn_through_the_task_runner_reads_ok():
    res = gpuparse.parse(text("h200_gpu_burn_2026_tc_20s_task_log.txt"))
    assert res.tool == "gpu_burn" and res.ok and not res.problems
    [r] = res.readings
    assert (r.gpu, r.test, r.unit, r.errors, r.gpu_model) == (0, "burn", "TFLOPS", 0, "NVIDIA H200")
    assert 300 < r.value < 400          # tensor cores on an H200 (FP32 alone is ~50)
    assert r.serial.startswith("GPU-bf4baeda")


def test_gpu_burn_killed_before_its_summary_is_not_a_pass():
    res = gpuparse.parse(text("h200_gpu_burn_2026_15s_killed_by_timeout.txt"))
    assert res.tool == "gpu_burn" and not res.ok
    assert any("incomplete" in p for p in res.problems)


def test_nvbandwidth_json_and_task_log_agree():
    js = gpuparse.parse(text("h200_nvbandwidth_v0.8_j_1gpu.json"))
    log = gpuparse.parse(text("h200_nvbandwidth_v0.8_task_log.txt"))
    assert js.ok and log.ok and js.version == log.version == "v0.8"
    assert "nvlink" in js.waived                       # device-to-device is waived on one GPU
    by_test = {r.test: r.value for r in js.readings}
    assert {"hbm", "h2d", "d2h", "h2d_sm", "d2h_sm"} <= set(by_test)
    for r in log.readings:
        assert r.pci == "0000:00:06.0" and r.gpu_model == "NVIDIA H200"
        assert r.value == pytest.approx(by_test[r.test], rel=0.02)   # two runs minutes apart


@pytest.mark.parametrize("name", ["h200_all_reduce_perf_2.19.6_g1.txt", "h200_all_reduce_perf_2.19.6_task_log.txt"])
def test_single_gpu_all_reduce_reads_zero_busbw_and_ok(name):
    res = parse.parse(text(name))
    assert res.ok and not res.problems and res.hosts == ["vm"]
    assert res.rows and all(r.busbw == 0.0 and r.wrong == 0 for r in res.rows)
    assert res.gpu_models == ["NVIDIA H200"]


def test_config_init_output_from_the_h200_validates():
    cfg = config.load(str(DEVICE / "h200_config_init.toml"), use_cache=False)
    assert cfg["node"]["gpus"] == 1 and cfg["node"]["gpu_model"] == "NVIDIA H200"
    assert cfg["fabric"]["nics"] == 0 and cfg["checks"]["versions"]["driver"] == "580.159.04"


def test_gpu_burn_cut_after_its_burn_but_before_its_summary_is_not_a_pass():
    """Second live run (preflight --gpu-tools): the burn reached 100% at ~355
    TFLOPS and the worker freed its memory, but the step was cut at its 40 s
    share before 'Tested 1 GPUs': the numbers seen along the way are not a pass."""
    raw = text("h200_gpu_burn_2026_tc_24s_preflight_cut_at_40s.txt")
    assert "100.0%" in raw and "Uninitted cublas" in raw and "Tested 1 GPUs" not in raw
    res = gpuparse.parse(raw)
    assert res.tool == "gpu_burn" and not res.ok
    assert any("incomplete" in p for p in res.problems)
    from slurmqual.burnin.run.gputask import lines_of

    [line] = lines_of("gpu_burn", "vm", res, 1, None, "gpu-gpu_burn-vm.log", "timed out after 40s")
    assert line["ok"] is False and line["value"] is None and "timed out after 40s" in line["error"]


def test_the_preflight_report_of_the_live_run_judges_as_it_did_there():
    """The report slurmqual preflight wrote on the H200 (exit 3): its GPU lines,
    judged again, leave the node untested (never failed, never chosen); the
    same node with the tools' good lines of the first run passes."""
    import json
    import os

    from slurmqual.burnin.run.gputask import lines_of
    from slurmqual.preflight import judge

    report = json.loads(text("h200_preflight_need1_gpu_tools_exit3.json"))
    assert report["exit_code"] == 3 and report["chosen"] == [] and report["nodes"] == ["vm"]
    nvb = [m for m in report["measurements"] if m["tool"] == "nvbandwidth"]
    assert nvb and all(m["error"] == "timed out after 1s" for m in nvb)   # the deadline bug's mark
    checks = {"vm": {"node": "vm", "checks": [{"name": "gpu_count", "status": "pass"}]}}
    speed = lambda analysis, node: ""  # noqa: E731 - speed is not judged on one node without a median
    out = judge.outcomes(["vm"], checks, report["measurements"], None, speed)
    assert out["vm"].verdict == "untested" and "gpu_burn GPU 0 burn: timed out" in out["vm"].notes[0]
    good = lines_of("gpu_burn", "vm", gpuparse.parse(text("h200_gpu_burn_2026_tc_20s_task_log.txt")), 1, None, "g") + \
        lines_of("nvbandwidth", "vm", gpuparse.parse(text("h200_nvbandwidth_v0.8_task_log.txt")), 1, None, "n")
    assert judge.outcomes(["vm"], checks, good, None, speed)["vm"].verdict == "pass"
    assert os.path.basename(report["files"]["exclude"]) == "slurmqual-preflight-4343.exclude"


def test_the_fixed_preflight_of_the_third_live_run_chose_the_node_on_its_gpu_tools():
    """After the fix (fbf9c5f): gpu_burn ran its configured 10 s load and finished
    its summary, nvbandwidth had its time; the report's own lines judge the node
    a pass, and the gpu_burn log reads as the report says."""
    import json

    from slurmqual.preflight import judge

    report = json.loads(text("h200_preflight_need1_gpu_tools_pass.json"))
    assert report["exit_code"] == 0 and report["chosen"] == ["vm"]
    by = {(m["tool"], m["test"]): m for m in report["measurements"]}
    assert all(m["ok"] for m in by.values()) and {t for t, _ in by} == {"gpu_burn", "nvbandwidth"}
    burn = gpuparse.parse(text("h200_gpu_burn_2026_tc_10s_preflight.txt"))
    assert burn.ok and "Burning for 10 seconds" in text("h200_gpu_burn_2026_tc_10s_preflight.txt")
    assert burn.readings[0].value == pytest.approx(by[("gpu_burn", "burn")]["value"])
    checks = {"vm": {"node": "vm", "checks": [{"name": "gpu_count", "status": "pass"}]}}
    out = judge.outcomes(["vm"], checks, report["measurements"], None, lambda analysis, node: "")
    assert out["vm"].verdict == "pass"
