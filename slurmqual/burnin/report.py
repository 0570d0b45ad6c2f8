"""`slurmqual burnin report RUN --html FILE`: one self-contained HTML page
for a burn-in run, to open in a browser or attach to a ticket.

The chart is drawn by matplotlib (SVG backend) and embedded inline, so the
page needs no network, no JavaScript and no other file.
"""

from __future__ import annotations

import html
import io
import json
import os
import sys
import time

VERDICT_COLOURS = {"pass": "#4c9a2a", "fail": "#c62828", "retest": "#ef8f00", "untested": "#9e9e9e"}


class ReportError(Exception):
    pass


def load_analysis(run: str) -> tuple[dict, str]:
    """Accept a run directory (with analysis.json) or the analysis JSON file itself."""
    path = os.path.join(run, "analysis.json") if os.path.isdir(run) else run
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise ReportError(f"{path}: no analysis found (run `slurmqual burnin analyze` first)") from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read analysis: {exc}") from None
    for key in ("median", "threshold", "nodes"):
        if key not in data:
            raise ReportError(f"{path}: not a slurmqual analysis (missing {key!r})")
    return data, path


def _reference_median(analysis: dict) -> tuple[str, float | None]:
    medians = {k: v for k, v in analysis.get("median", {}).items() if v is not None}
    if not medians:
        return "", None
    for preferred in ("pair", "all_reduce", "group", "intra"):
        if preferred in medians:
            return preferred, medians[preferred]
    kind = sorted(medians)[0]
    return kind, medians[kind]


def render_chart_svg(analysis: dict) -> str:
    """Every node's score, sorted, with the fleet median and threshold lines."""
    import matplotlib

    matplotlib.use("svg", force=True)
    import matplotlib.pyplot as plt

    nodes = sorted(
        ((n, v) for n, v in analysis["nodes"].items() if v.get("score") is not None),
        key=lambda item: item[1]["score"],
    )
    kind, median = _reference_median(analysis)
    threshold = float(analysis.get("threshold", 0.9))
    width = min(max(6.0, 0.18 * len(nodes) + 2), 40.0)
    fig, ax = plt.subplots(figsize=(width, 4.0))
    xs = range(len(nodes))
    colours = [VERDICT_COLOURS.get(v.get("verdict"), "#607d8b") for _n, v in nodes]
    on_link = {n for link in analysis.get("suspect_links", []) for n in link}
    drained = set(analysis.get("drain", []))
    bars = ax.bar(list(xs), [v["score"] for _n, v in nodes], color=colours, width=0.8)
    for bar, (name, _v) in zip(bars, nodes):
        if name in drained:
            bar.set_edgecolor("black")
            bar.set_linewidth(1.5)
        elif name in on_link:
            bar.set_hatch("//")  # one end of a suspect link: shown, not drained
    if median is not None:
        ax.axhline(median, color="#1565c0", linewidth=1.2, label=f"fleet median {median:.1f} GB/s ({kind})")
        ax.axhline(threshold * median, color="#c62828", linestyle="--", linewidth=1.2,
                   label=f"{threshold:.0%} of median: {threshold * median:.1f} GB/s")
    if len(nodes) <= 64:
        ax.set_xticks(list(xs), [n for n, _v in nodes], rotation=90, fontsize=7)
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(nodes)} nodes, sorted by score")
    ax.set_ylabel("bus bandwidth score (GB/s)")
    ax.set_title("Burn-in: node scores vs fleet median")
    if median is not None:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog and DOCTYPE: inline in HTML


def render_html(analysis: dict, title: str) -> str:
    esc = html.escape
    kind, median = _reference_median(analysis)
    threshold = float(analysis.get("threshold", 0.9))
    nodes = analysis["nodes"]
    counts: dict[str, int] = {}
    for v in nodes.values():
        counts[v.get("verdict", "?")] = counts.get(v.get("verdict", "?"), 0) + 1
    drain = set(analysis.get("drain", []))
    links = analysis.get("suspect_links", [])
    rows = []
    for name, v in sorted(nodes.items(), key=lambda item: (item[1].get("score") is None, item[1].get("score") or 0)):
        score = v.get("score")
        rel = f"{score / median:.1%}" if score is not None and median else "-"
        cls = "drain" if name in drain else v.get("verdict", "")
        rows.append(
            f'<tr class="{esc(cls)}"><td>{esc(name)}</td><td>{esc(str(v.get("verdict", "")))}</td>'
            f'<td>{"-" if score is None else f"{score:.2f}"}</td><td>{rel}</td>'
            f'<td>{"yes" if name in drain else ""}</td></tr>'
        )
    guard = ""
    if analysis.get("guard_tripped"):
        guard = ('<p class="guard">Blast-radius guard tripped: too many nodes would have been drained; '
                 'none were. Suspect a fabric-wide problem (spine, switch firmware, congestion control).</p>')
    summary = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
    median_s = f"{median:.2f} GB/s ({esc(kind)})" if median is not None else "n/a"
    link_items = "".join(f"<li>{esc(a)} &harr; {esc(b)}</li>" for a, b in links) or "<li>none</li>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 2px 8px; text-align: left; }}
tr.fail td, tr.drain td {{ background: #ffebee; }} tr.retest td {{ background: #fff3e0; }}
tr.untested td {{ color: #777; }} .guard {{ background: #fff3e0; padding: 0.5em; border: 1px solid #ef8f00; }}
</style></head><body>
<h1>{esc(title)}</h1>
<p>Generated {esc(time.strftime("%Y-%m-%d %H:%M:%S %Z"))}. Fleet median {median_s};
threshold {threshold:.0%}. Nodes: {len(nodes)} ({esc(summary)}). Drained: {len(drain)}.</p>
{guard}
<div id="chart">{render_chart_svg(analysis)}</div>
<h2>Suspect links (drain nothing)</h2><ul id="links">{link_items}</ul>
<h2>Nodes</h2>
<table id="nodes"><thead><tr><th>node</th><th>verdict</th><th>score GB/s</th><th>vs median</th><th>drained</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
</body></html>
"""


def write_report(run: str, out: str) -> str:
    analysis, path = load_analysis(run)
    title = f"slurmqual burn-in {os.path.basename(os.path.dirname(os.path.abspath(path)))}"
    page = render_html(analysis, title)
    tmp = f"{out}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, out)
    return out


def main(args) -> int:
    try:
        out = write_report(args.run, args.html)
    except ReportError as exc:
        print(f"slurmqual: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0
