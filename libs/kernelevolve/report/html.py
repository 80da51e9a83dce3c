"""One self-contained HTML page per session: inline CSS, inline SVG, a few lines of inline
JavaScript, nothing fetched. The lineage tree and the charts are drawn here as SVG (no
plotting library ships offline with the project); diffs come from ``difflib.HtmlDiff``."""

from __future__ import annotations

import difflib
import json
import math
from datetime import UTC, datetime
from html import escape
from typing import Any

from kernelevolve.report.data import RunData

CPU_NOTE = ("Timings were taken on the CPU with Triton's interpreter: they check correctness and "
            "say nothing about GPU speed. Run on a CUDA GPU for real timings.")

COLOURS = {
    "correct": "#2e9d4f", "incorrect": "#d9822b", "rejected": "#8e44ad", "compile_error": "#c0392b",
    "runtime_error": "#e74c3c", "timeout": "#7f8c8d", "crashed": "#34495e", "pending": "#bdc3c7",
}


def status_of(node: dict[str, Any]) -> str:
    s = str(node.get("status") or "")
    s = s.removeprefix("EVALUATION_STATUS_").lower()
    if not node.get("evaluated") and s in ("", "unspecified"):
        return "pending"
    return s or "pending"


def tier_of(node: dict[str, Any]) -> str:
    """Which protocol the node's verdict rests on: "full", "screen (provisional)" (one input
    set and a short timing, no full verdict yet; never called best), "" while pending."""
    if not node.get("evaluated"):
        return ""
    if node.get("tier") == "screen" and not node.get("retimed"):
        return "screen (provisional)"
    return "full"


def _fmt(v: Any, digits: int = 4) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e4 or abs(v) < 1e-3:
            return f"{v:.3e}"
        return f"{v:.{digits}g}"
    return escape(str(v))


def _speedup(run: RunData, cid: str) -> float:
    node = run.node(cid) or {}
    if status_of(node) != "correct":
        return 0.0
    return float(node.get("fitness") or run.reports.get(cid, {}).get("speedup") or 0.0)


# -- lineage tree --------------------------------------------------------------------------


def _tree_svg(run: RunData) -> str:
    ids = {n["node_id"] for n in run.nodes}
    children: dict[str, list[str]] = {"": []}
    for n in run.nodes:
        parent = n.get("parent_id") or ""
        children.setdefault(parent if parent in ids else "", []).append(n["node_id"])
    pos: dict[str, tuple[float, int]] = {}
    counter = [0]

    def place(cid: str, depth: int) -> float:
        kids = children.get(cid, [])
        if not kids:
            x = float(counter[0])
            counter[0] += 1
        else:
            xs = [place(k, depth + 1) for k in kids]
            x = (xs[0] + xs[-1]) / 2
        pos[cid] = (x, depth)
        return x

    place("", 0)
    dx, dy, pad = 96, 92, 40
    width = max(6, counter[0]) * dx + 2 * pad
    height = max(d for _, d in pos.values()) * dy + 2 * pad + 24

    def xy(cid: str) -> tuple[float, float]:
        x, d = pos[cid]
        return pad + x * dx + dx / 2, pad + d * dy

    best = max((_speedup(run, c) for c in ids), default=0.0) or 1.0
    parts = [f'<svg id="tree" class="tree" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
             f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
             f'aria-label="lineage tree">']
    for parent, kids in children.items():
        px, py = xy(parent)
        for k in kids:
            kx, ky = xy(k)
            parts.append(f'<path class="edge" d="M{px:.1f},{py:.1f} C{px:.1f},{(py + ky) / 2:.1f} '
                         f'{kx:.1f},{(py + ky) / 2:.1f} {kx:.1f},{ky:.1f}"/>')
    rx, ry = xy("")
    parts.append(f'<g class="ref"><rect x="{rx - 38:.1f}" y="{ry - 14:.1f}" width="76" height="28" rx="6"/>'
                 f'<text x="{rx:.1f}" y="{ry + 4:.1f}">reference</text></g>')
    for n in run.nodes:
        cid = n["node_id"]
        x, y = xy(cid)
        status = status_of(n)
        sp = _speedup(run, cid)
        r = 9 + 11 * math.sqrt(sp / best) if sp > 0 else 8
        label = f"{sp:.3g}x" if sp > 0 else status.replace("_", " ")
        tname = (n.get("transformation") or {}).get("name", "")
        star = " best" if cid == run.best_id else ""
        parts.append(
            f'<g class="node{star}" data-cid="{escape(cid)}" data-status="{status}" tabindex="0">'
            f'<title>{escape(cid)}: {escape(tname)}, {status}{f", {sp:.4g}x" if sp else ""}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{COLOURS.get(status, "#999")}"/>'
            f'<text class="cid" x="{x:.1f}" y="{y - r - 5:.1f}">{escape(cid)}</text>'
            f'<text class="sp" x="{x:.1f}" y="{y + r + 14:.1f}">{escape(label)}</text></g>')
    parts.append("</svg>")
    legend = "".join(f'<span class="lg"><i style="background:{c}"></i>{s.replace("_", " ")}</span>'
                     for s, c in COLOURS.items() if any(status_of(n) == s for n in run.nodes))
    return f'<div class="legend">{legend} <span class="lg">size and label: speedup</span></div>' + "".join(parts)


