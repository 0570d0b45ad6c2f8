"""GPU checks (gpu_memory, gpu_state, nvlink, fabric_manager) on node trees whose
recorded nvidia-smi outputs are either real dumps (tests/data/real/nvidia,
../shared/samples/nvidia) or the node-tree builder's, for pass and every failure."""

import os

import pytest

from nodes import FULL, check, config, context, tree
from slurmqual.checks import REGISTRY, run_one
from slurmqual.checks import gpu_memory
from slurmqual.nodetree import EXAMPLES, NodeSpec, record_output
from slurmqual.probe import nvsmi
from slurmqual.result import Status
from test_probe_nvsmi import real, shared

GPU_CHECKS = ["gpu_memory", "gpu_state", "nvlink", "fabric_manager"]
XML = ["nvidia-smi", "-q", "-x"]


def std(root, name, cfg=FULL):
    return check(root, name, cfg, level="standard")


def test_healthy_h100_node_passes_every_gpu_check(tmp_path):
    root = tree(tmp_path)
    results = {n: std(root, n) for n in GPU_CHECKS}
    assert all(r.status is Status.PASS for r in results.values()), results
    assert results["nvlink"].message == "8 GPUs x 18 NVLinks active at 26.562 GB/s"
    assert results["fabric_manager"].message == "fabric manager running, 8 GPUs registered"


def test_gpu_checks_do_not_run_in_the_prolog(tmp_path):
    r = check(tree(tmp_path), "gpu_memory", FULL, level="fast")
    assert r.status is Status.ERROR and "not run at level fast" in r.message


# -- gpu_memory ---------------------------------------------------------------

def test_remap_pending_names_gpu_pci_serial_and_reset_hint(tmp_path):
    r = std(tree(tmp_path, "gpu-remap-pending"), "gpu_memory")
    assert r.status is Status.FAIL and r.devices == ["0000:3a:00.0"]
    assert "GPU 2 (0000:3a:00.0, serial 1652323000002): row remap pending (1 uncorrectable" in r.message
    assert "1 uncorrectable ECC errors since reset" in r.message
    assert "nvidia-smi -r -i 2" in r.hint


def test_remap_failure_is_rma(tmp_path):
    r = std(tree(tmp_path, "gpu-remap-failed"), "gpu_memory")
    assert r.status is Status.FAIL and "row remapping failed" in r.message
    assert r.hint == "RMA GPU 5 (0000:ab:00.0, serial 1652323000005)"


def test_real_a10g_dump_passes_and_its_pending_remap_fails(tmp_path):
    root = tree(tmp_path, NodeSpec(gpus=1, nics=1, nvswitches=0))
    text = real("nvidia_smi_q_x_a10g.xml")
    record_output(root, XML, text)
    assert std(root, "gpu_memory", config()).status is Status.PASS
    # The same real dump with the one field a pending remap changes.
    record_output(root, XML, text.replace("<remapped_row_pending>No<", "<remapped_row_pending>Yes<"))
    r = std(root, "gpu_memory", config())
    assert r.status is Status.FAIL and r.message.startswith("GPU 0 (0000:00:1e.0): row remap pending")


def test_real_t4_retired_pages_over_limit(tmp_path):
    root = tree(tmp_path, NodeSpec(gpus=1, nics=1, nvswitches=0))
    text = real("nvidia_smi_q_x_tesla-t4.xml")
    record_output(root, XML, text)
    assert std(root, "gpu_memory", config()).status is Status.PASS
    record_output(root, XML, text.replace("<retired_count>0</retired_count>", "<retired_count>31</retired_count>"))
    r = std(root, "gpu_memory", config())
    assert r.status is Status.FAIL and "62 retired pages (limit 60)" in r.message and r.hint.startswith("RMA GPU 0")
    loose = config(checks={"gpu_memory": {"retired_pages_limit": 100}})
    assert std(root, "gpu_memory", loose).status is Status.PASS


def test_shared_text_excerpt_xid63_remap_pending_judged():
    rep = nvsmi.parse_text(shared("nvidia_smi_q_A100_xid63_remapped_rows_pending_EXCERPT.txt"))
    r = gpu_memory.judge(rep.gpus, config()["checks"]["gpu_memory"])
    assert r.status is Status.FAIL and "GPU 0 (0000:10:1c.0): row remap pending (0 uncorrectable, 1 correctable" \
        in r.message
    rep = nvsmi.parse_text(shared("nvidia_smi_q_page_retirement_8gpu_azure_driver535.txt"))
    assert gpu_memory.judge(rep.gpus, config()["checks"]["gpu_memory"]).status is Status.PASS


# -- gpu_state ----------------------------------------------------------------

