"""`slurmqual burnin report RUN --html FILE`: one self-contained HTML page
for a burn-in run, to open in a browser or attach to a ticket.

Every number is read from analysis.json, and every "vs median" uses the
analysis' own answer to "which median judges this node"
(`analyze.median_for`), so the page, `status`, the drain reason and the
metrics never disagree. One chart per measurement key (test:topology),
drawn by matplotlib (SVG backend) and embedded inline: the page needs no
network, no JavaScript and no other file. The legend sits beside the plot,
never over the bars.
"""

from __future__ import annotations

import html
import io
import os
import sys
import time

from ..judge.analyze import median_for
from ..judge.components import suspect_parts
from ..judge.gpus import entry_label as gpu_label
from ..records import split_key

VERDICT_COLOURS = {"pass": "#4c9a2a", "fail": "#c62828", "retest": "#ef8f00", "untested": "#9e9e9e"}


class ReportError(Exception):
    pass


def load_analysis(run: str) -> tuple[dict, str]:
    """Accept a run directory (with analysis.json) or the analysis JSON file itself."""
    from .rundir import RunDirError, analysis_path, read_analysis

    path = analysis_path(run) if os.path.isdir(run) else run
    try:
        data = read_analysis(path)
    except RunDirError as exc:
        raise ReportError(f"cannot read analysis: {exc}") from None
    if data is None:
        raise ReportError(f"{path}: no analysis found (run `slurmqual burnin analyze` first)")
    for key in ("median", "threshold"):
        if key not in data:
            raise ReportError(f"{path}: not a slurmqual analysis (missing {key!r})")
    return data, path


def chart_keys(analysis: dict) -> list[str]:
    """The keys that get a chart: every key nodes were judged under, pair keys first."""
    keys = set(analysis.get("median", {}))
    for v in analysis["nodes"].values():
        keys.update((v.get("keys") or {}).keys())
    # per-GPU keys: their GPUs are in the GPU table (a bar per GPU of the fleet would be unreadable)
    keys = {k for k in keys if analysis["median"].get(k) is not None and split_key(k)[1] != "gpu"}
    return sorted(keys, key=lambda k: (split_key(k)[1] != "pair", k))


def _key_scores(analysis: dict, key: str) -> list[tuple[str, str, float]]:
    """(node, verdict under this key, score under this key), sorted by score."""
    out = []
    for n, v in analysis["nodes"].items():
        kv = (v.get("keys") or {}).get(key)
        if kv is None and not v.get("keys") and v.get("score") is not None and median_for(analysis, n)[0] == key:
            kv = v  # an analysis from before keys: its one score
        if kv is not None and kv.get("score") is not None:
            out.append((n, kv.get("verdict", v.get("verdict")), float(kv["score"])))
    return sorted(out, key=lambda x: x[2])


def chart_figure(analysis: dict, key: str):
    """The matplotlib figure for one key: node scores, the key's median and line."""
    try:
        import matplotlib
    except ModuleNotFoundError:  # a head-node-only extra: compute nodes install without it
        raise ReportError("the report chart needs matplotlib: pip install 'slurmqual[report]'") from None

    matplotlib.use("svg", force=True)
    import matplotlib.pyplot as plt

    nodes = _key_scores(analysis, key)
    median = analysis["median"][key]
    threshold = float(analysis.get("threshold", 0.9))
    width = min(max(7.0, 0.18 * len(nodes) + 4), 40.0)
    fig, ax = plt.subplots(figsize=(width, 4.2))
    xs = list(range(len(nodes)))
    on_link = {n for link in analysis.get("suspect_links", []) for n in link}
    drained = set(analysis.get("drain", []))
    bars = ax.bar(xs, [s for _n, _v, s in nodes], color=[VERDICT_COLOURS.get(v, "#607d8b") for _n, v, _s in nodes],
                  width=0.8)
    for bar, (name, _v, _s) in zip(bars, nodes):
        if name in drained:
            bar.set_edgecolor("black")
            bar.set_linewidth(1.5)
        elif name in on_link and split_key(key)[1] == "pair":
            bar.set_hatch("//")  # one end of a suspect link: shown, not drained
    ax.axhline(median, color="#1565c0", linewidth=1.2, label=f"fleet median {median:.1f} GB/s")
    ax.axhline(threshold * median, color="#c62828", linestyle="--", linewidth=1.2,
               label=f"{threshold:.0%} of median: {threshold * median:.1f} GB/s")
    for verdict, colour in VERDICT_COLOURS.items():
        if any(v == verdict for _n, v, _s in nodes):
            ax.bar([0], [0], color=colour, label=verdict)  # legend swatch only (zero height)
    if len(nodes) <= 64:
        ax.set_xticks(xs, [n for n, _v, _s in nodes], rotation=90, fontsize=7)
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(nodes)} nodes, sorted by score")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{key}: node scores vs fleet median")
    # Beside the axes, never over the bars.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0.0)
    fig.tight_layout()
    return fig