# -- charts ---------------------------------------------------------------------------------


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        return [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    step = 10 ** math.floor(math.log10((hi - lo) or 1.0))
    if (hi - lo) / step < 4:
        step /= 2
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def _line_chart(chart_id: str, title: str, xlabel: str, series: list[tuple[float, float, str]],
                step_line: list[tuple[float, float]]) -> str:
    """Scatter of (x, y, candidate id) points plus a best-so-far step line, y on a log axis when
    the values span more than 20x."""
    w, h, ml, mr, mt, mb = 520, 260, 62, 16, 28, 40
    ys = [y for _, y, _ in series if y > 0] + [y for _, y in step_line if y > 0]
    if not ys:
        return (f'<svg id="{chart_id}" class="chart" width="{w}" height="80"><text x="10" y="40">'
                f'{escape(title)}: no correct candidate, nothing to plot</text></svg>')
    lo, hi = min(ys), max(ys)
    log = hi / lo > 20
    if log:
        lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
    else:
        lo, hi = 0.0, hi * 1.15
    xs = [x for x, _, _ in series] + [x for x, _ in step_line]
    xlo, xhi = min(xs), max(xs)
    if xhi == xlo:
        xhi = xlo + 1

    def sx(x: float) -> float:
        return ml + (x - xlo) / (xhi - xlo) * (w - ml - mr)

    def sy(y: float) -> float:
        f = (math.log10(y) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) if log else (y - lo) / (hi - lo)
        return h - mb - f * (h - mt - mb)

    out = [f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}"><text class="title" x="{ml}" y="16">{escape(title)}</text>']
    for t in _ticks(lo, hi, log):
        if lo <= t <= hi:
            out.append(f'<line class="grid" x1="{ml}" x2="{w - mr}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>'
                       f'<text class="tick" x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:.3g}x</text>')
    out.append(f'<line class="axis" x1="{ml}" x2="{w - mr}" y1="{h - mb}" y2="{h - mb}"/>'
               f'<line class="axis" x1="{ml}" x2="{ml}" y1="{mt}" y2="{h - mb}"/>'
               f'<text class="tick" x="{ml}" y="{h - mb + 16}">{xlo:.3g}</text>'
               f'<text class="tick" x="{w - mr}" y="{h - mb + 16}" text-anchor="end">{xhi:.3g}</text>'
               f'<text class="label" x="{(ml + w - mr) / 2}" y="{h - 6}" text-anchor="middle">{escape(xlabel)}</text>')
    if step_line:
        pts: list[str] = []
        prev: float | None = None
        for x, y in step_line:
            if y <= 0:
                continue
            if prev is not None:
                pts.append(f"{sx(x):.1f},{sy(prev):.1f}")
            pts.append(f"{sx(x):.1f},{sy(y):.1f}")
            prev = y
        if prev is not None:
            pts.append(f"{w - mr:.1f},{sy(prev):.1f}")
        out.append(f'<polyline class="curve" points="{" ".join(pts)}"/>')
    for x, y, cid in series:
        if y > 0:
            out.append(f'<circle class="pt" data-cid="{escape(cid)}" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5">'
                       f'<title>{escape(cid)}: {y:.4g}x</title></circle>')
    out.append("</svg>")
    return "".join(out)


def _curves(run: RunData) -> str:
    best = 0.0
    by_index: list[tuple[float, float, str]] = []
    step_i: list[tuple[float, float]] = []
    by_time: list[tuple[float, float, str]] = []
    step_t: list[tuple[float, float]] = []
    t0 = min(run.times.values()) if run.times else 0.0
    for i, n in enumerate(n for n in run.nodes if n.get("evaluated")):
        cid = n["node_id"]
        sp = _speedup(run, cid)
        best = max(best, sp)
        by_index.append((i + 1, sp, cid))
        step_i.append((i + 1, best))
        if cid in run.times:
            by_time.append((run.times[cid] - t0, sp, cid))
            step_t.append((run.times[cid] - t0, best))
    charts = [_line_chart("curve-candidates", "best speedup over candidates", "candidates evaluated",
                          by_index, step_i)]
    if by_time:
        charts.append(_line_chart("curve-time", "best speedup over time", "seconds since the first verdict",
                                  by_time, step_t))
    return '<div class="charts">' + "".join(charts) + "</div>"


def _timing_svg(report: dict[str, Any]) -> str:
    rows: list[tuple[str, dict[str, Any]]] = []
    for k in ("candidate", "baseline", "compile_baseline"):
        timing = report.get(f"{k}_timing")
        if isinstance(timing, dict) and timing.get("samples_ms"):
            rows.append((k, timing))
    if not rows:
        return "<p class='muted'>no timing samples (timings are taken for correct candidates only)</p>"
    vals = [float(v) for _, t in rows for v in t["samples_ms"] if float(v) > 0]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
    w, ml, mr, rh = 580, 120, 36, 34
    h = len(rows) * rh + 36

    def sx(v: float) -> float:
        return ml + (math.log10(v) - math.log10(lo)) / ((math.log10(hi) - math.log10(lo)) or 1) * (w - ml - mr)

    out = [f'<svg class="timing" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">']
    for tick in _ticks(lo, hi, True):
        out.append(f'<line class="grid" x1="{sx(tick):.1f}" x2="{sx(tick):.1f}" y1="4" y2="{h - 26}"/>'
                   f'<text class="tick" x="{sx(tick):.1f}" y="{h - 10}" text-anchor="middle">{tick:g} ms</text>')
    names = {"candidate": "candidate", "baseline": "eager PyTorch", "compile_baseline": "torch.compile"}
    for i, (k, t) in enumerate(rows):
        y = 10 + i * rh + rh / 2
        out.append(f'<text class="label" x="{ml - 8}" y="{y + 4:.1f}" text-anchor="end">{names[k]}</text>')
        for v in t["samples_ms"]:
            if float(v) > 0:
                out.append(f'<circle class="sample {k}" cx="{sx(float(v)):.1f}" cy="{y:.1f}" r="3"/>')
        med = float(t.get("median_ms") or 0)
        if med > 0:
            out.append(f'<line class="median" x1="{sx(med):.1f}" x2="{sx(med):.1f}" y1="{y - 10:.1f}" '
                       f'y2="{y + 10:.1f}"><title>median {med:.4g} ms</title></line>')
    out.append("</svg>")
    return "".join(out)


# -- per-candidate panels ------------------------------------------------------------------------


def _kv(rows: list[tuple[str, Any]]) -> str:
    return "<table class='kv'>" + "".join(f"<tr><th>{escape(k)}</th><td>{_fmt(v)}</td></tr>"
                                          for k, v in rows if v not in (None, "", [], {})) + "</table>"


def _diff(run: RunData, cid: str) -> str:
    node = run.node(cid) or {}
    parent = node.get("parent_id") or ""
    if not parent or parent not in run.sources:
        return "<p class='muted'>a seed candidate: no parent to compare with</p>"
    a, b = run.sources[parent].splitlines(), run.sources.get(cid, "").splitlines()
    if a == b:
        return f"<p class='muted'>same source as its parent {escape(parent)}</p>"
    table = difflib.HtmlDiff(wrapcolumn=80).make_table(a, b, f"parent {parent}", cid, context=True, numlines=3)
    return f"<div class='diff'>{table}</div>"


def _diagnosis(report: dict[str, Any]) -> str:
    d = report.get("diagnosis")
    if not isinstance(d, dict) or not d:
        return "<p class='muted'>no diagnosis (correct candidates only)</p>"
    frac = float(d.get("roofline_fraction") or 0.0)
    bar = ""
    if frac > 0:
        pct = min(100.0, frac * 100)
        bar = (f"<div class='bar'><div style='width:{pct:.1f}%'></div></div><p>{pct:.1f}% of the "
               f"{escape(str(d.get('bound', '')))} limit; {100 - pct:.1f}% left on the table</p>")
    elif report.get("interpreted"):
        bar = "<p class='muted'>no roofline fraction: interpreted CPU runs have no device peaks</p>"
    rows = [("bound", d.get("bound")), ("bytes moved", d.get("bytes_moved")), ("flops", d.get("flops")),
            ("achieved GB/s", d.get("achieved_gbps")), ("achieved GFLOP/s", d.get("achieved_gflops")),
            ("roofline fraction", d.get("roofline_fraction")),
            ("library time fraction", d.get("library_time_fraction"))]
    kernels = d.get("kernels") or []
    ktab = ""
    if kernels:
        ktab = ("<table class='grid'><tr><th>kernel</th><th>launches</th><th>ms</th><th>registers</th>"
                "<th>shared B</th><th>spills</th></tr>" + "".join(
                    f"<tr><td>{escape(str(k.get('name')))}</td><td>{_fmt(k.get('launches'))}</td>"
                    f"<td>{_fmt(k.get('time_ms'))}</td><td>{_fmt(k.get('registers'))}</td>"
                    f"<td>{_fmt(k.get('shared_bytes'))}</td><td>{_fmt(k.get('spills'))}</td></tr>" for k in kernels)
                + "</table>")
    notes = "".join(f"<li>{escape(str(n))}</li>" for n in d.get("notes") or [])
    return bar + _kv(rows) + ktab + (f"<ul>{notes}</ul>" if notes else "")


def _correctness(report: dict[str, Any]) -> str:
    c = report.get("correctness")
    if not isinstance(c, dict) or not c:
        return "<p class='muted'>no correctness figures</p>"
    # The figures of the tolerance policy (the evaluator's worker/tolerance.py): the bound
    # that decided and the candidate's error against float64 relative to eager's own.
    rows = [("input sets", c.get("trials")), ("max abs error", c.get("max_abs_error")),
            ("max rel error", c.get("max_rel_error")), ("atol", c.get("atol")), ("rtol", c.get("rtol")),
            ("bound", c.get("bound")), ("error vs float64", c.get("candidate_error")),
            ("reference's own error vs float64", c.get("reference_error")),
            ("error ratio (candidate / reference)", c.get("error_ratio")),
            ("outliers accepted", c.get("outliers") or None)]
    det = c.get("details") or []
    dtab = ""
    if det:
        dtab = ("<table class='grid'><tr><th>set</th><th>ok</th><th>max abs</th><th>max rel</th>"
                "<th>error ratio</th><th>bound</th></tr>" + "".join(
            f"<tr><td>{escape(str(d.get('set')))}</td><td>{'yes' if d.get('ok') else 'NO'}</td>"
            f"<td>{_fmt(d.get('max_abs_error'))}</td><td>{_fmt(d.get('max_rel_error'))}</td>"
            f"<td>{_fmt(d.get('error_ratio')) if d.get('error_ratio') is not None else ''}</td>"
            f"<td>{escape(str(d.get('bound') or ''))}</td></tr>" for d in det)
                + "</table>")
    return _kv(rows) + dtab


def _library_share(report: dict[str, Any]) -> str | None:
    """"n of m heavy ops": the reference's convolutions / matrix products per forward the
    candidate left to cuDNN / cuBLAS (the evaluator's evidence["library_share"])."""
    share = (report.get("evidence") or {}).get("library_share")
    if not isinstance(share, dict) or not share.get("heavy_ops"):
        return None
    return f"{share.get('library_calls', 0)} of {share['heavy_ops']} heavy ops"


def _candidate_panel(run: RunData, n: dict[str, Any]) -> str:
    cid = n["node_id"]
    rep = run.reports.get(cid, {})
    status = status_of(n)
    t = n.get("transformation") or {}
    params = ", ".join(f"{k}={v}" for k, v in sorted((t.get("params") or {}).items()))
    ct, bt = rep.get("candidate_timing") or {}, rep.get("baseline_timing") or {}
    head = [("verdict", status), ("tier", tier_of(n) or None), ("reason", rep.get("reason") or n.get("reason")),
            ("transformation", f"{t.get('name', '')}({params})"), ("parent", n.get("parent_id") or "reference"),
            ("depth", n.get("depth")), ("speedup vs eager", _speedup(run, cid) or None),
            ("first speedup (before re-timing)", n.get("first_fitness") if n.get("retimed") else None),
            ("evaluation redone after interrupted attempts", n.get("interrupted_evaluations") or None),
            ("speedup vs torch.compile", rep.get("speedup_vs_compile") or None),
            ("candidate median ms", ct.get("median_ms")), ("eager median ms", bt.get("median_ms")),
            ("library calls (conv / matmul)", _library_share(rep)), ("device", rep.get("device")),
            ("precision contract", (rep.get("precision") or {}).get("description")
             or (rep.get("precision") or {}).get("name"))]
    warnings = "".join(f"<li>{escape(str(w))}</li>" for w in rep.get("warnings") or [])
    errors = rep.get("errors") or rep.get("error") or ""
    err = f"<pre class='err'>{escape(json.dumps(errors, indent=1) if not isinstance(errors, str) else errors)}</pre>" \
        if errors else ""
    retime = run.retimes.get(cid)
    rt = ""
    if retime:
        rt = "<h4>Re-timing (fresh worker)</h4>" + _kv([("verdict", retime.get("status")),
                                                         ("speedup", retime.get("speedup")),
                                                         ("reason", retime.get("reason")),
                                                         ("precision contract",
                                                          (retime.get("precision") or {}).get("name"))])
    return (f"<section class='cand' id='cand-{escape(cid)}' data-cid='{escape(cid)}' hidden>"
            f"<h3><span class='dot' style='background:{COLOURS.get(status, '#999')}'></span>Candidate "
            f"{escape(cid)}{' (best)' if cid == run.best_id else ''}</h3>"
            + _kv(head) + (f"<ul class='warn'>{warnings}</ul>" if warnings else "") + err + rt
            + "<details open><summary>Correctness</summary>" + _correctness(rep) + "</details>"
            + "<details open><summary>Timing distribution</summary>" + _timing_svg(rep) + "</details>"
            + "<details open><summary>Roofline diagnosis</summary>" + _diagnosis(rep) + "</details>"
            + "<details open><summary>Diff against its parent</summary>" + _diff(run, cid) + "</details>"
            + "<details><summary>Source</summary><pre class='src'>" + escape(run.sources.get(cid, "(missing)"))
            + "</pre></details></section>")


def _table(run: RunData) -> str:
    rows = []
    for i, n in enumerate(run.nodes):
        cid = n["node_id"]
        t = n.get("transformation") or {}
        sp = _speedup(run, cid)
        rows.append(f"<tr class='row' data-cid='{escape(cid)}'><td>{i + 1}</td><td>{escape(cid)}</td>"
                    f"<td>{escape(n.get('parent_id') or 'reference')}</td><td>{escape(t.get('name', ''))}</td>"
                    f"<td><span class='dot' style='background:{COLOURS.get(status_of(n), '#999')}'></span>"
                    f"{status_of(n)}</td><td>{escape(tier_of(n))}</td><td>{f'{sp:.4g}x' if sp else ''}</td>"
                    f"<td class='reason'>{escape(str(n.get('reason', ''))[:140])}</td></tr>")
    return ("<table class='grid cands'><tr><th>#</th><th>id</th><th>parent</th><th>transformation</th>"
            "<th>verdict</th><th>tier</th><th>speedup</th><th>reason</th></tr>" + "".join(rows) + "</table>")


def _precision(run: RunData) -> tuple[str, str]:
    """(name, one line) of the session's precision contract: the summary's name, the flags
    the best's (else any) verdict states."""
    rep = run.reports.get(run.best_id) or next((r for r in run.reports.values() if r.get("precision")), {})
    rec = rep.get("precision") or {}
    name = str(run.summary.get("precision") or rec.get("name") or "strict (before precision contracts)")
    return name, str(rec.get("description") or name)


def _fingerprint(run: RunData) -> str:
    rep = run.reports.get(run.best_id) or next((r for r in run.reports.values() if r.get("fingerprint")), {})
    fp = rep.get("fingerprint") or {}
    return _kv(sorted(fp.items())) if fp else "<p class='muted'>no fingerprint recorded</p>"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d2b3a;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header .sub{opacity:.8}main{padding:16px 24px;max-width:1400px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:12px 16px;margin:0 0 16px}
.note{background:#fff6db;border:1px solid #f0d38a;border-radius:8px;padding:10px 14px;margin:0 0 16px}
.note.fail{background:#fde2e1;border-color:#f1a7a3}
.stats{display:flex;gap:24px;flex-wrap:wrap}.stat b{display:block;font-size:22px}
.tree-wrap{overflow:auto}svg text{font-size:11px;fill:#333}
.tree .edge{fill:none;stroke:#9aa5b1;stroke-width:1.5}.tree .node{cursor:pointer;outline:none}
.tree .node:focus-visible circle{stroke:#2e6fd9;stroke-width:4}
.tree .node circle{stroke:#fff;stroke-width:2}.tree .node.best circle{stroke:#f1c40f;stroke-width:4}
.tree .node.sel circle{stroke:#1d2b3a;stroke-width:4}.tree text{text-anchor:middle}
.tree .ref rect{fill:#e8ecf0;stroke:#9aa5b1}.legend .lg{margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:4px}
.charts{display:flex;gap:16px;flex-wrap:wrap}.chart .curve{fill:none;stroke:#2e6fd9;stroke-width:2}
.chart .pt{fill:#2e9d4f;cursor:pointer}.grid{stroke:#eef0f3}.axis{stroke:#888}.title{font-weight:600}
svg line.grid{stroke:#e3e6ea}.timing .sample.candidate{fill:#2e6fd9;opacity:.7}
.timing .sample.baseline{fill:#d9822b;opacity:.7}.timing .sample.compile_baseline{fill:#8e44ad;opacity:.7}
.timing .median{stroke:#000;stroke-width:2}table.grid{border-collapse:collapse;margin:6px 0}
table.grid td,table.grid th{border:1px solid #e1e4e8;padding:3px 8px;text-align:left;font-size:13px}
table.cands tr.row{cursor:pointer}table.cands tr.row:hover,table.cands tr.sel{background:#eef4ff}
table.kv th{text-align:left;padding:2px 12px 2px 0;color:#555;font-weight:500;vertical-align:top}
.dot{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:6px}
pre.src,pre.err{background:#0f1720;color:#e6edf3;padding:10px;border-radius:6px;overflow:auto;font-size:12px;
max-height:480px}.muted{color:#777}.bar{background:#eee;height:12px;border-radius:6px;width:320px}
.bar div{background:#2e9d4f;height:12px;border-radius:6px}details{margin:8px 0}summary{cursor:pointer;font-weight:600}
table.diff{font:12px monospace;border-collapse:collapse}.diff_add{background:#d7f5dd}.diff_chg{background:#fff2b3}
.diff_sub{background:#fbd3d3}td.diff_header{color:#888;text-align:right}.diff{overflow:auto}
#detail-empty{color:#777}.warn li{color:#8a5a00}
"""

JS = """
(function(){
  function show(cid){
    document.querySelectorAll('section.cand').forEach(function(s){s.hidden = s.dataset.cid !== cid;});
    document.querySelectorAll('.node, tr.row').forEach(function(e){e.classList.toggle('sel', e.dataset.cid === cid);});
    var empty = document.getElementById('detail-empty'); if (empty) empty.hidden = !!cid;
    var s = document.getElementById('cand-' + cid);
    if (s) {
      s.scrollIntoView({block: 'nearest'});
      if (history.replaceState) history.replaceState(null, '', '#' + cid);
    }
  }
  document.querySelectorAll('.node, tr.row, .pt').forEach(function(e){
    e.addEventListener('click', function(){ show(e.dataset.cid); });
    e.addEventListener('keydown', function(ev){ if (ev.key === 'Enter') show(e.dataset.cid); });
  });
  var h = decodeURIComponent(location.hash.slice(1));
  if (h && document.getElementById('cand-' + h)) show(h);
})();
"""


def render_html(run: RunData) -> str:
    s = run.summary
    status = str(s.get("status", "")).removeprefix("SESSION_STATUS_").lower() or "unknown"
    evaluated = [n for n in run.nodes if n.get("evaluated")]
    correct = [n for n in evaluated if status_of(n) == "correct"]
    best_sp = float(s.get("best_speedup") or max((_speedup(run, n["node_id"]) for n in correct), default=0.0))
    best_id = run.best_id
    hardware = next((str(r.get("device")) for r in run.reports.values() if r.get("device")), "")
    note = f"<div class='note' id='cpu-note'><b>Interpreter timings.</b> {escape(CPU_NOTE)}</div>" \
        if run.interpreted else ""
    if run.judged_shapes.get("description"):
        shapes = escape(str(run.judged_shapes["description"]))
        note += (f"<div class='note' id='shapes-note'><b>Shrunk shapes.</b> {shapes}: the spec is too large for "
                 "the CPU interpreter at its own size.</div>")
    for key, title in (("error", "The session failed"), ("common_failure", "Every candidate failed the same way")):
        if s.get(key):
            note += f"<div class='note fail' id='{key.replace('_', '-')}'><b>{title}:</b> {escape(str(s[key]))}</div>"
    contract = _precision(run)
    best_note = ""
    if best_id and s.get("best_retimed"):
        best_note = f" (re-timed; first {float(s.get('best_first_speedup') or 0.0):.4g}x)"
    stats = [("status", status), ("candidates", f"{len(evaluated)} evaluated of {s.get('budget', len(run.nodes))}"),
             ("correct", str(len(correct))),
             ("best", f"{best_id} {best_sp:.4g}x{best_note}" if best_id else "none"), ("device", hardware or "?"),
             ("precision", contract[0])]
    best_share = _library_share(run.reports.get(best_id, {}))
    if best_share:  # how much of the best candidate's heavy work cuDNN / cuBLAS do
        stats.append(("best's library calls", best_share))
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    panels = "".join(_candidate_panel(run, n) for n in run.nodes)
    data = json.dumps({"session_id": run.session_id, "candidates": len(run.nodes), "best": best_id},
                      separators=(",", ":")).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>KernelEvolve session {escape(run.session_id)}: {escape(run.spec_name)}</title><style>{CSS}</style></head>
<body><header><h1>KernelEvolve session {escape(run.session_id)}</h1>
<div class="sub">operator <b>{escape(run.spec_name)}</b> · report written {generated}</div></header>
<main>{note}
<div class="card stats">{"".join(f'<div class="stat"><span>{k}</span><b>{escape(v)}</b></div>' for k, v in stats)}</div>
<div class="card" id="precision"><h2>Precision contract</h2><p>{escape(contract[1])}</p><p class="muted">The
reference, the eager and torch.compile baselines and every candidate ran under these float32 numerics; the float64
error budget is measured from that reference, so a candidate may use TF32 exactly where eager does. Speedups hold
under this contract only (<code>--precision default|strict|tf32</code>).</p></div>
<div class="card"><h2>Lineage</h2><p class="muted">Each node is a candidate; click one for its source, diff,
verdict, timings and diagnosis.</p><div class="tree-wrap">{_tree_svg(run)}</div></div>
<div class="card"><h2>Best speedup</h2><p class="muted">Speedup over eager PyTorch (correct candidates; the line is
the best so far).</p>{_curves(run)}</div>
<div class="card"><h2>Candidates</h2>{_table(run)}</div>
<div class="card" id="detail"><h2>Candidate details</h2><p id="detail-empty">Click a node in the tree or a row
in the table.</p>{panels}</div>
<div class="card"><h2>Environment fingerprint</h2>{_fingerprint(run)}</div>
<div class="card"><details><summary>Operator spec</summary><pre class="src">{escape(run.spec_source)}</pre>
</details></div>
</main><script type="application/json" id="ke-data">{data}</script><script>{JS}</script></body></html>
"""
