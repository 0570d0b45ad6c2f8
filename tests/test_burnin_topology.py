"""Topology inputs (real Slurm files, fabric maps from real iblinkinfo and
lldpctl output) and `slurmqual fabric map`."""

import pathlib

import pytest

from slurmqual.burnin.read import fabricmap
from slurmqual.burnin.judge.topology import TopologyError, load, parse, switch_of, write_csv
from slurmqual.cli import main

REAL = pathlib.Path(__file__).parent / "data" / "real"
TOPO = REAL / "topology"


def test_topology_yaml_man_page_example_uses_the_cluster_default_tree():
    t = load(str(TOPO / "topology.yaml.man5_example_tree_block_flat_ring_torus.yaml"))
    assert t.source == "topology.yaml:topo1"
    assert switch_of(t) == {"node01": "s1", "node02": "s1", "node03": "s2", "node04": "s2"}
    assert t.parent == {"s1": "sw_root", "s2": "sw_root"}


def test_topology_conf_tree_with_hostlists_of_switches_and_nodes():
    t = load(str(TOPO / "topology.conf.testcase2_unbalanced_tree_600_leaves.conf"))
    assert len(t.node_switch) == 10000
    assert t.node_switch["peta10000"] == "leaf100" and t.node_switch["peta19999"] == "leaf599"
    assert t.parent["leaf100"] == "grp10" and t.parent["grp23"] == "root" and t.parent["im0"] == "root"


def test_topology_conf_block_plugin():
    t = load(str(TOPO / "topology.conf.block_plugin.conf"))
    assert t.node_switch["node01"] == "b1" and t.node_switch["node32"] == "b8"


@pytest.mark.parametrize("name, words", [
    ("topology.yaml.tree_switches_not_list.yaml", "tree.switches must be a list"),
    ("topology.yaml.block_blocks_not_list.yaml", "block.blocks must be a list"),
    ("topology.yaml.tree_bad_options.yaml", "child switch s3, which is not defined"),
])
def test_malformed_real_topology_yaml_is_a_clear_error(name, words):
    with pytest.raises(TopologyError, match=words):
        load(str(TOPO / name))


@pytest.mark.parametrize("text, words", [
    ("SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n2\n", "n2 is under both s1 and s2"),
    ("SwitchName=s1 Nodes=n[1-\n", "bad hostlist"),
    ("SwitchName=s1 Nodes=n1 Color=red\n", "unknown key 'Color'"),
    ("Nodes=n1\n", "needs SwitchName= or BlockName="),
    ("SwitchName=s1 Nodes\n", "expected Key=Value"),
    ("# nothing\n", "no node is attached"),
    ("node,rail,switch\nn1,mlx5_0,leafA\nn1,mlx5_0,leafB\n", "on both leafA and leafB"),
    ("node,rail,switch\nn1,mlx5_0\n", "expected node,rail,switch"),
    ("node,rail,switch\nn 1,mlx5_0,leafA\n", "row 2"),
    ("---\n- topology: t\n  flat: true\n", "only tree and block"),
    ("---\n- topology: t\n  tree:\n    switches:\n      - switch: s1\n        nodes: n1\n     bad: 1\n", "indentation"),
    ("---\n- topology: t\n  tree: {switches: []}\n", "not supported"),
])
def test_malformed_topology_is_a_clear_error(text, words):
    with pytest.raises(TopologyError, match=words):
        parse(text, "t.yaml" if text.startswith("---") else "t")


def test_fabric_map_csv_per_rail_and_switch_of_uses_the_first_rail():
    t = parse("node,rail,switch,port\nn1,mlx5_1,rail1-su1,3\nn1,mlx5_0,rail0-su1,3\nn2,,leafX\n", "map.csv")
    assert t.leaf_of("n1", "mlx5_1") == "rail1-su1"
    assert switch_of(t) == {"n1": "rail0-su1", "n2": "leafX"}