def test_mig_and_persistence_fail_with_per_gpu_hints(tmp_path):
    r = std(tree(tmp_path, "gpu-mig-on"), "gpu_state")
    assert r.status is Status.FAIL
    assert "GPU 1 (0000:29:00.0, serial 1652323000001): MIG enabled" in r.message
    assert "GPU 4 (0000:9a:00.0, serial 1652323000004): persistence mode off" in r.message
    assert "nvidia-smi -i 1 -mig 0" in r.hint and "nvidia-smi -i 4 -pm 1" in r.hint
    assert std(tree(tmp_path, "gpu-mig-on", name="n2"), "gpu_state",
               config(checks={"gpu_state": {"mig": "any", "persistence_mode": False}})).status is Status.PASS


def test_real_a100_dump_mig_enabled_persistence_off(tmp_path):
    root = tree(tmp_path, NodeSpec(gpus=1, nics=1, nvswitches=0))
    record_output(root, XML, real("nvidia_smi_q_x_a100-sxm4-v12.xml"))
    r = std(root, "gpu_state", config())
    assert r.status is Status.FAIL
    assert r.message == "GPU 0 (0000:01:00.0, serial 1650522003820): persistence mode off, MIG enabled"
    assert std(root, "gpu_state", config(checks={"gpu_state": {"mig": "on", "persistence_mode": False}})).status \
        is Status.PASS


def test_slowdown_and_heat_warn_recovery_action_and_limit_fail(tmp_path):
    root = tree(tmp_path, gpu_report={3: {"hw_slowdown": "Active", "temp": "90 C"}})
    r = std(root, "gpu_state")
    assert r.status is Status.WARN and "clocks slowed: hw_slowdown" in r.message and "90 C at its slowdown" in r.message
    assert r.devices == ["0000:4b:00.0"]
    assert std(root, "gpu_state", config(checks={"gpu_state": {"max_temp_c": 85}})).status is Status.FAIL
    root = tree(tmp_path, name="n2", gpu_report={0: {"recovery_action": "Drain and Reset"}})
    r = std(root, "gpu_state")
    assert r.status is Status.FAIL and "driver asks for recovery action 'Drain and Reset'" in r.message


# -- nvlink -------------------------------------------------------------------

def test_inactive_links_fail_naming_gpu_and_links(tmp_path):
    r = std(tree(tmp_path, "nvlink-down"), "nvlink")
    assert r.status is Status.FAIL and r.devices == ["GPU 6"]
    assert "GPU 6 (GPU-5a3d2c06-1b7e-4f0a-9c1d-0c2e8f1a0006): 16 of 18 links active (down: 3, 11)" in r.message
    assert "nvidia-smi -r -i 6" in r.hint


def test_real_nvlink_outputs(tmp_path):
    root = tree(tmp_path, NodeSpec(gpus=1, nics=1))
    record_output(root, ["nvidia-smi", "nvlink", "-s"], real("nvidia_smi_nvlink_s_H100_GPU0_18_links_26.562_EXCERPT.txt"))
    assert std(root, "nvlink", config()).message == "1 GPUs x 18 NVLinks active at 26.562 GB/s"
    record_output(root, ["nvidia-smi", "nvlink", "-s"], shared("nvidia_smi_nvlink_status_all_links_inactive.txt"))
    r = std(root, "nvlink", config())
    assert r.status is Status.FAIL and "GPU 6 (GPU-9667d95e-6d22-0c22-1f57-c481f13e7c44): all links inactive " \
        "(expected 12)" in r.message          # A100 SXM: 12 links


def test_slow_link_fails_and_pcie_gpus_are_na(tmp_path):
    root = tree(tmp_path)
    text = real("nvidia_smi_nvlink_s_H100_GPU0_18_links_26.562_EXCERPT.txt")
    record_output(root, ["nvidia-smi", "nvlink", "-s"], text.replace("Link 10: 26.562", "Link 10: 1.562"))
    r = std(root, "nvlink", config())
    assert r.status is Status.FAIL and "links 10 below 26.562 GB/s" in r.message
    record_output(root, ["nvidia-smi", "nvlink", "-s"], "GPU 0: NVIDIA L40S (UUID: GPU-1)\n")
    assert std(root, "nvlink", config()).status is Status.NA


def bridged(tmp_path, status: str, topo: str | None, name: str = "node"):
    """A node tree whose nvidia-smi nvlink -s (and topo -m, when given) are real outputs."""
    root = tree(tmp_path, NodeSpec(gpus=2, nics=2), name=name)
    record_output(root, ["nvidia-smi", "nvlink", "-s"], status)
    if topo is not None:
        record_output(root, ["nvidia-smi", "topo", "-m"], topo)
    else:                                        # the tool fails
        record_output(root, ["nvidia-smi", "topo", "-m"], "Failed to initialize NVML: Unknown Error\n", rc=255)
    return root


