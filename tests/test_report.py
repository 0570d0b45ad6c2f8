"""The burn-in HTML report: content checks on analyze()'s own output, the
legend clear of the bars, and a real headless Chromium load with a
screenshot whose page numbers must equal analysis.json's."""

import html
import json
import re
import shutil
import subprocess
import tempfile

import pytest

from fleet import Fabric, Measurement, names, run
from slurmqual.burnin.judge.analyze import analyze, median_for
from slurmqual.burnin.results.report import ReportError, chart_figure, chart_keys, load_analysis, render_html, write_report

NODES = names(16)


def real_analysis() -> dict:
    """Two tests, a slow node, a slow link, a barely-slow node (retest), a
    pair-less node (untested), a killed task, a node below its baseline."""
    fabric = Fabric(net={"gpu0005": 0.6, "gpu0011": 0.88}, link={("gpu0002", "gpu0015"): 0.5},
                    pairless={"gpu0009"}, noise=0.02)
    ms = run(NODES, fabric, seed=3, tests=("all_reduce", "alltoall"))
    ms = [Measurement(m.nodes, m.busbw * (0.45 if m.test == "alltoall" else 1), m.size, m.test, m.ok, m.gpu_model,
                      "2.21.5") for m in ms]
    a = analyze(ms, NODES, baselines={"all_reduce:pair": {"gpu0003": 480.0}})
    a.incomplete_tasks = ["1"]
    return a.to_dict()


ANALYSIS = real_analysis()


def _write(tmp_path, analysis=ANALYSIS):
    run_dir = tmp_path / "run-1"
    run_dir.mkdir()
    (run_dir / "analysis.json").write_text(json.dumps(analysis))
    out = tmp_path / "report.html"
    write_report(str(run_dir), str(out))
    return out.read_text()


def test_the_fixture_covers_every_section():
    a = ANALYSIS
    assert a["drain"] == ["gpu0005"] and a["suspect_links"] == [["gpu0002", "gpu0015"]]
    assert a["nodes"]["gpu0009"]["verdict"] == "untested" and a["nodes"]["gpu0011"]["verdict"] == "retest"
    assert list(a["below_baseline"]) == ["gpu0003"] and a["retest_plan"]
    assert {"all_reduce:pair", "alltoall:pair"} <= set(a["median"])


def test_report_is_self_contained_with_charts_tables_and_highlights(tmp_path):
    page = _write(tmp_path)
    assert page.count("<svg") == len(chart_keys(ANALYSIS)) >= 4 and "<?xml" not in page
    external = [u for u in re.findall(r'(?:src|href)="([^"]*)"', page) if not u.startswith("#")]
    assert external == []  # nothing to fetch: SVG-internal #refs only
    key, median = median_for(ANALYSIS, "gpu0005")
    score = ANALYSIS["nodes"]["gpu0005"]["score"]
    assert (f'<tr class="drain" data-node="gpu0005"><td>gpu0005</td><td class="verdict">fail</td>'
            f'<td class="key">{key}</td><td class="score">{score:.2f}</td><td class="median">{median:.2f}</td>'
            f'<td class="rel">{score / median:.1%}</td><td>yes</td></tr>') in page
    assert "gpu0002 &harr; gpu0015" in page and "task 1: did not finish" in page
    for k, v in ANALYSIS["noise"].items():
        assert f'<tr data-key="{html.escape(k)}"><td>{html.escape(k)}</td><td class="median">{ANALYSIS["median"][k]:.2f}</td>' \
               f'<td class="noise">{v:.2%}</td>' in page
    assert "2.21.5" in page and "NVIDIA H100 80GB HBM3" in page
    assert "guard tripped" not in page


def test_every_node_is_compared_with_the_median_that_judged_it(tmp_path):
    page = _write(tmp_path)
    pair = ANALYSIS["median"]["all_reduce:pair"]
    healthy = ANALYSIS["nodes"]["gpu0001"]["score"]
    assert f"{healthy / pair:.1%}" in page and 0.95 < healthy / pair < 1.05  # not ~77% vs the intra median


def test_legend_never_covers_the_bars():
    for key in chart_keys(ANALYSIS):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = chart_figure(ANALYSIS, key)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent(renderer)
        plot = ax.get_window_extent(renderer)
        assert legend.x0 >= plot.x1, key  # beside the plot area
        assert legend.x1 <= fig.bbox.x1 + 1 and legend.y0 >= fig.bbox.y0 - 1, key  # and inside the figure


