"""Per-GPU scores where admins look: `status` (--json and the table), the HTML
report and the Prometheus metrics; all from analyze()'s own output on our task
code's lines (test_burnin_gpu_store.gpu_lines: the real 8x A100 gpu_burn run)."""

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurmqual.burnin.results.report import render_html
from slurmqual.burnin.results.store import RunRecord, open_store
from slurmqual.commands.status import _burnin_facts, add_gpus, gather, render, rows, summary
from slurmqual.metrics import write_burnin_metrics
from slurmqual.slurm.cli import parse_scontrol_node
from test_burnin_gpu_store import KEY, NODES, gpu_lines, judged, pair_lines, retested


@pytest.fixture(scope="module")
def analysis():
    raw = retested(pair_lines() + gpu_lines(slow={("n03", 5): 0.7}), "n03")
    return raw, judged(raw)


def test_status_json_and_table_show_each_gpu(tmp_path, analysis):
    raw, a = analysis
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, a)
    s.close()
    names = ["n03", "n04"]
    facts = _burnin_facts({"store": {"path": str(tmp_path / "s.db")}}, names)
    nodes = [parse_scontrol_node(f"NodeName={n} State=IDLE Weight=1")[0] for n in names]
    table = rows(gather(nodes, {}, set(), facts), 1000.0 + 60, 30 * 86400)
    add_gpus(table, facts)
    by = {r["node"]: r for r in table}
    bad = [g for g in by["n03"]["gpus"] if g["gpu"] == 5][0]
    e = a["nodes"]["n03"]["gpus"]["5"]["burn"]
    assert bad == {"gpu": 5, "test": "burn", "key": KEY, "verdict": "fail", "score": e["score"],
                   "vs_median": pytest.approx(e["score"] / e["median"], abs=1e-3), "vs_baseline": None,
                   "serial": e["serial"], "pci": None}
    ok = by["n04"]["gpus"][0]
    assert ok["verdict"] == "pass" and ok["vs_baseline"] == 1.0  # its baseline is this run's score
    json.dumps(table)  # --json prints these rows as they are
    lines = render(table, summary(table)).splitlines()
    col = lines[0].index("GPU ")
    assert lines[1][col:].startswith("5:burn fail 70%") and lines[2][col:].startswith("8 ok")


def test_status_without_gpu_tests_has_no_gpu_column(tmp_path):
    raw = pair_lines()
    s = open_store(str(tmp_path / "s.db"))
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, judged(raw))
    s.close()
    facts = _burnin_facts({"store": {"path": str(tmp_path / "s.db")}}, ["n01"])
    table = rows(gather([parse_scontrol_node("NodeName=n01 State=IDLE")[0]], {}, set(), facts), 1060.0, 86400)
    add_gpus(table, facts)
    assert table[0]["gpus"] == [] and "GPU" not in render(table, summary(table)).splitlines()[0]


def test_report_lists_the_gpus_not_passing_and_each_nodes_worst(analysis):
    _raw, a = analysis
    page = render_html(a, "t")
    e = a["nodes"]["n03"]["gpus"]["5"]["burn"]
    assert f'data-node="n03" data-gpu="5"><td>n03</td><td>GPU 5 (serial {e["serial"]})</td><td>{e["serial"]}</td><td>burn</td>' \
           f'<td class="verdict">fail</td><td class="score">{e["score"]:.2f} TFLOPS</td>' in page
    assert page.count('data-gpu="') == 1 and "96 GPU test results (fail: 1, pass: 95)" in page
    assert f'<td class="gpu">GPU 5 (serial {e["serial"]}) burn fail {e["score"] / e["median"]:.1%}</td>' in page
    assert f'data-key="{KEY}"' in page and '<div class="chart" data-key="burn:gpu' not in page


