"""`slurmqual config init`: the config it writes from a node validates, passes on
that node, flags every broken example, reads real tool outputs, and never
writes what it could not read."""

from __future__ import annotations

import os
import shutil
import tomllib
from dataclasses import replace

import pytest

from nodes import FAST, check, config, tree
from slurmqual import cli, siteinit
from slurmqual.checks import REGISTRY
from slurmqual.config import load
from slurmqual.nodetree import DEFAULT_MODULES, EXAMPLES, NodeSpec, record_mlxconfig, record_output
from slurmqual.result import Status
from test_check_examples import BROKEN, HEALTHY

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(REPO, "tests", "data", "real")
ALL = [s.name for s in REGISTRY.values()]


def init(capsys, root: str, *extra: str) -> tuple[int, str, str]:
    rc = cli.main(["config", "init", "--root", root, *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def written(tmp_path, capsys, root: str, name: str = "init.toml", *extra: str):
    """init -o FILE; the file, its loaded Config and init's exit code."""
    path = tmp_path / name
    rc = cli.main(["config", "init", "--root", root, "-o", str(path), *extra])
    capsys.readouterr()
    return path, load(str(path), use_cache=False), rc


def results(root: str, cfg, level: str = "slow", names=ALL) -> dict:
    return {n: check(root, n, cfg, level=level) for n in names}


def healthy_for(spec: NodeSpec) -> str:
    return "h100-ib-healthy" if spec.link_layer == "InfiniBand" else "h100-roce-healthy"


@pytest.fixture(autouse=True)
def _no_host_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))   # trees answer from their recorded outputs only
    monkeypatch.setenv("SLURMQUAL_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_init_writes_a_valid_annotated_config_on_every_example(tmp_path, capsys, example):
    root = tree(tmp_path, example)
    rc, text, err = init(capsys, root)
    path = tmp_path / "c.toml"
    path.write_text(text)
    load(str(path), use_cache=False)                       # config validate passes
    data = tomllib.loads(text)
    assert data["node"]["gpus"] == 8 - len(EXAMPLES[example][1].missing_gpus)
    for line in text.splitlines():                           # every value says where it came from
        if "=" in line and not line.startswith("#") and not line.startswith("["):
            assert "  # " in line, line
    if example in HEALTHY:
        assert rc == 0, err
        assert "0 not passing" in err
        cfg = siteinit.parse_written(text, False, "t")
        bad = {n: r for n, r in results(root, cfg).items() if r.status not in (Status.PASS, Status.NA)}
        assert not bad, bad


@pytest.mark.parametrize("example", sorted(BROKEN))
def test_config_from_the_healthy_tree_flags_each_broken_tree(tmp_path, capsys, example):
    spec = EXAMPLES[example][1]
    good = tree(tmp_path, healthy_for(spec), name="good")
    _path, cfg, rc = written(tmp_path, capsys, good)
    assert rc == 0
    assert all(r.status in (Status.PASS, Status.NA) for r in results(good, cfg).values())
    broken = tree(tmp_path, example, name="broken")
    got = check(broken, BROKEN[example], cfg, level="slow")
    assert got.status is Status.FAIL, got


def test_init_on_a_broken_node_names_where_it_fails_itself(tmp_path, capsys):
    """A node that disagrees with itself gets the value most parts show and a line saying it fails there."""
    root = tree(tmp_path, "nic-slow")
    rc, text, err = init(capsys, root)
    assert tomllib.loads(text)["fabric"]["rate_gbps"] == 400
    assert "mlx5_5/1 at 200 Gb/s, the others 400: nic_link fails here" in text
    assert rc == 1 and "fail nic_link" in err
    root = tree(tmp_path, "nvlink-down", name="nvl")
    rc, text, err = init(capsys, root)
    assert tomllib.loads(text)["checks"]["nvlink"]["links_per_gpu"] == 18
    assert "GPU 6 has 16 active NVLinks, the others 18" in text and rc == 1


# Breakages the defaults do not see and the written config does: what a site
# gains from pinning what its healthy node has.
UNSEEN_BY_DEFAULTS = {
    "gpu-missing": ("gpu_count", EXAMPLES["gpu-missing"][1]),
    "nic-missing": ("nic_link", EXAMPLES["nic-missing"][1]),
    "other-driver": ("versions", replace(NodeSpec(), driver="535.161.08")),
    "mixed-nic-fw-all-new": ("versions", replace(NodeSpec(), fw_ver="28.40.1000")),
    "other-nccl": ("versions", replace(NodeSpec(), nccl="2.18.3")),
    "pcie-gpus-in-sxm-partition": ("gpu_count", replace(NodeSpec(), nvswitches=0, nvlink_bridged=True)),
    "infiniband-in-roce-partition": ("nic_link", replace(NodeSpec(), link_layer="InfiniBand")),
}


@pytest.mark.parametrize("case", sorted(UNSEEN_BY_DEFAULTS))
def test_written_config_catches_what_the_defaults_miss(tmp_path, capsys, case):
    name, spec = UNSEEN_BY_DEFAULTS[case]
    good = tree(tmp_path, "h100-roce-healthy", name="good")
    _path, cfg, _rc = written(tmp_path, capsys, good)
    broken = tree(tmp_path, spec, name="broken")
    assert check(broken, name, config(), level="standard").status in (Status.PASS, Status.NA)
    assert check(broken, name, cfg, level="standard").status is Status.FAIL


def test_gpu_node_without_nics_passes_its_config_and_the_defaults(tmp_path, capsys):
    """The device machine's kind: NVIDIA GPUs and a driver, no InfiniBand stack,
    no NVSwitch. No check may fail there for want of a NIC."""
    spec = NodeSpec(gpus=1, nics=0, nvswitches=0, sockets=1,
                    modules=[m[0] for m in DEFAULT_MODULES if not m[0].startswith(("mlx5", "ib_", "nvidia_peermem"))])
    root = tree(tmp_path, spec)
    rc, text, err = init(capsys, root)
    data = tomllib.loads(text)
    assert rc == 0, err
    assert data["fabric"] == {"nics": 0} and "rate_gbps" not in text.split("[fabric]")[1].split("[")[0]
    assert "fabric.rate_gbps, fabric.link_layer: no RDMA ports to read" in text
    assert data["checks"]["fabric_manager"]["required"] is False
    cfg = siteinit.parse_written(text, False, "t")
    for c in (cfg, config()):
        got = results(root, c)
        assert all(r.status in (Status.PASS, Status.NA) for r in got.values()), got
        for name in ("peermem", "nic_link", "dcqcn", "gpu_nic_affinity", "ib_counters", "roce_qos"):
            assert got[name].status is Status.NA, got[name]
    # with NICs expected, a missing RDMA stack is still judged
    assert check(root, "peermem", config(fabric={"nics": 8})).status is Status.FAIL


def test_nothing_is_written_that_could_not_be_read(tmp_path, capsys):
    root = tree(tmp_path, "h100-ib-healthy")
    os.unlink(f"{root}/proc/driver/nvidia/version")
    shutil.rmtree(f"{root}/var/lib/slurmqual-recorded")      # no nvidia-smi output on this node
    for info in os.listdir(f"{root}/proc/driver/nvidia/gpus"):
        os.unlink(f"{root}/proc/driver/nvidia/gpus/{info}/information")
    rc, text, _err = init(capsys, root)
    data = tomllib.loads(text)
    assert "driver" not in data["checks"]["versions"] and "gpu_model" not in data["node"]
    assert not {"gpu_state", "gpu_memory", "nvlink", "dcqcn", "roce_qos"} & set(data["checks"])
    for why in ("checks.versions.driver: /proc/driver/nvidia/version: missing",
                "checks.gpu_state, checks.gpu_memory: nvidia-smi -q -x: nvidia-smi: command not found",
                "node.gpu_model: no 'Model:' line", "checks.dcqcn, checks.roce_qos: no RoCE ports"):
        assert why in text, why


# -- real tool outputs (../shared/samples, tests/data/real) ------------------------

def test_prio_mask_from_a_real_mlxconfig_query(tmp_path, capsys, samples):
    from slurmqual.checks.dcqcn import parse_mlxconfig

    text = (samples / "mlx" / "mlxconfig_query_CX4Lx_dual_port_ROCE_CC_PRIO_MASK_P1_P2_DCQCN_full.txt").read_text()
    root = record_mlxconfig(tree(tmp_path, "h100-roce-healthy"), text)
    _path, cfg, rc = written(tmp_path, capsys, root)
    assert cfg["checks"]["dcqcn"]["prio_mask"] == parse_mlxconfig(text)["ROCE_CC_PRIO_MASK_P1"] == 255
    assert rc == 0 and check(root, "dcqcn", cfg, level="standard").status is Status.PASS


@pytest.mark.parametrize("real,trust", [
    (os.path.join(REAL, "mlx", "mlnx_qos_trust_pcp_ens6_OS_controlled_no_pfc.txt"), "pcp"),
    ("mlx/mlnx_qos_firmware_DCBX_ets_bw_receive_buffer_pfc3.txt", "dscp"),        # ../shared/samples
])
def test_trust_from_real_mlnx_qos_outputs(tmp_path, capsys, real, trust, request):
    if not os.path.isabs(real):
        real = str(request.getfixturevalue("samples") / real)
    text = open(real).read()
    root = tree(tmp_path, "h100-roce-healthy", name="real")
    for i in range(8):
        record_output(root, ["mlnx_qos", "-i", f"ens{i + 1}np0"], text)
    _p, cfg, rc = written(tmp_path, capsys, root, "real.toml")
    assert cfg["checks"]["roce_qos"]["trust"] == trust and rc == 0
    assert check(root, "roce_qos", cfg, level="standard").status is Status.PASS
    other = tree(tmp_path, replace(NodeSpec(), qos_trust={i: {"pcp": "dscp", "dscp": "pcp"}[trust] for i in range(8)}),
                 name="other")
    assert check(other, "roce_qos", cfg, level="standard").status is Status.FAIL   # the other trust is flagged


@pytest.mark.parametrize("xml", ["nvidia_smi_q_x_a100-sxm4-v12.xml", "nvidia_smi_q_x_tesla-t4.xml",
                                 "nvidia_smi_q_x_a10g.xml"])
def test_gpu_settings_from_real_nvidia_smi_xml(tmp_path, capsys, xml):
    from slurmqual.probe.nvsmi import parse_xml

    text = open(os.path.join(REAL, "nvidia", xml)).read()
    rep = parse_xml(text)
    root = tree(tmp_path, NodeSpec(gpus=len(rep.gpus), nics=len(rep.gpus), nvswitches=0))
    record_output(root, ["nvidia-smi", "-q", "-x"], text)
    _path, cfg, _rc = written(tmp_path, capsys, root)
    want_mig = {g.mig for g in rep.gpus} & {"Enabled", "Disabled"}
    if want_mig:
        assert cfg["checks"]["gpu_state"]["mig"] == {"Enabled": "on", "Disabled": "off"}[want_mig.pop()]
    assert cfg["checks"]["gpu_state"]["persistence_mode"] is (rep.gpus[0].persistence == "Enabled")
    assert cfg["checks"]["gpu_memory"]["require_ecc"] is (rep.gpus[0].ecc_mode == "Enabled")
    for name in ("gpu_state", "gpu_memory"):
        assert check(root, name, cfg, level="standard").status in (Status.PASS, Status.WARN), name


def test_links_per_gpu_from_real_bridged_h100_pcie_nvlink_status(tmp_path, capsys):
    text = open(os.path.join(REAL, "nvidia", "nvidia_smi_nvlink_s_2xH100_PCIe_bridged_12_of_18_active_drv555.txt")).read()
    root = tree(tmp_path, NodeSpec(gpus=2, nics=2, nvswitches=0, nvlink_bridged=True))
    record_output(root, ["nvidia-smi", "nvlink", "-s"], text)
    _path, cfg, rc = written(tmp_path, capsys, root)
    assert cfg["checks"]["nvlink"]["links_per_gpu"] == 12 and rc == 0
    assert cfg["node"]["gpu_model"] == "NVIDIA H100 PCIe"


# -- the command ----------------------------------------------------------------

def test_stdout_by_default_and_an_existing_file_is_refused_without_force(tmp_path, capsys):
    root = tree(tmp_path, "h100-roce-healthy")
    rc, text, _err = init(capsys, root)
    assert rc == 0 and text.startswith("# Written by `slurmqual config init`")
    target = tmp_path / "config.toml"
    target.write_text("# the site's own\n")
    rc, out, err = init(capsys, root, "-o", str(target))
    assert rc == 2 and "exists: not replaced" in err and not out
    assert target.read_text() == "# the site's own\n"
    rc, _out, err = init(capsys, root, "-o", str(target), "--force")
    assert rc == 0 and target.read_text() == text.replace(text.splitlines()[0], target.read_text().splitlines()[0])
    assert init(capsys, root, "--force")[0] == 2


def test_group_entry_validates_alone_and_over_a_base(tmp_path, capsys):
    roce = tree(tmp_path, "h100-roce-healthy", name="roce")
    ib = tree(tmp_path, "h100-ib-healthy", name="ib")
    assert init(capsys, ib, "--group", "ib")[0] == 2                    # a group needs a match
    rc, base, _ = init(capsys, roce)
    rc, group, _ = init(capsys, ib, "--group", "h100-ib", "--partition", "ib")
    assert rc == 0 and "\n[[groups]]\nname = \"h100-ib\"\nmatch = { partition = \"ib\" }\n" in group
    assert "# fleet-wide, not per group: burnin.gpus_per_node = 8" in group
    site = tmp_path / "site.toml"
    site.write_text(base + "\n" + group.split("\n[[groups]]", 1)[1].join(["\n[[groups]]", ""]))
    cfg = load(str(site), use_cache=False)
    ib_node = cfg.for_node("gpu001", {"ib"}, set())
    assert ib_node.applied == ("h100-ib",) and ib_node["fabric"]["link_layer"] == "infiniband"
    assert cfg.for_node("gpu002", {"roce"}, set())["fabric"]["link_layer"] == "ethernet"
    for root, c in ((ib, ib_node), (roce, cfg.for_node("gpu002", {"roce"}, set()))):
        got = results(root, c, level="standard", names=FAST + ["versions", "gpu_state", "nvlink"])
        assert all(r.status in (Status.PASS, Status.NA) for r in got.values()), got
    assert check(roce, "nic_link", ib_node).status is Status.FAIL       # the IB group flags a RoCE node


def test_bad_tool_output_and_sysfs_are_skipped_not_written_and_never_crash(tmp_path, capsys):
    """A garbage port rate, a hung nvidia-smi, nvlink output with no GPU line:
    init still writes a valid config, without those keys, and says why."""
    root = tree(tmp_path, "h100-roce-healthy")
    with open(f"{root}/sys/class/infiniband/mlx5_2/ports/1/rate", "w") as fh:
        fh.write("fast\n")
    open(f"{root}/var/lib/slurmqual-recorded/nvidia-smi_-q_-x.hang", "w").close()
    record_output(root, ["nvidia-smi", "nvlink", "-s"], "NVML: Driver/library version mismatch")
    rc, text, _err = init(capsys, root)
    data = tomllib.loads(text)
    assert not {"gpu_state", "gpu_memory", "nvlink"} & set(data["checks"])
    assert data["fabric"]["rate_gbps"] == 400 and data["fabric"]["nics"] == 8   # read from the other seven
    assert data["node"]["gpus"] == 8 and data["checks"]["dcqcn"]["priorities"] == list(range(8))
    for why in ("mlx5_2/1: cannot read /sys/class/infiniband/mlx5_2/ports/1/rate: expected e.g. '400 Gb/sec",
                "nvidia-smi -q -x: nvidia-smi -q -x: timed out (recorded hang)",
                "checks.nvlink.links_per_gpu: nvidia-smi nvlink -s printed no GPU line"):
        assert why in text, why
    path = tmp_path / "c.toml"
    path.write_text(text)
    load(str(path), use_cache=False)
    assert rc == 1     # the node cannot be judged with it (nic_link cannot read the rate): said, not hidden


def test_all_links_inactive_from_real_nvlink_status_is_written_with_a_doubt(tmp_path, capsys, samples):
    """A GPU passed through alone (real `nvidia-smi nvlink -s` of an A100 SXM with every
    link inactive): the defaults fail it for want of 12 links; init writes what it read
    (0) and says that on an HGX board this would be a fault."""
    text = (samples / "nvidia" / "nvidia_smi_nvlink_status_all_links_inactive.txt").read_text()
    root = tree(tmp_path, NodeSpec(gpus=1, nics=1, nvswitches=0))
    record_output(root, ["nvidia-smi", "nvlink", "-s"], text)
    assert check(root, "nvlink", config(), level="standard").status is Status.FAIL
    rc, out, err = init(capsys, root)
    assert tomllib.loads(out)["checks"]["nvlink"]["links_per_gpu"] == 0 and rc == 0
    assert "# Written as read, but check it:" in out and "NVIDIA A100-SXM4-80GB has 12" in out
    assert "check this: checks.nvlink.links_per_gpu = 0" in err
    cfg = siteinit.parse_written(out, False, "t")
    assert check(root, "nvlink", cfg, level="standard").status is Status.NA


def test_a_roce_port_without_dcqcn_sysfs_is_ignored_not_a_rail(tmp_path, capsys):
    """A GPU machine whose only RDMA device is a RoCE VF without ecn/ (a cloud VM's
    accelerated-networking port): not a fabric rail, so no check errors on it."""
    spec = NodeSpec(gpus=1, nics=1, nvswitches=0, sockets=1)
    root = tree(tmp_path, spec)
    shutil.rmtree(os.path.realpath(f"{root}/sys/class/net/ens1np0/ecn"))
    assert check(root, "dcqcn", config()).status is Status.ERROR        # the defaults cannot judge it
    rc, text, err = init(capsys, root)
    data = tomllib.loads(text)
    assert data["fabric"] == {"ignore": ["mlx5_0"], "nics": 0} and rc == 0, err
    assert "mlx5_0: RoCE without /sys/class/net/ens1np0/ecn" in text and "# Written as read, but check it:" in text
    cfg = siteinit.parse_written(text, False, "t")
    got = results(root, cfg)
    assert all(r.status in (Status.PASS, Status.NA) for r in got.values()), got


def test_a_reader_bug_costs_its_keys_not_the_file(tmp_path, capsys, monkeypatch):
    def broken(_fs):
        raise RuntimeError("boom")

    monkeypatch.setattr(siteinit.nvidia, "gpu_models", broken)
    root = tree(tmp_path, "h100-ib-healthy")
    rc, text, _err = init(capsys, root)
    data = tomllib.loads(text)
    assert "gpu_model" not in data["node"] and data["fabric"]["nics"] == 8 and rc == 0
    assert "gpus: internal error RuntimeError: boom (a slurmqual bug: please report)" in text