def test_real_bridged_h100_pcie_pair_uses_12_of_its_18_listed_links_and_passes(tmp_path):
    status = real("nvidia_smi_nvlink_s_2xH100_PCIe_bridged_12_of_18_active_drv555.txt")
    topo = real("nvidia_smi_topo_m_2xH100_PCIe_NV12_drv555.txt")
    r = std(bridged(tmp_path, status, topo), "nvlink", config())
    assert r.status is Status.PASS and r.message == "2 GPUs x 12 NVLinks active at 26.562 GB/s"
    # A bridge link lost on GPU 1 (its 'Link 3'): 11 of the product's 12.
    gpu1 = status.index("GPU 1:")
    lost = status[:gpu1] + status[gpu1:].replace("Link 3: 26.562 GB/s", "Link 3: <inactive>")
    r = std(bridged(tmp_path, lost, topo, name="lost"), "nvlink", config())
    assert r.status is Status.FAIL and r.devices == ["GPU 1"]
    assert "GPU 1 (GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3): 11 of 12 links active" in r.message
    assert "or its NVLink bridge" in r.hint
    # Without a readable topology the product still sets the count; the note says what was not known.
    r = std(bridged(tmp_path, status, None, name="notopo"), "nvlink", config())
    assert r.status is Status.PASS and "nvidia-smi topo -m unreadable" in r.message


def test_real_a6000_pair_and_a_third_gpu_without_bridge_pass(tmp_path):
    status = real("nvidia_smi_nvlink_s_3xRTX_A6000_bridged_pair_plus_unbridged_inActive.txt")
    assert [(g.index, g.all_inactive) for g in nvsmi.parse_nvlink_status(status)] == [(0, False), (1, False), (2, True)]
    root = bridged(tmp_path, status, real("nvidia_smi_topo_m_3xRTX_A6000_NV4_pair_tabs.txt"))
    r = std(root, "nvlink", config())
    assert r.status is Status.PASS
    assert r.message == ("2 GPUs x 4 NVLinks active at 14.062 GB/s (GPU 2 without an NVLink bridge: "
                         "no NV# peer in nvidia-smi topo -m)")
    # Where every GPU must be bridged, links_per_gpu says so: GPU 2 then fails.
    r = std(root, "nvlink", config(checks={"nvlink": {"links_per_gpu": 4}}))
    assert r.status is Status.FAIL and "GPU 2 (GPU-02c05ee3-bdb5-aac7-f9e8-a4c8f3f725b3): all links inactive " \
        "(expected 4)" in r.message


def test_real_8x_a6000_bridged_pairs_pass_and_a_gpu_whose_peer_still_shows_nv4_fails(tmp_path):
    status = real("nvidia_smi_nvlink_s_8xRTX_A6000_4_bridged_pairs_unige.txt")
    topo = real("nvidia_smi_topo_m_8xRTX_A6000_4_NV4_pairs_2nics_unige.txt")
    assert nvsmi.parse_topo_nvlink_peers(topo)[5] == {4: 4}
    r = std(bridged(tmp_path, status, topo), "nvlink", config())
    assert r.status is Status.PASS and r.message == "8 GPUs x 4 NVLinks active at 14.062 GB/s"
    gpu5, gpu6 = status.index("GPU 5:"), status.index("GPU 6:")
    head = status[gpu5:gpu6].splitlines()[0]
    dead = status[:gpu5] + head + "\nNVML: Unable to retrieve NVLink information as all links are inActive\n" + status[gpu6:]
    r = std(bridged(tmp_path, dead, topo, name="dead"), "nvlink", config())
    assert r.status is Status.FAIL and r.devices == ["GPU 5"] and "all links inactive (expected 4)" in r.message


def test_bridged_pcie_example_tree_and_a_lost_bridge_link(tmp_path):
    root = tree(tmp_path, "h100-pcie-bridged-healthy")
    r = std(root, "nvlink", config())
    assert r.status is Status.PASS and r.message.startswith("8 GPUs x 12 NVLinks active at 26.562 GB/s")
    with open(f"{root}/var/lib/slurmqual-recorded/nvidia-smi_topo_-m.out") as fh:
        assert nvsmi.parse_topo_nvlink_peers(fh.read())[6] == {7: 12}
    lost = tree(tmp_path, EXAMPLES["h100-pcie-bridged-healthy"][1], name="lost", nvlink_down={3: [13]})
    r = std(lost, "nvlink", config())
    assert r.status is Status.FAIL and r.devices == ["GPU 3"] and "11 of 12 links active" in r.message
    sxm = std(tree(tmp_path, name="sxm", nvlink_down={3: [13]}), "nvlink", config())
    assert "17 of 18 links active (down: 13)" in sxm.message