def test_guard_and_slowdown_banners(tmp_path):
    page = _write(tmp_path, dict(ANALYSIS, guard_tripped=True, drain=[], would_drain=["gpu0005"],
                                 fleet_slowdown=True))
    assert "Blast-radius guard tripped" in page and "(gpu0005)" in page and "Fleet-wide slowdown" in page


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match="no analysis found"):
        load_analysis(str(tmp_path))
    bad = tmp_path / "x.json"
    bad.write_text('{"nodes": {}}')
    with pytest.raises(ReportError, match="missing 'median'"):
        load_analysis(str(bad))
    bad.write_text("{not json")
    with pytest.raises(ReportError, match="cannot read analysis"):
        load_analysis(str(bad))
    bad.write_text("[1]")
    with pytest.raises(ReportError, match="not a burn-in analysis"):
        load_analysis(str(bad))


def test_large_fleet_renders_without_per_node_ticks():
    nodes = names(300)
    a = analyze(run(nodes, Fabric(noise=0.02), seed=1), nodes).to_dict()
    page = render_html(a, "big")
    assert "300 nodes, sorted by score" in page and page.count('<tr class="') == 300


def test_analysis_from_before_keys_still_renders(tmp_path):
    old = {"median": {"all_reduce:intra": 456.0, "all_reduce:pair": 380.0}, "threshold": 0.9,
           "nodes": {"n1": {"verdict": "pass", "score": 381.0}}, "suspect_links": [], "drain": [],
           "guard_tripped": False}  # the shape stored analysis.json files had before keys
    page = _write(tmp_path, old)
    assert '<td class="key">all_reduce:pair</td><td class="score">381.00</td><td class="median">380.00</td>' in page


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def _chromium(path: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="sq-chromium-")
    try:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                               *extra, f"file://{path}"], capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _load_in_chromium(path: str) -> tuple[str, list[str]]:
    """Load a page headless; return the DOM and the page's console lines."""
    proc = _chromium(path, "--dump-dom")
    return proc.stdout, [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


browser = [pytest.mark.browser,
           pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium; "
                                                       "scripts/test.sh does it as root)")]


def _cells(dom: str, table: str) -> dict[str, dict[str, str]]:
    """{row id: {cell class: text}} of one table in the DOM Chromium rendered."""
    body = dom.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    out = {}
    for attrs, row in re.findall(r"<tr ([^>]*data-(?:node|key)=\"[^\"]*\"[^>]*)>(.*?)</tr>", body, re.S):
        rid = html.unescape(re.search(r'data-(?:node|key)="([^"]*)"', attrs).group(1))
        out[rid] = {c: html.unescape(t) for c, t in re.findall(r'<td class="(\w+)">(.*?)</td>', row)}
    return out


@pytest.mark.parametrize("_", [0], ids=[""])
@browser[0]
@browser[1]
def test_page_numbers_in_real_chromium_equal_analysis_json(tmp_path, _):
    _write(tmp_path)
    dom, console = _load_in_chromium(str(tmp_path / "report.html"))
    assert console == []
    a = json.loads((tmp_path / "run-1" / "analysis.json").read_text())
    nodes = _cells(dom, "nodes")
    assert set(nodes) == set(a["nodes"])
    for n, v in a["nodes"].items():
        key, median = median_for(a, n)
        row = nodes[n]
        assert row["verdict"] == v["verdict"] and row["key"] == (key or "-")
        if v["score"] is None:
            assert row["score"] == "-" and row["rel"] == "-"
        else:
            assert float(row["score"]) == pytest.approx(v["score"], abs=0.005)
            assert float(row["median"]) == pytest.approx(median, abs=0.005)
            assert float(row["rel"].rstrip("%")) == pytest.approx(100 * v["score"] / median, abs=0.05)
    meds = _cells(dom, "medians")
    assert set(meds) == set(a["median"])
    for k, m in a["median"].items():
        assert float(meds[k]["median"]) == pytest.approx(m, abs=0.005)
        assert float(meds[k]["noise"].rstrip("%")) == pytest.approx(100 * a["noise"][k], abs=0.005)
    below = _cells(dom, "below")
    assert {n: (float(r["score"]), float(r["baseline"])) for n, r in below.items()} == \
        {n: (pytest.approx(b["score"], abs=0.005), b["baseline"]) for n, b in a["below_baseline"].items()}


@browser[0]
@browser[1]
def test_screenshot_shows_the_charts(tmp_path):
    from PIL import Image

    _write(tmp_path)
    shot = tmp_path / "shot.png"
    proc = _chromium(str(tmp_path / "report.html"), f"--screenshot={shot}", "--window-size=1400,2400")
    assert shot.exists(), proc.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    colours = {c for _n, c in img.getcolors(maxcolors=1 << 20)}
    # The bars were painted: the pass green and the fail red of the chart.
    assert (0x4c, 0x9a, 0x2a) in colours and (0xc6, 0x28, 0x28) in colours


@browser[0]
@browser[1]
def test_console_error_detector_works(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>undefinedFn();</script></body></html>")
    _dom, console = _load_in_chromium(str(broken))
    assert any("undefinedFn" in line for line in console)
