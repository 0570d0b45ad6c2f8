"""The parts a burn-in names besides nodes (issue #16: a NIC rail, a cable,
a leaf switch) where admins look: `status` (table, summary lines, --json
rows) through the store, and the HTML report; all from analyze()'s own
output on a per-rail run with a fabric map (tests/fleet.py rail_fleet)."""

import json

import pytest

from fleet import rail_fleet
from slurmqual.burnin.judge.analyze import analyze
from slurmqual.burnin.judge.components import suspect_parts
from slurmqual.burnin.results.report import render_html
from slurmqual.burnin.results.store import RunRecord, open_store
from slurmqual.commands.status import (_burnin_facts, _last_components, add_components, gather, render, rows,
                                       summary)
from slurmqual.slurm.cli import parse_scontrol_node

NIC_NODE = "gpu0100"


@pytest.fixture(scope="module")
def run():
    """A rail leaf 20% slow, a bad cable on rail mlx5_5, one NIC at half rate."""
    probe = rail_fleet(128)
    a_, b_ = sorted(probe[3][0][2][0])
    nodes, topo, ms, _plan = rail_fleet(128, noise=0.01, switches={"su1-r2": 0.8},
                                        link={(frozenset((a_, b_)), "mlx5_5"): 0.4}, nic={(NIC_NODE, "mlx5_3"): 0.5})
    a = analyze(ms, nodes, topology=topo).to_dict()
    assert a["suspect_switches"] == ["su1-r2"] and a["drain"] == [NIC_NODE]
    assert a["suspect_links"] == [[a_, b_, "mlx5_5"]]
    return nodes, [m.to_dict() for m in ms], a, (a_, b_)


def test_suspect_parts_from_the_analysis(run):
    nodes, _raw, a, (a_, b_) = run
    parts = suspect_parts(a)
    [sw] = parts["switches"]
    assert sw["switch"] == "su1-r2" and sw["kind"] == "switch" and sw["keys"] == ["ib_write_bw:rail:mlx5_2"]
    assert sw["nodes"] == nodes[32:64]  # the scalable unit behind that rail's leaf
    assert parts["links"] == [{"a": a_, "b": b_, "rail": "mlx5_5"}]
    assert parts["failed_nics"] == {NIC_NODE: ["mlx5_3"]}
    plain = suspect_parts({"nodes": {}, "suspect_links": [["x", "y"]]})  # a pair key's link: the route, no rail
    assert plain == {"switches": [], "links": [{"a": "x", "b": "y", "rail": None}], "failed_nics": {}}


def _status(tmp_path, run, names, later=None):
    nodes, raw, a, _link = run
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r1", 1000.0, nodes), raw, a)
    if later:  # a later requalify of one node supersedes the full run's parts for it
        s.record_run(RunRecord("r2", 2000.0, [later]), [], {**later_analysis(a, later), "run_kind": "requalify"})
    s.close()
    config = {"store": {"path": str(tmp_path / "s.db")}}
    facts = _burnin_facts(config, names)
    parts = _last_components(config)
    table = rows(gather([parse_scontrol_node(f"NodeName={n} State=IDLE")[0] for n in names], {}, set(), facts),
                 2060.0, 30 * 86400)
    add_components(table, facts, parts)
    return table, parts


def later_analysis(a: dict, node: str) -> dict:
    v = {"verdict": "pass", "score": 390.0, "key": "ib_write_bw:rail:mlx5_3", "keys": {}, "failed_nics": []}
    return {"median": a["median"], "threshold": 0.9, "nodes": {node: v}, "suspect_links": [], "drain": [],
            "guard_tripped": False, "switch_findings": [], "noise": {}}