def render_chart_svg(analysis: dict, key: str | None = None) -> str:
    keys = chart_keys(analysis)
    key = key or (keys[0] if keys else None)
    if key is None:
        return "<p>no scores to chart</p>"
    fig = chart_figure(analysis, key)  # first: says which extra to install when matplotlib is missing
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog and DOCTYPE: inline in HTML


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


MAX_GPU_ROWS = 500  # GPUs listed (worst first); the rest are counted


def gpu_rows(analysis: dict) -> list[dict]:
    """Every GPU's entry of every test (nodes.NODE.gpus), worst first: verdict,
    then score against its key's median."""
    from ..judge.analyze import VERDICT_ORDER

    out = []
    for node, v in analysis["nodes"].items():
        for g, tests in (v.get("gpus") or {}).items():
            for e in tests.values():
                rel = e["score"] / e["median"] if e.get("score") is not None and e.get("median") else None
                out.append({**e, "node": node, "gpu": int(g), "vs_median": rel})
    return sorted(out, key=lambda e: (VERDICT_ORDER.index(e["verdict"]), e["vs_median"] is None,
                                      e["vs_median"] or 0, e["node"], e["gpu"], e["test"]))


def render_html(analysis: dict, title: str) -> str:
    esc = html.escape
    threshold = float(analysis.get("threshold", 0.9))

    def worst_gpu(v: dict) -> str:
        e = v.get("gpu")
        if not e:
            return "-"
        rel = f" {e['score'] / e['median']:.1%}" if e.get("score") is not None and e.get("median") else ""
        return f"{gpu_label(e)} {e['test']} {e['verdict']}{rel}"

    nodes = analysis["nodes"]
    counts: dict[str, int] = {}
    for v in nodes.values():
        counts[v.get("verdict", "?")] = counts.get(v.get("verdict", "?"), 0) + 1
    drain = set(analysis.get("drain", []))
    noise = analysis.get("noise") or {}
    keys_info = analysis.get("keys") or {}

    gpu_col = any(v.get("gpus") for v in nodes.values())  # runs with per-GPU tests: each node's worst GPU
    rows = []
    for name, v in sorted(nodes.items(), key=lambda item: (item[1].get("score") is None, item[1].get("score") or 0,
                                                            item[0])):
        score = v.get("score")
        key, median = median_for(analysis, name)
        rel = f"{score / median:.1%}" if score is not None and median else "-"
        cls = "drain" if name in drain else v.get("verdict", "")
        rows.append(
            f'<tr class="{esc(cls)}" data-node="{esc(name)}"><td>{esc(name)}</td>'
            f'<td class="verdict">{esc(str(v.get("verdict", "")))}</td>'
            f'<td class="key">{esc(key or "-")}</td><td class="score">{_num(score)}</td>'
            f'<td class="median">{_num(median)}</td><td class="rel">{rel}</td>'
            f'<td>{"yes" if name in drain else ""}</td>'
            + (f'<td class="gpu">{esc(worst_gpu(v))}</td>' if gpu_col else "") + '</tr>')

    med_rows = []
    for key, value in sorted(analysis.get("median", {}).items()):
        info = keys_info.get(key, {})
        line = info.get("line", threshold * value if value is not None else None)
        drain_line = info.get("drain_line_3", info.get("drain_line"))
        med_rows.append(
            f'<tr data-key="{esc(key)}"><td>{esc(key)}</td><td class="median">{_num(value)}</td>'
            f'<td class="noise">{_num(noise.get(key), "{:.2%}")}</td><td class="line">{_num(line)}</td>'
            f'<td class="drainline">{_num(drain_line)}</td></tr>')

    banners = []
    if analysis.get("guard_tripped"):
        would = ", ".join(analysis.get("would_drain", [])) or "-"
        banners.append('<p class="guard" id="guard">Blast-radius guard tripped: too many nodes would have been '
                       f'drained ({esc(would)}); none were. Suspect a fabric-wide problem (spine, switch firmware, '
                       'congestion control).</p>')
    interim = (analysis.get("retest") or {}).get("interim")
    if interim:
        banners.append(f'<p class="guard" id="interim">Interim analysis: the run is not finished ({esc(interim)}). '
                       'Verdicts may still change and untested nodes may yet be measured: the run\'s own analysis '
                       'gives its end.</p>')
    untested = ended_untested(analysis)
    if untested:
        banners.append(f'<p class="guard" id="untested">The run ended with {len(untested)} node(s) untested: '
                       'neither passed nor drained; burn them in again. '
                       + "; ".join(f"{esc(n)}: {esc(why)}" for n, why in untested.items()) + "</p>")
    if analysis.get("fleet_slowdown"):
        banners.append('<p class="guard" id="slowdown">Fleet-wide slowdown: '
                       f'{len(analysis.get("below_baseline", {}))} nodes are well below their own baselines; '
                       'baselines were not updated. Suspect the fabric, a driver/NCCL change or a bug.</p>')
    below = "".join(
        f'<tr data-node="{esc(n)}"><td>{esc(n)}</td><td class="gpu">{esc(gpu_label(b) if "gpu" in b else "-")}</td>'
        f'<td>{esc(b.get("key", "-"))}</td>'
        f'<td class="score">{_num(b["score"])}</td><td class="baseline">{_num(b["baseline"])}</td>'
        f'<td class="rel">{b["score"] / b["baseline"]:.1%}</td></tr>'
        for n, b in sorted(analysis.get("below_baseline", {}).items()))
    gpus = gpu_rows(analysis)
    gpu_counts: dict[str, int] = {}
    for e in gpus:
        gpu_counts[e["verdict"]] = gpu_counts.get(e["verdict"], 0) + 1
    flagged = [e for e in gpus if e["verdict"] != "pass"]
    gpu_table = "".join(
        f'<tr class="{esc(e["verdict"])}" data-node="{esc(e["node"])}" data-gpu="{e["gpu"]}"><td>{esc(e["node"])}</td>'
        f'<td>{esc(gpu_label(e))}</td><td>{esc(e.get("serial") or "-")}</td><td>{esc(e["test"])}</td>'
        f'<td class="verdict">{esc(e["verdict"])}</td><td class="score">{_num(e.get("score"))} {esc(e.get("unit", ""))}</td>'
        f'<td class="median">{_num(e.get("median"))}</td><td class="rel">{_num(e["vs_median"], "{:.1%}")}</td>'
        f'<td>{e.get("runs", 1)}</td><td>{esc(e.get("why", ""))}</td></tr>'
        for e in flagged[:MAX_GPU_ROWS])
    gpu_section = "" if not gpus else (
        f'<h2>GPUs</h2><p id="gpu-summary">{len(gpus)} GPU test results ('
        + esc(", ".join(f"{k}: {n}" for k, n in sorted(gpu_counts.items()))) + "); not passing"
        + (f" (the worst {MAX_GPU_ROWS} of {len(flagged)})" if len(flagged) > MAX_GPU_ROWS else "") + ":</p>"
        '<table id="gpus"><thead><tr><th>node</th><th>GPU</th><th>serial</th><th>test</th><th>verdict</th>'
        '<th>score</th><th>median</th><th>vs median</th><th>runs</th><th>why</th></tr></thead>'
        f"<tbody>{gpu_table}</tbody></table>")
    incomplete = "".join(f"<li>task {esc(str(t))}: did not finish; its untested nodes are reported untested</li>"
                         for t in analysis.get("incomplete_tasks", [])) or "<li>none</li>"
    plan = "".join(f"<li>round {i + 1}: " + ", ".join(f"{esc(a)} + {esc(b)}" for a, b in rnd) + "</li>"
                   for i, rnd in enumerate(analysis.get("retest_plan", []))) or "<li>none</li>"
    versions = "".join(f"<li>{esc(k)}: {esc(', '.join(v) or '-')}</li>"
                       for k, v in sorted((analysis.get("versions") or {}).items())) or "<li>not recorded</li>"
    parts = suspect_parts(analysis)
    # A link on a rail names the cable/route of that NIC (a per-rail link has three fields: it broke the old unpacking).
    links = "".join(f'<li data-rail="{esc(x["rail"] or "")}">{esc(x["a"])} &harr; {esc(x["b"])}'
                    + (f" on rail {esc(x['rail'])} (cable or route of that NIC)" if x["rail"] else "") + "</li>"
                    for x in parts["links"]) or "<li>none</li>"
    switch_rows = "".join(
        f'<tr data-switch="{esc(sw["switch"])}"><td>{esc(sw["switch"])}</td>'
        f'<td>{"uplinks (pairs leaving it)" if sw["kind"] == "uplinks" else "every path through it"}</td>'
        f'<td class="rel">{sw["factor"]:.0%}</td><td>{esc(", ".join(sw["keys"]))}</td>'
        f'<td class="nodes">{esc(", ".join(sw["nodes"]))}</td></tr>' for sw in parts["switches"])
    switches = ('<table id="switches"><thead><tr><th>switch</th><th>slow</th><th>vs fleet</th><th>keys (rails)</th>'
                f'<th>nodes behind it (none drained for it)</th></tr></thead><tbody>{switch_rows}</tbody></table>'
                if switch_rows else '<p id="switches">none</p>')
    nic_rows = "".join(f'<li data-node="{esc(n)}">{esc(n)}: {esc(", ".join(nics))}</li>'
                       for n, nics in parts["failed_nics"].items()) or "<li>none</li>"
    problems = "".join(f"<li>{esc(p)}</li>" for p in analysis.get("problems", [])) or "<li>none</li>"
    charts = "".join(f'<div class="chart" data-key="{esc(k)}">{render_chart_svg(analysis, k)}</div>'
                     for k in chart_keys(analysis))
    summary = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 1em; }} td, th {{ border: 1px solid #ccc; padding: 2px 8px; text-align: left; }}
tr.fail td, tr.drain td {{ background: #ffebee; }} tr.retest td {{ background: #fff3e0; }}
tr.untested td {{ color: #777; }} .guard {{ background: #fff3e0; padding: 0.5em; border: 1px solid #ef8f00; }}
.chart svg {{ max-width: 100%; height: auto; }}
</style></head><body>
<h1>{esc(title)}</h1>
<p id="summary">Generated {esc(time.strftime("%Y-%m-%d %H:%M:%S %Z"))}. Threshold {threshold:.0%} of the fleet median
of each test. Nodes: {len(nodes)} ({esc(summary)}). Drained: {len(drain)}.</p>
{''.join(banners)}
<h2>Fleet medians and noise</h2>
<table id="medians"><thead><tr><th>key (test:topology)</th><th>median GB/s</th><th>noise (sd)</th>
<th>line GB/s</th><th>drain below GB/s (3 partners)</th></tr></thead><tbody>{''.join(med_rows)}</tbody></table>
{charts}
<h2>Below their own baselines</h2>
<table id="below"><thead><tr><th>node</th><th>GPU</th><th>key</th><th>score</th><th>baseline</th><th>vs baseline</th></tr></thead>
<tbody>{below}</tbody></table>
<h2>Suspect switches (drain nothing)</h2>{switches}
<h2>Suspect links and cables (drain nothing)</h2><ul id="links">{links}</ul>
<h2>Failed NICs (the node is drained naming its NIC)</h2><ul id="nics">{nic_rows}</ul>
<h2>Incomplete tasks</h2><ul id="incomplete">{incomplete}</ul>
<h2>Retest plan</h2><ul id="retest">{plan}</ul>
<h2>Versions</h2><ul id="versions">{versions}</ul>
<h2>Problems</h2><ul id="problems">{problems}</ul>
<h2>Nodes</h2>
<table id="nodes"><thead><tr><th>node</th><th>verdict</th><th>judged by</th><th>score GB/s</th><th>median GB/s</th>
<th>vs median</th><th>drained</th>{"<th>worst GPU</th>" if gpu_col else ""}</tr></thead>
<tbody>{''.join(rows)}</tbody></table>
{gpu_section}
</body></html>
"""


def ended_untested(a: dict) -> dict[str, str]:
    """node -> why, for the nodes a run's final analysis leaves untested ({}
    for an analysis a retest round follows, or one not of a run directory)."""
    rt = a.get("retest") or {}
    return dict(rt.get("untested") or {}) if rt.get("final") else {}


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
