"""nvidia-smi parsers on real outputs: -q -x XML dumps (tests/data/real/nvidia),
-q text excerpts and nvlink -s outputs (../shared/samples/nvidia)."""

import os

import pytest

from slurmqual.probe import nvsmi

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "data", "real", "nvidia")
SHARED = os.path.join(os.path.dirname(HERE), "..", "shared", "samples", "nvidia")


def real(name: str) -> str:
    return open(os.path.join(REAL, name), encoding="utf-8").read()


def shared(name: str) -> str:
    path = os.path.join(SHARED, name)
    if not os.path.exists(path):
        pytest.skip(f"shared sample {name} not present (../shared/samples/nvidia)")
    return open(path, encoding="utf-8").read()


def test_a100_xml_driver_535_mig_and_persistence():
    rep = nvsmi.parse_xml(real("nvidia_smi_q_x_a100-sxm4-v12.xml"))
    assert rep.driver == "535.54.03" and len(rep.gpus) == 1
    g = rep.gpus[0]
    assert (g.pci, g.serial, g.mig, g.persistence) == ("0000:01:00.0", "1650522003820", "Enabled", "Disabled")
    assert g.label == "GPU 0 (0000:01:00.0, serial 1650522003820)"
    assert g.unc_volatile == 0 and g.remap_pending is None          # remapped_rows N/A under MIG
    assert g.fabric_state is None and g.temp_c == 27.0 and g.slowdown_c == 89.0
    assert g.clock_events["hw_slowdown"] is False and "sw_thermal_slowdown" in g.clock_events


def test_a10g_xml_remapped_rows_and_old_throttle_naming():
    g = nvsmi.parse_xml(real("nvidia_smi_q_x_a10g.xml")).gpus[0]
    assert (g.remap_corr, g.remap_unc, g.remap_pending, g.remap_failure) == (0, 0, False, False)
    assert g.clock_events["gpu_idle"] is True and g.clock_events["hw_slowdown"] is False
    assert g.label == "GPU 0 (0000:00:1e.0)"      # an all-zero serial is not shown


def test_t4_xml_page_retirement():
    g = nvsmi.parse_xml(real("nvidia_smi_q_x_tesla-t4.xml")).gpus[0]
    assert (g.retired_sbe, g.retired_dbe, g.retire_pending) == (0, 0, False)


def test_text_excerpt_remap_pending_xid63():
    rep = nvsmi.parse_text(shared("nvidia_smi_q_A100_xid63_remapped_rows_pending_EXCERPT.txt"))
    assert rep.driver == "510.73.08"
    g = rep.gpus[0]
    assert (g.pci, g.product, g.remap_corr, g.remap_unc, g.remap_pending, g.remap_failure) == \
        ("0000:10:1c.0", "NVIDIA A100-SXM4-80GB", 1, 0, True, False)
    assert g.unc_volatile == 0 and g.unc_aggregate == 0


def test_text_page_retirement_8_gpus():
    rep = nvsmi.parse_text(shared("nvidia_smi_q_page_retirement_8gpu_azure_driver535.txt"))
    assert [g.pci for g in rep.gpus] == [f"000{i}:00:00.0" for i in range(1, 9)]
    assert all((g.retired_sbe, g.retired_dbe, g.retire_pending) == (0, 0, False) for g in rep.gpus)


def test_nvlink_status_real_h100_and_all_inactive():
    gpus = nvsmi.parse_nvlink_status(real("nvidia_smi_nvlink_s_H100_GPU0_18_links_26.562_EXCERPT.txt"))
    assert len(gpus) == 1 and len(gpus[0].links) == 18 and set(gpus[0].links.values()) == {26.562}
    dead = nvsmi.parse_nvlink_status(shared("nvidia_smi_nvlink_status_all_links_inactive.txt"))
    assert dead[0].index == 6 and dead[0].all_inactive and dead[0].links == {}


@pytest.mark.parametrize("text,msg", [
    ("", "not XML"),
    ("<html><body>Bad Gateway</body></html>", "expected <nvidia_smi_log>"),
    ("<nvidia_smi_log><gpu id='garbage'/></nvidia_smi_log>", "not a PCI bus id"),
    ('<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<gpu id="00000000:18:00.0">\n\t\t<product_name>NVI', "not XML"),
])
def test_bad_xml_is_a_clear_error(text, msg):
    with pytest.raises(nvsmi.SmiError, match=msg):
        nvsmi.parse_xml(text)