def test_status_rows_summary_and_json(tmp_path, run):
    nodes, _raw, a, (a_, b_) = run
    behind, plain = nodes[40], nodes[0]
    table, parts = _status(tmp_path, run, [NIC_NODE, behind, plain])
    by = {r["node"]: r for r in table}
    assert by[NIC_NODE]["failed_nics"] == ["mlx5_3"] and by[NIC_NODE]["behind_suspect_switch"] == []
    assert by[behind]["behind_suspect_switch"] == ["su1-r2"] and by[behind]["failed_nics"] == []
    assert by[plain]["behind_suspect_switch"] == [] == by[plain]["failed_nics"]
    assert parts["run_id"] == "r1" and [s["switch"] for s in parts["switches"]] == ["su1-r2"]
    json.dumps(table)  # --json prints these rows as they are
    text = render(table, summary(table), components=parts)
    lines = text.splitlines()
    assert next(x for x in lines if x.startswith(NIC_NODE)).endswith("failed NIC mlx5_3")
    assert next(x for x in lines if x.startswith(behind)).endswith("behind suspect switch su1-r2")
    sw_line = next(x for x in lines if x.startswith("suspect switches"))
    assert f"su1-r2 (every path at {a['switch_findings'][0]['factor']:.0%}" in sw_line and "32 nodes behind it, none drained for it" in sw_line
    assert f"{a_}<->{b_} rail mlx5_5" in next(x for x in lines if x.startswith("suspect links/cables"))


def test_status_a_later_requalify_supersedes_the_parts(tmp_path, run):
    table, parts = _status(tmp_path, run, [NIC_NODE], later=NIC_NODE)
    assert parts["run_id"] == "r1"  # the last *full* run's
    assert table[0]["failed_nics"] == [] and table[0]["behind_suspect_switch"] == []


def test_status_without_a_store_or_parts(tmp_path):
    config = {"store": {"path": str(tmp_path / "none.db")}}
    assert _last_components(config) is None
    table = [{"node": "n1"}]
    add_components(table, {}, None)
    assert table == [{"node": "n1", "failed_nics": [], "behind_suspect_switch": []}]
    assert not any(x.startswith("suspect") for x in render([], {}, components=None).splitlines())


def test_report_lists_suspect_switches_with_their_nodes_cables_with_rail_and_nics(run):
    nodes, _raw, a, (a_, b_) = run
    page = render_html(a, "t")
    switches = page[page.index('<table id="switches">'):]
    switches = switches[:switches.index("</table>")]
    assert 'data-switch="su1-r2"' in switches and "every path through it" in switches
    assert ", ".join(nodes[32:64]) in switches
    links = page[page.index('<ul id="links">'):]
    assert links.startswith(f'<ul id="links"><li data-rail="mlx5_5">{a_} &harr; {b_} on rail mlx5_5')
    assert f'<li data-node="{NIC_NODE}">{NIC_NODE}: mlx5_3</li>' in page
    quiet = render_html({**a, "switch_findings": [], "suspect_links": [],
                         "nodes": {n: {**v, "failed_nics": [], "behind_suspect_switch": []}
                                   for n, v in a["nodes"].items()}}, "t")
    assert '<p id="switches">none</p>' in quiet and '<ul id="links"><li>none</li>' in quiet


def test_status_command_json_and_table(tmp_path, monkeypatch, capsys, run):
    """`slurmqual status` itself: the store's last full run's parts, per node and in summary."""
    from slurmqual import cli
    from slurmqual.slurm.adapter import NodeInfo
    from slurmqual.testing import FakeAdapter

    nodes, raw, a, (a_, b_) = run
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r1", 1000.0, nodes), raw, a)
    s.close()
    shown = [NIC_NODE, nodes[40], a_]
    monkeypatch.setattr("slurmqual.slurm.get_adapter",
                        lambda _config: FakeAdapter.with_nodes([NodeInfo(n, "idle") for n in shown]))
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/s.db"\n[hooks]\nstate_dir = "{tmp_path}/state"\n')
    assert cli.main(["status", "--json", "--config", str(cfg)]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {r["node"]: r for r in out["nodes"]}
    assert by[NIC_NODE]["failed_nics"] == ["mlx5_3"] and by[nodes[40]]["behind_suspect_switch"] == ["su1-r2"]
    assert by[a_]["failed_nics"] == [] == by[a_]["behind_suspect_switch"]
    comp = out["components"]
    assert comp["run_id"] == "r1" and comp["links"] == [{"a": a_, "b": b_, "rail": "mlx5_5"}]
    assert [(x["switch"], x["kind"], len(x["nodes"])) for x in comp["switches"]] == [("su1-r2", "switch", 32)]
    assert cli.main(["status", "--config", str(cfg)]) == 0
    text = capsys.readouterr().out
    assert "suspect switches (burn-in r1" in text and f"{a_}<->{b_} rail mlx5_5" in text
