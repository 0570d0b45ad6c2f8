"""dcgm (slow level): dcgmi diag -r N -j on a real DCGM 3.1 output and the
node-tree builder's, with skip and error paths."""

from nodes import FULL, check, config, tree
from slurmqual.checks import select
from slurmqual.checks.dcgm import parse
from slurmqual.nodetree import record_output
from slurmqual.result import Status
from test_probe_nvsmi import real

ARGV = ["dcgmi", "diag", "-r", "2", "-j"]
REAL = real("dcgmi_diag_r1_j_8gpu_pass_dcgm_3.1.0.json")


def dcgm(root, cfg=FULL):
    return check(root, "dcgm", cfg, level="slow")


def test_slow_level_only():
    assert "dcgm" not in [s.name for s in select(None, "standard")]
    assert "dcgm" in [s.name for s in select(None, "slow")]


def test_real_dcgm_31_output_passes(tmp_path):
    results = parse(REAL)
    assert len(results) == 9 + 8 and {r[2] for r in results} == {"pass"}
    root = tree(tmp_path)
    record_output(root, ARGV, REAL)
    assert dcgm(root).message == "dcgmi diag -r 2: 10 tests passed"


def test_real_output_with_a_failed_result_fails_naming_test_and_gpu(tmp_path):
    failing = REAL.replace('"gpu_ids" : 5,\n\t\t\t\t\t\t\t\t"status" : "PASS"',
                           '"gpu_ids" : 5,\n\t\t\t\t\t\t\t\t"status" : "FAIL",\n\t\t\t\t\t\t\t\t"warnings" : '
                           '[ "GPU 5 failed to meet the software test" ]')
    assert failing != REAL
    root = tree(tmp_path)
    record_output(root, ARGV, failing, rc=226)
    r = dcgm(root)
    assert r.status is Status.FAIL and r.devices == ["GPU 5"]
    assert r.message == "dcgmi diag -r 2: software on GPU 5: GPU 5 failed to meet the software test"


def test_example_tree_memory_failure(tmp_path):
    r = dcgm(tree(tmp_path, "dcgm-memory-fail"))
    assert r.status is Status.FAIL and r.message.startswith("dcgmi diag -r 2: Memory on GPU 4: Error using CUDA API")
    assert dcgm(tree(tmp_path, name="ok")).status is Status.PASS


def test_absent_dcgm_or_mig_is_a_clear_skip(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    root = tree(tmp_path, record_gpu_tools=False)
    record_output(root, ["nvidia-smi", "-q", "-x"], real("nvidia_smi_q_x_a10g.xml"))
    r = dcgm(root)
    assert r.status is Status.SKIP and "dcgmi not installed" in r.message
    r = dcgm(root, config(checks={"dcgm": {"required": True}}))
    assert r.status is Status.ERROR and "command not found" in r.message
    root = tree(tmp_path, "gpu-mig-on", name="mig")
    r = dcgm(root)
    assert r.status is Status.SKIP and "GPU 1 in MIG mode" in r.message


def test_hung_or_disconnected_host_engine_is_an_error(tmp_path):
    root = tree(tmp_path)
    record_output(root, ARGV, "Error: unable to establish a connection to the specified host: localhost\n"
                              "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.",
                  rc=255)
    r = dcgm(root)
    assert r.status is Status.ERROR and "unable to establish a connection" in r.message
    open(f"{root}/var/lib/slurmqual-recorded/{'_'.join(ARGV)}.hang", "w").close()
    r = dcgm(root)
    assert r.status is Status.ERROR and "timed out" in r.message


def test_dcgm_4_layout_with_tests_at_the_top():
    doc = '{"version": "4.2.3", "tests": [{"name": "memory", "results": [{"entity_id": 0, "status": "Fail", ' \
          '"warnings": [{"warning": "bad page"}]}]}]}'
    assert parse(doc) == [("memory", "0", "fail", ["bad page"])]