@pytest.mark.parametrize("body", [
    "n1,mlx5_1,rail1-su1,3\n  # a comment\n\nn1 , mlx5_0 ,rail0-su1\nn2,,leafX\n n3,mlx5_0, r0 ,\n",
    "n1,mlx5_0,a\nn1,mlx5_0,b\n",              # one NIC on two switches
    "n1,mlx5_0\n", "n1,mlx5_0,s,1,extra\n", ",mlx5_0,s\n", "n1,mlx5_0, \n",   # malformed rows
    "bad name,mlx5_0,s\n", "n1,,a\nn1,,b\n"])
def test_fabric_map_csv_split_at_commas_reads_as_csv_does(body):
    """Without quotes the map is split at commas (16k x 8 rails: 131,072
    rows); the same text with a quoted cell goes through csv.reader: the
    same topology or the same error, row numbers included."""
    plain = "node,rail,switch,port\n" + body
    quoted = '"node",rail,switch,port\n' + body
    results = []
    for text in (plain, quoted):
        try:
            t = parse(text, "map.csv")
            results.append((t.rail_switch, t.node_switch))
        except TopologyError as exc:
            results.append(str(exc).replace(quoted, plain))
    assert results[0] == results[1]
    assert results[0] != ({}, {})


def test_fabric_map_from_real_iblinkinfo(samples):
    text = (samples / "ib" / "iblinkinfo_25G_HDR_switch_MQM8700_EXCERPT.txt").read_text()
    r = fabricmap.from_iblinkinfo(text)
    assert r.rows == [("gpu-v100-0", "HCA-1", "MF0;ibswitch254:MQM8700/U1", "1"),
                      ("gpu-v100-1", "HCA-1", "MF0;ibswitch254:MQM8700/U1", "2"),
                      ("gpu-v100-2", "HCA-1", "MF0;ibswitch254:MQM8700/U1", "4"),  # only under the switch block
                      ("gpu-v100-3", "HCA-1", "MF0;ibswitch254:MQM8700/U1", "3")]
    assert r.skipped == ["Mellanox Technologies Aggregation Node"]
    t = parse(write_csv(r.rows), "map.csv")  # what the command writes, the analysis reads
    assert t.leaf_of("gpu-v100-2", "HCA-1") == "MF0;ibswitch254:MQM8700/U1"


def test_fabric_map_from_real_lldpctl_json_with_rdma_device_names():
    text = (REAL / "lldp" / "lldpctl_json_two_neighbors_same_port_list_form.json").read_text()
    r = fabricmap.from_lldpctl(text, "gpu07", {"Ethernet0": "mlx5_0"})
    assert r.rows == [("gpu07", "mlx5_0", "dummy", "00:00:00:00:00:01")]


@pytest.mark.parametrize("text, words", [("no json", "not lldpctl JSON"), ('{"x": 1}', "no top-level 'lldp'"),
                                         ('{"lldp": {"interface": [1]}}', "expected objects")])
def test_fabric_map_bad_lldpctl_is_an_error(text, words):
    with pytest.raises(fabricmap.FabricMapError, match=words):
        fabricmap.from_lldpctl(text, "n1")


def test_fabric_map_command_writes_the_csv(samples, tmp_path, capsys):
    out = tmp_path / "fabric.csv"
    rc = main(["fabric", "map", "--iblinkinfo", str(samples / "ib" / "iblinkinfo_25G_HDR_switch_MQM8700_EXCERPT.txt"),
               "-o", str(out)])
    assert rc == 0
    assert out.read_text().splitlines()[0] == "node,rail,switch,port"
    assert "4 NIC(s) of 4 node(s) on 1 switch(es)" in capsys.readouterr().err
    assert switch_of(load(str(out)))["gpu-v100-3"] == "MF0;ibswitch254:MQM8700/U1"


def test_fabric_map_command_on_other_output_fails_clearly(samples, capsys):
    rc = main(["fabric", "map", "--iblinkinfo", str(samples / "ib" / "ibstat_mlx5_ConnectX6_HDR100_rate100.txt")])
    assert rc == 2 and "not iblinkinfo output" in capsys.readouterr().err
