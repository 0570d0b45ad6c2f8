"""The shipped Grafana dashboard and Prometheus alert rules use only the
metrics slurmqual actually writes, and the rules fire on those metrics as
written by our own code: promtool (Debian's `prometheus` package) checks the
rules and runs them over series made from our .prom files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurmqual.evaluation import evaluate
from slurmqual.config import load
from slurmqual.metrics import write_burnin_metrics, write_node_metrics
from slurmqual.nodetree import build

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(REPO, "dashboards", "grafana-slurmqual.json")
RULES = os.path.join(REPO, "dashboards", "slurmqual-alerts.yml")
NAME = re.compile(r"\bslurmqual_[a-z_]+\b")
PROMQL_WORDS = {"by", "on", "without", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool"}

promtool = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(promtool is None, reason="promtool missing: apt-get install prometheus "
                                    "(scripts/test.sh installs it as root)")


def node_results(tmp_path, example: str):
    tree = build(example, str(tmp_path / "trees" / example))
    cfg = tmp_path / "sq.toml"
    if not cfg.exists():
        cfg.write_text(f'[node]\ngpus = 8\n[fabric]\nnics = 8\n[hooks]\nstate_dir = "{tmp_path}/state"\n')
    return evaluate(tree, load(str(cfg), use_cache=False), "fast", None)


def analysis(tmp_path, name: str, slow: dict[str, float], base: float = 380.0) -> dict:
    """A real burn-in analysis by our own analyzer: 8 nodes in pair rounds,
    links touching a node in `slow` run at that node's busbw."""
    nodes = [f"n{i}" for i in range(1, 9)]
    path = tmp_path / f"{name}.jsonl"
    with open(path, "w") as fh:
        for r in range(3):
            for i in range(8):
                a, b = nodes[i], nodes[(i + 1 + r) % 8]
                bw = min([base] + [slow[n] for n in (a, b) if n in slow])
                fh.write(json.dumps({"nodes": [a, b], "busbw": bw, "size": 8589934592, "test": "all_reduce",
                                     "ok": True}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "slurmqual", "burnin", "analyze", "--measurements", str(path),
                           "--json", "--dry-run"], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 3), proc.stderr  # 3: guard tripped or fleet slowdown
    return json.loads(proc.stdout)


def read_prom(directory) -> list[tuple[str, dict, float]]:
    samples = []
    for f in sorted(os.listdir(directory)):
        if f.endswith(".prom"):
            with open(os.path.join(directory, f)) as fh:
                for fam in text_string_to_metric_families(fh.read()):
                    samples += [(s.name, dict(s.labels), s.value) for s in fam.samples]
    return samples


@pytest.fixture()
def emitted(tmp_path) -> dict[str, set[str]]:
    """Every metric name our writers emit, with its label names."""
    d = tmp_path / "metrics"
    write_node_metrics(str(d), "n2", node_results(tmp_path, "no-peermem"), 60.0,
                       {"driver": "550.54.15", "nic_fw": "28.39.1002", "kernel": "6.1.0", "nccl": "2.21.5"})
    write_burnin_metrics(str(d), analysis(tmp_path, "run1", {"n4": 300.0}), 60.0)
    out: dict[str, set[str]] = {}
    for name, labels, _v in read_prom(d):
        out.setdefault(name, set()).update(labels)
    return out


def dashboard_targets() -> list[dict]:
    with open(DASHBOARD) as fh:
        dash = json.load(fh)
    return [t for p in dash["panels"] for t in p.get("targets", [])]


def test_dashboard_uses_only_emitted_metrics_and_their_labels(emitted):
    targets = dashboard_targets()
    assert len(targets) >= 10
    used = set()
    for t in targets:
        names = set(NAME.findall(t["expr"]))
        assert names, f"panel query without a slurmqual metric: {t['expr']}"
        unknown = names - set(emitted)
        assert not unknown, f"{t['expr']}: not emitted by slurmqual: {unknown}; emitted: {sorted(emitted)}"
        used |= names
        labels = set().union(*(emitted[n] for n in names))
        for lab in re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")):
            assert lab in labels, f"legend {{{{{lab}}}}} is no label of {names}"
        for group in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", t["expr"]):
            for lab in filter(None, (x.strip() for x in group.split(","))):
                assert lab in labels, f"{t['expr']}: {lab} is no label of {names}"
        for lab in re.findall(r"(\w+)\s*=~?\s*\"", t["expr"]):
            assert lab in labels, f"{t['expr']}: matcher on {lab}, no label of {names}"
    # The three views the dashboard exists for.
    exprs = " ".join(t["expr"] for t in targets)
    assert "slurmqual_qualified" in exprs
    assert "count by (check) (slurmqual_check_status == 3)" in exprs
    assert "slurmqual_busbw_bytes_per_second / on (test) group_left () slurmqual_fleet_median_busbw_bytes_per_second" in exprs


def test_alert_rules_use_only_emitted_metrics(emitted):
    with open(RULES) as fh:
        text = fh.read()
    exprs = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    names = set(NAME.findall(exprs))
    assert names and names <= set(emitted), names - set(emitted)


def test_bundled_copies_are_the_shipped_files():
    from slurmqual.data import text

    for name, path in (("grafana-slurmqual.json", DASHBOARD), ("slurmqual-alerts.yml", RULES)):
        with open(path) as fh:
            assert text(name) == fh.read()


@needs_promtool
def test_promtool_checks_the_rules():
    proc = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in proc.stdout


def _series(samples, minutes: int) -> list[dict]:
    out = []
    for name, labels, value in samples:
        sel = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        out.append({"series": f"{name}{{{sel}}}", "values": " ".join([repr(float(value))] * (minutes + 1))})
    return out