def test_expected_links_by_product_name():
    from slurmqual.checks.nvlink import expected_links

    def want(name: str, links: dict, peers=None):
        return expected_links([nvsmi.NvlinkGpu(0, name, None, links)], None, peers)[0]

    listed18 = {n: (26.562 if n % 6 < 4 else None) for n in range(18)}       # 12 of 18 active
    assert want("NVIDIA H100 NVL", listed18) == 12 and want("NVIDIA H100 PCIe", listed18) == 12
    assert want("NVIDIA A100 80GB PCIe", {n: 25.0 for n in range(12)}) == 12
    assert want("NVIDIA A100-PCIE-40GB", {n: 25.0 for n in range(12)}) == 12
    assert want("NVIDIA H100 80GB HBM3", listed18) == 18 and want("NVIDIA A100-SXM4-80GB", {}) == 12
    assert want("NVIDIA RTX A4000", {}) == 0                                 # no NVLink; not the A40's 4
    assert want("Some Future GPU", listed18, {0: {1: 8}}) == 8               # unknown: the topology's NV8
    assert want("Some Future GPU", listed18, {0: {p: 18 for p in range(1, 8)}}) == 18   # NVSwitch: NV18 per peer


# -- fabric_manager -----------------------------------------------------------

def test_fabric_manager_down_and_registration_stuck(tmp_path):
    r = std(tree(tmp_path, "fabric-manager-down"), "fabric_manager")
    assert r.status is Status.FAIL
    assert r.message.startswith("fabric manager not running (4 NVSwitches on PCI); GPU 0 (0000:18:00.0, serial "
                                "1652323000000): fabric state In Progress")
    assert "nvidia-fabricmanager" in r.devices and "0000:18:00.0" in r.devices


def test_failed_registration_with_fm_running(tmp_path):
    root = tree(tmp_path, gpu_report={7: {"fabric_state": "Completed", "fabric_status": "Insufficient Resources"}})
    r = std(root, "fabric_manager")
    assert r.status is Status.FAIL and "GPU 7 (" in r.message and "registration failed (Insufficient Resources)" \
        in r.message


def test_no_nvswitch_is_na_and_a100_real_dump_without_fabric_state_passes(tmp_path):
    assert std(tree(tmp_path, nvswitches=0), "fabric_manager").status is Status.NA
    root = tree(tmp_path, NodeSpec(gpus=1, nics=1), name="n2")
    record_output(root, XML, real("nvidia_smi_q_x_a100-sxm4-v12.xml"))   # fabric N/A before Hopper
    assert std(root, "fabric_manager", config()).message == "fabric manager running"


# -- bad tool output never drains ---------------------------------------------

@pytest.mark.parametrize("name", GPU_CHECKS)
def test_missing_hung_failing_or_garbage_nvidia_smi_is_an_error(tmp_path, name, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    root = tree(tmp_path, record_gpu_tools=False, fabric_manager=True)
    r = std(root, name)
    assert r.status is Status.ERROR and "nvidia-smi: command not found" in r.message
    argv = XML if name != "nvlink" else ["nvidia-smi", "nvlink", "-s"]
    record_output(root, argv, "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error", rc=255)
    r = std(root, name)
    assert r.status is Status.ERROR and "exit 255" in r.message
    record_output(root, argv, "<nvidia_smi_log><gpu id='00000000:18:00.0'><product_name>NVID")
    r = std(root, name)
    assert r.status in (Status.ERROR,) and ("not XML" in r.message or "no GPU lines" in r.message)
    os.unlink(f"{root}/var/lib/slurmqual-recorded/{'_'.join(argv)}.out")
    open(f"{root}/var/lib/slurmqual-recorded/{'_'.join(argv)}.hang", "w").close()
    r = std(root, name)
    assert r.status is Status.ERROR and "timed out" in r.message


def test_one_failed_nvidia_smi_run_serves_every_gpu_check(tmp_path, monkeypatch):
    calls = []
    root = tree(tmp_path, record_gpu_tools=False)
    ctx = context(root, FULL, level="standard")
    from slurmqual.command import CommandError

    def run_command(argv, timeout=None):
        calls.append(argv)
        raise CommandError(f"{argv[0]}: timed out after 10s")

    monkeypatch.setattr(ctx, "run_command", run_command)
    results = [run_one(REGISTRY[n], ctx) for n in ("gpu_memory", "gpu_state", "fabric_manager")]
    assert [r.status for r in results] == [Status.ERROR] * 3 and calls == [XML]
