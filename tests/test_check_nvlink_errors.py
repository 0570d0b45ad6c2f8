"""nvlink error counters (`nvidia-smi nvlink -e`): parsed from real output,
judged as increases per link within a window, so a link that erred once and
then stays flat passes again by itself."""

import os

import pytest

from conftest import T0
from nodes import check, config, tree
from slurmqual.checks.nvlink import judge_errors
from slurmqual.nodetree import NodeSpec, record_output, set_nvlink_errors
from slurmqual.probe.nvsmi import counter_key, parse_nvlink_errors
from slurmqual.result import Status

REAL = os.path.join(os.path.dirname(__file__), "data", "real", "nvidia")
LIMITS = {"replay": 100, "recovery": 0, "crc": 100}


def std(root, cfg=None):
    return check(root, "nvlink", cfg, level="standard")


def test_parse_real_h100_excerpt():
    """The author's '[...]' and the blank lines between links are skipped."""
    with open(os.path.join(REAL, "nvidia_smi_nvlink_e_H100_18_links_all_zero_EXCERPT.txt"), encoding="utf-8") as fh:
        [gpu] = parse_nvlink_errors(fh.read())
    assert (gpu.index, gpu.name, gpu.uuid) == (0, "NVIDIA H100 80GB HBM3", "GPU-abcdefab-cdef-abdc-abcd-abababababab")
    assert sorted(gpu.links) == [0, 1, 17]
    assert gpu.links[17] == {"replay": 0, "recovery": 0, "crc": 0}


def test_counter_names_of_newer_drivers_normalise():
    assert [counter_key(n) for n in ("Replay Errors", "CRC Errors", "Link recovery failed events",
                                     "Malformed packet Errors")] == \
        ["replay", "crc", "link_recovery_failed_events", "malformed_packet"]


def test_tree_output_parses_like_the_real_one(tmp_path):
    root = tree(tmp_path, "nvlink-errors")
    with open(f"{root}/var/lib/slurmqual-recorded/nvidia-smi_nvlink_-e.out", encoding="utf-8") as fh:
        gpus = parse_nvlink_errors(fh.read())
    assert len(gpus) == 8 and all(len(g.links) == 18 for g in gpus)
    assert gpus[3].links[7] == {"replay": 412, "recovery": 0, "crc": 2301}


def test_judge_pure():
    ok = judge_errors({"GPU 0 link 1": {"replay": 100, "recovery": 0, "crc": 3}}, LIMITS, {}, T0)
    assert ok.status is Status.PASS
    r = judge_errors({"GPU 2 link 10": {"replay": 0, "recovery": 1, "crc": 0},
                      "GPU 2 link 3": {"replay": 101, "recovery": 0, "crc": 0}}, LIMITS,
                     {"GPU 2 link 10": T0 - 600, "GPU 2 link 3": None}, T0)
    assert r.status is Status.FAIL and r.devices == ["GPU 2 link 3", "GPU 2 link 10"]
    assert "GPU 2 link 3: replay +101 (limit 100) since the driver loaded (first reading)" in r.message
    assert "GPU 2 link 10: recovery +1 (limit 0) in 10 min" in r.message
    assert r.hint.startswith("GPU 2: NVLink errors rising on link 3, 10: nvidia-smi -r -i 2")


def test_healthy_tree_passes_and_example_fails_naming_gpu_and_link(tmp_path, clock):
    assert std(tree(tmp_path, "h100-roce-healthy", name="ok")).status is Status.PASS
    r = std(tree(tmp_path, "nvlink-errors"))
    assert r.status is Status.FAIL and r.devices == ["GPU 3 link 7"]
    assert "GPU 3 link 7: crc +2301 (limit 100), replay +412 (limit 100) since the driver loaded" in r.message
    assert "nvidia-smi -r -i 3" in r.hint and "GPU 3" in r.hint


def test_errors_that_rose_once_pass_again_after_a_flat_window(tmp_path, clock):
    root = tree(tmp_path)
    assert std(root).status is Status.PASS
    clock[0] = T0 + 120
    set_nvlink_errors(root, {(5, 11): {"recovery": 1}})           # one retraining
    r = std(root)
    assert r.status is Status.FAIL and "GPU 5 link 11: recovery +1 (limit 0) in 2 min" in r.message
    clock[0] = T0 + 1800
    assert std(root).status is Status.FAIL                       # still within the hour
    clock[0] = T0 + 120 + 3601
    r = std(root)
    assert r.status is Status.PASS, r.message                    # flat for a whole window
    clock[0] = T0 + 5000
    set_nvlink_errors(root, {(5, 11): {"recovery": 2}})
    assert std(root).status is Status.FAIL                       # and again


def test_link_down_and_errors_both_reported(tmp_path, clock):
    root = tree(tmp_path, NodeSpec(nvlink_down={6: [3]}, nvlink_errors={(1, 2): {"crc": 500}}))
    r = std(root)
    assert r.status is Status.FAIL and r.devices == ["GPU 6", "GPU 1 link 2"]
    assert "17 of 18 links active" in r.message and "GPU 1 link 2: crc +500" in r.message


def test_limits_configurable_and_off(tmp_path, clock):
    root = tree(tmp_path, "nvlink-errors")
    loose = config(checks={"nvlink": {"error_limits": {"replay": 1000, "recovery": 0, "crc": 5000}}})
    assert std(root, loose).status is Status.PASS
    off = config(checks={"nvlink": {"error_limits": {}}})
    assert std(root, off).status is Status.PASS
    with pytest.raises(Exception, match="must be >= 0"):
        config(checks={"nvlink": {"error_limits": {"crc": -1}}})


def test_unknown_counter_names_hung_tool_and_garbage_are_errors(tmp_path, clock):
    root = tree(tmp_path)
    only_new = config(checks={"nvlink": {"error_limits": {"link_recovery_failed_events": 0}}})
    r = std(root, only_new)
    assert r.status is Status.ERROR and "none of the counters" in r.message and "replay" in r.message
    record_output(root, ["nvidia-smi", "nvlink", "-e"], "Failed to initialize NVML: Driver/library version mismatch")
    r = std(root)
    assert r.status is Status.ERROR and "printed no GPU lines" in r.message
    open(f"{root}/var/lib/slurmqual-recorded/nvidia-smi_nvlink_-e.hang", "w").close()
    r = std(root)
    assert r.status is Status.ERROR and "cannot read NVLink error counters" in r.message


def test_unreadable_history_is_a_note_not_a_crash(tmp_path, clock):
    root = tree(tmp_path)
    state = f"{root}.state/counters"
    os.makedirs(state)
    from slurmqual.checks import Context
    from slurmqual.fsroot import FsRoot

    key = Context(FsRoot(root), config()).node_key()
    with open(f"{state}/{key}.nvlink.json", "w") as fh:
        fh.write("{not json")
    r = std(root)
    assert r.status is Status.PASS and "unreadable" in r.message
