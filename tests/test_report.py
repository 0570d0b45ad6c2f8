"""The burn-in HTML report: content checks, and a real headless Chromium load."""

import json
import re
import shutil
import subprocess
import tempfile

import pytest

from slurmqual.burnin.report import ReportError, load_analysis, render_html, write_report

ANALYSIS = {
    "median": {"pair": 180.0},
    "threshold": 0.9,
    "nodes": {
        "gpu001": {"verdict": "pass", "score": 181.0},
        "gpu002": {"verdict": "fail", "score": 120.5},
        "gpu003": {"verdict": "untested", "score": None},
        "gpu004": {"verdict": "pass", "score": 178.0},
        "gpu<5>": {"verdict": "retest", "score": 170.0},
    },
    "suspect_links": [["gpu001", "gpu004"]],
    "drain": ["gpu002"],
    "guard_tripped": False,
}


def _write(tmp_path, analysis=ANALYSIS):
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "analysis.json").write_text(json.dumps(analysis))
    out = tmp_path / "report.html"
    write_report(str(run), str(out))
    return out.read_text()


def test_report_is_self_contained_with_chart_table_and_highlights(tmp_path):
    page = _write(tmp_path)
    assert page.count("<svg") == 1 and "<?xml" not in page
    external = [u for u in re.findall(r'(?:src|href)="([^"]*)"', page) if not u.startswith("#")]
    assert external == []  # nothing to fetch: SVG-internal #refs only
    assert '<tr class="drain"><td>gpu002</td><td>fail</td><td>120.50</td><td>66.9%</td><td>yes</td></tr>' in page
    assert "gpu001 &harr; gpu004" in page
    assert "gpu&lt;5&gt;" in page and "gpu<5>" not in page.split("<svg", 1)[0]
    assert "180.00 GB/s (pair)" in page and "threshold 90%" in page
    assert "guard tripped" not in page


def test_guard_banner(tmp_path):
    page = _write(tmp_path, dict(ANALYSIS, guard_tripped=True, drain=[]))
    assert "Blast-radius guard tripped" in page


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


def test_large_fleet_renders_without_per_node_ticks():
    nodes = {f"n{i:04d}": {"verdict": "pass", "score": 170.0 + i % 20} for i in range(300)}
    page = render_html(dict(ANALYSIS, nodes=nodes, drain=[], suspect_links=[]), "big")
    assert "300 nodes, sorted by score" in page and page.count("<tr ") == 300


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _load_in_chromium(path: str) -> tuple[str, list[str]]:
    """Load a page headless; return the DOM and the page's console lines."""
    profile = tempfile.mkdtemp(prefix="sq-chromium-")
    try:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--dump-dom", f"file://{path}"],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium; scripts/test.sh does it as root)")
def test_report_loads_in_real_chromium_without_console_errors(tmp_path):
    _write(tmp_path)
    dom, console = _load_in_chromium(str(tmp_path / "report.html"))
    assert console == []
    assert "<svg" in dom and 'id="nodes"' in dom and "gpu002" in dom
    # The detector itself works: a page with a script error is caught.
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>undefinedFn();</script></body></html>")
    _dom, console = _load_in_chromium(str(broken))
    assert any("undefinedFn" in line for line in console)