def _alerts(*alerts: tuple[str, dict]) -> list[dict]:
    out = []
    for name, labels in alerts:
        sel = ",".join(f'{k}="{v}"' for k, v in sorted({"alertname": name, "alertstate": "firing", **labels}.items()))
        out.append({"labels": f"ALERTS{{{sel}}}", "value": 1})
    return out


@needs_promtool
def test_rules_fire_on_metrics_written_by_slurmqual(tmp_path):
    """Series are our own .prom output, constant over the test (written at t=60 s)."""
    bad = node_results(tmp_path, "no-peermem")
    good = node_results(tmp_path, "h100-roce-healthy")
    small, big = tmp_path / "small", tmp_path / "big"
    for n in ("n1", "n3", "n4"):
        write_node_metrics(str(small), n, good, 60.0)
    write_node_metrics(str(small), "n2", bad, 60.0)
    write_burnin_metrics(str(small), analysis(tmp_path, "run1", {"n4": 300.0}), 60.0)
    # 12 nodes, 3 failing the same check: more than the drain guard allows (max(2, 10%)).
    for i in range(1, 13):
        write_node_metrics(str(big), f"g{i}", bad if i <= 3 else good, 60.0)
    # Fleet slowdown: a healthy run, then a run where the whole fabric is 20% slower.
    fast = analysis(tmp_path, "fast", {})
    slow = analysis(tmp_path, "slow", {f"n{i}": 304.0 for i in range(1, 9)})
    med = [(n, lab, v) for n, lab, v in read_prom_of(tmp_path / "fast", fast) if "fleet_median" in n]
    med_slow = [(n, lab, v) for n, lab, v in read_prom_of(tmp_path / "slow", slow) if "fleet_median" in n]
    assert med and med_slow and med[0][1] == med_slow[0][1]
    name, labels, _ = med[0]
    sel = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    slowdown = [{"series": f"{name}{{{sel}}}",
                 "values": " ".join([repr(med[0][2])] * 20 + [repr(med_slow[0][2])] * 21)}]

    # A third of the fleet slow: the burn-in's guard holds every drain.
    held = analysis(tmp_path, "held", {"n1": 200.0, "n2": 200.0, "n3": 200.0})
    assert held["guard_tripped"] and held["drain"] == []
    held_dir = tmp_path / "held-metrics"
    write_burnin_metrics(str(held_dir), held, 60.0)
    # A rail leaf 20% slow (a per-rail run with a fabric map): the switch is named, its nodes are not drained.
    from fleet import rail_fleet
    from slurmqual.burnin.judge.analyze import analyze as analyze_run

    nodes, topo, ms, _plan = rail_fleet(128, noise=0.01, switches={"su1-r2": 0.8})
    switch = analyze_run(ms, nodes, topology=topo).to_dict()
    assert switch["suspect_switches"] == ["su1-r2"] and switch["drain"] == []
    switch_dir = tmp_path / "switch-metrics"
    write_burnin_metrics(str(switch_dir), switch, 60.0)
    failing = ("SlurmqualCheckFailing", {"node": "n2", "check": "peermem", "severity": "warning"})
    unqualified = ("SlurmqualNodeNotQualified", {"node": "n4", "severity": "warning"})
    stale = [("SlurmqualHookMetricsStale", {"node": n, "severity": "warning"}) for n in ("n1", "n2", "n3", "n4")]
    tests = {
        "rule_files": [RULES],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": _series(read_prom(small), 40), "promql_expr_test": [
                # 5 min in: nothing has been failing long enough yet.
                {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "5m", "exp_samples": []},
                {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "12m", "exp_samples": _alerts(unqualified)},
                {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "20m",
                 "exp_samples": _alerts(failing, unqualified)},
                # No hook run since t=60 s: stale after 20 min, firing 5 min later.
                {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "30m",
                 "exp_samples": _alerts(failing, unqualified, *stale)},
            ]},
            {"interval": "1m", "input_series": _series(read_prom(big), 15), "promql_expr_test": [
                {"expr": 'ALERTS{alertstate="firing",alertname="SlurmqualDrainGuardTripped"}', "eval_time": "10m",
                 "exp_samples": _alerts(("SlurmqualDrainGuardTripped", {"severity": "critical"}))},
            ]},
            {"interval": "1m", "input_series": _series(read_prom(held_dir), 5), "promql_expr_test": [
                {"expr": 'ALERTS{alertstate="firing",alertname="SlurmqualBurninGuardHeldDrains"}', "eval_time": "2m",
                 "exp_samples": _alerts(("SlurmqualBurninGuardHeldDrains", {"severity": "critical"}))},
            ]},
            {"interval": "1m", "input_series": _series(read_prom(switch_dir), 5), "promql_expr_test": [
                {"expr": 'ALERTS{alertstate="firing",alertname=~"SlurmqualBurnin.*"}', "eval_time": "2m",
                 "exp_samples": _alerts(("SlurmqualBurninSuspectSwitch", {"severity": "warning"}))},
            ]},
            {"interval": "1m", "input_series": slowdown, "promql_expr_test": [
                {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "25m", "exp_samples": []},
                {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "31m",
                 # (this group has no hook metrics at all: that alerts too, after 30 min)
                 "exp_samples": _alerts(("SlurmqualBurninFleetSlowdown", {**labels, "severity": "warning"}),
                                        ("SlurmqualMetricsAbsent", {"severity": "warning"}))},
            ]},
        ],
    }
    path = tmp_path / "tests.yml"
    path.write_text(json.dumps(tests, indent=1))  # JSON is YAML
    proc = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def read_prom_of(directory, result: dict) -> list[tuple[str, dict, float]]:
    write_burnin_metrics(str(directory), result, 60.0)
    return read_prom(directory)