def test_report_below_baseline_names_the_gpu():
    base = judged(pair_lines() + gpu_lines(slow={("n02", 1): 1.06}))
    serial = base["nodes"]["n02"]["gpus"]["1"]["burn"]["serial"]
    a = judged(pair_lines() + gpu_lines(slow={("n02", 1): 0.93}),
               {KEY: {serial: base["nodes"]["n02"]["gpus"]["1"]["burn"]["score"]}})
    assert a["below_baseline"]["n02"]["gpu"] == 1
    assert f'<td class="gpu">GPU 1 (serial {serial})</td><td>{KEY}</td>' in render_html(a, "t")


def test_metrics_per_gpu_with_serial_labels(tmp_path, analysis):
    _raw, a = analysis
    paths = write_burnin_metrics(str(tmp_path), a, 1000.0)
    got = {}
    for path in paths:
        with open(path) as fh:
            for fam in text_string_to_metric_families(fh.read()):
                for smp in fam.samples:
                    got[(smp.name, smp.labels.get("node"), smp.labels.get("gpu"))] = smp
    e = a["nodes"]["n03"]["gpus"]["5"]["burn"]
    score = got[("slurmqual_burnin_gpu_score", "n03", "5")]
    assert score.value == e["score"] and score.labels == {
        "node": "n03", "gpu": "5", "test": "burn", "gpu_model": e["gpu_model"], "serial": e["serial"], "unit": "TFLOPS"}
    assert got[("slurmqual_burnin_gpu_vs_median_ratio", "n03", "5")].value == pytest.approx(0.7, abs=0.02)
    assert sum(1 for k in got if k[0] == "slurmqual_burnin_gpu_score") == 96


def test_analyze_summary_names_the_gpu_below_its_baseline():
    from slurmqual.commands.burnin import _summary

    base = judged(pair_lines() + gpu_lines(slow={("n02", 1): 1.06}))
    e = base["nodes"]["n02"]["gpus"]["1"]["burn"]
    a = judged(pair_lines() + gpu_lines(slow={("n02", 1): 0.93}), {KEY: {e["serial"]: e["score"]}})
    line = [x for x in _summary(a).splitlines() if x.startswith("  n02: GPU 1")]
    assert line == [f"  n02: GPU 1 (serial {e['serial']}) {KEY} {a['below_baseline']['n02']['score']}, "
                    f"more than 10% below its own baseline {e['score']}"]


def test_history_ends_with_the_nodes_gpus_and_json_has_every_run(tmp_path):
    import subprocess
    import sys

    s = open_store(str(tmp_path / "s.db"))
    raw = pair_lines() + gpu_lines()
    s.record_run(RunRecord("r1", 1000.0, NODES), raw, judged(raw))
    raw = retested(pair_lines() + gpu_lines(slow={("n03", 5): 0.7}), "n03")
    a = judged(raw)
    s.record_run(RunRecord("r2", 2000.0, NODES), raw, a)
    s.close()
    cfg = tmp_path / "sq.toml"
    cfg.write_text(f'[hooks]\nstate_dir = "{tmp_path}/state"\n[store]\npath = "{tmp_path}/s.db"\n')

    def history(*extra):
        p = subprocess.run([sys.executable, "-m", "slurmqual", "history", "n03", "--config", str(cfg), *extra],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    rows = json.loads(history("--json"))["gpus"]
    assert [r["run_id"] for r in rows] == ["r2"] * 8 + ["r1"] * 8
    first = rows[13]  # GPU 5 in r1: passed, its baseline since (r2's fail does not move it)
    assert rows[5]["verdict"] == "fail" and first["verdict"] == "pass" and rows[5]["baseline"] == first["score"]
    e = a["nodes"]["n03"]["gpus"]["5"]["burn"]
    assert history().splitlines()[-3:] == [
        "GPUs in run r2:",
        f"  GPU 5 ({e['serial']}) {KEY}: fail {e['score']} = {e['score'] / e['median']:.0%} of median {e['median']}, "
        f"baseline {first['score']}",
        "  7 of 8 GPU results pass"]
