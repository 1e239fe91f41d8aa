"""The HTML report: one self-contained file (inline CSS and SVG, images as data:
URIs, a Content-Security-Policy that forbids any outside fetch) with the
header, summary table, plots, confusion difference, flipped-sample gallery and
provenance of one run. It renders rows already built by `summary_rows` and reads
only the latency sample files; it never loads per-sample outputs, recomputes a
comparison or changes a verdict.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from deploytool.report import png, svg
from deploytool.report.text import (MISSING, SCHEMA_VERSION, clean, counts_of, first_line, fmt_bytes, fmt_count,
                                    fmt_float, fmt_ms, fmt_pct, fmt_points, fmt_ratio, num, outcome, overall)
from deploytool.report.svg import esc

if TYPE_CHECKING:
    from deploytool.report import ReportInput

GALLERY_PER_ROW = 24
CONFUSION_TABLES_MAX = 12
CONFUSION_FULL_MAX_CLASSES = 12  # beyond this, show only the classes the flips touch
_STATUS_SHORT = {"conversion_failed": "conv ✗", "runtime_failed": "run ✗", "timeout": "timeout",
                 "device_error": "device ✗", "error": "error ✗", "unsupported": "unsupp.", "not_applicable": "n/a",
                 "delegate_refused": "refused", "interrupted": "interr.", "device_lost": "lost ✗",
                 "wrong_abi": "ABI ✗"}
_OUTCOME_FILL = {"pass": "#cdebd3", "degraded": "#ffe1a6", "fail": "#f3a9a9"}
_REQUEST_KEYS = ("frameworks", "formats", "quantize", "targets", "backends", "devices", "delegate", "target", "format")
_KEY_VERSIONS = ("tensorflow", "keras", "torch", "onnxruntime", "ai-edge-litert", "tf2onnx", "tensorflowjs",
                 "litert-torch", "numpy")

CSS = """
:root{--fg:#1b1f24;--mut:#5b6470;--line:#d5dae0;--soft:#eef1f4;--pass:#116329;--deg:#8a5300;--fail:#b42318;
--mono:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
*{box-sizing:border-box}
body{margin:0;background:#f4f5f7;color:var(--fg);font:13px/1.45 ui-sans-serif,system-ui,-apple-system,"Segoe UI",
Roboto,"DejaVu Sans",sans-serif}
main{max-width:1600px;margin:0 auto;padding:0 22px 40px}
header.top{background:#fff;border-bottom:1px solid var(--line);padding:14px 22px 10px;margin:0 -22px 0}
header.top h1{font-size:19px;margin:0 0 2px;font-weight:650;display:flex;gap:10px;align-items:center}
header.top .sub{color:var(--mut);margin-bottom:8px}
dl.meta{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:2px 14px;margin:0;font-size:12.5px}
dl.meta dt{color:var(--mut)} dl.meta dd{margin:0}
nav{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid var(--line);margin:0 -22px;
padding:5px 22px;font-size:12.5px}
nav a{margin-right:16px;color:#0b57d0;text-decoration:none} nav a:hover{text-decoration:underline}
h2{font-size:15px;font-weight:650;margin:26px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:13px;margin:14px 0 6px;font-weight:600}
.card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:10px 12px}
.muted,.caption{color:var(--mut)} .caption{font-size:12px;margin:4px 0 8px}
.mono,.n{font-family:var(--mono);font-variant-numeric:tabular-nums;font-size:12px}
.n{text-align:right;white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;background:#fff}
th,td{padding:3px 7px;border-bottom:1px solid #e7eaee;vertical-align:top}
thead th{background:var(--soft);font-weight:600;text-align:left;border-bottom:1px solid var(--line);
white-space:nowrap;font-size:12px}
table.summary thead th{cursor:pointer;user-select:none}
table.summary th,table.summary td{padding:3px 5px}
table.summary thead th.n{text-align:right}
table.summary tbody tr:hover{background:#f7f9fc}
table.summary td.why{min-width:240px;max-width:360px;font-size:11.5px;line-height:1.3}
table.summary tr.failing td:first-child{box-shadow:inset 3px 0 var(--fail)}
table.summary tr.degraded td:first-child{box-shadow:inset 3px 0 #d88f00}
table.summary tr.skipped td{color:var(--mut)}
td.neg{color:var(--fail)} td.pos{color:var(--pass)}
.pill{display:inline-block;padding:0 7px;border-radius:9px;font-size:11.5px;font-weight:600;white-space:nowrap;
border:1px solid transparent}
.pill.pass{background:#dafbe1;color:var(--pass)} .pill.degraded{background:#fff1c9;color:var(--deg)}
.pill.fail,.pill.failing{background:#ffe0de;color:var(--fail)} .pill.failing{border-color:#f3a9a9}
.pill.skip{background:#eceff2;color:#4b535c} .pill.big{font-size:13px;padding:1px 10px}
.reg{color:var(--fail);font-weight:700;margin-left:3px;cursor:help}
.warn{color:#b26b00;font-weight:700;margin-left:2px;cursor:help}
sup.fn{font-size:10px;color:#0b57d0;margin-left:1px}
abbr{text-decoration:underline dotted #98a1ab;cursor:help}
.counts span{margin-right:12px}
ul.attention{margin:6px 0 10px;padding-left:18px} ul.attention li{margin:1px 0}
ol.notes{margin:6px 0 0;padding-left:22px;font-size:12px;color:#333}
.plots{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.plots figure{margin:0} .plots figcaption{font-size:12px;color:var(--mut);max-width:600px;margin-top:4px}
svg.plot{background:#fff;border:1px solid var(--line);border-radius:6px;max-width:100%;height:auto}
.cm-grid{display:flex;flex-wrap:wrap;gap:14px}
table.cm td,table.cm th{padding:1px 4px;text-align:right;font-family:var(--mono);font-size:11.5px;min-width:26px;
border:1px solid #edf0f3}
table.cm th{background:var(--soft);font-weight:600} table.cm th.corner{font-family:inherit;font-size:10.5px;
color:var(--mut);text-align:left}
table.cm td.z{color:#c3c8ce} table.cm td.sup{color:var(--mut);border-left:2px solid var(--line)}
.gal-row{margin:10px 0 14px}
.gal{display:flex;flex-wrap:wrap;gap:6px}
figure.flip{margin:0;background:#fff;border:1px solid var(--line);border-radius:4px;padding:3px;width:92px}
figure.flip img{display:block;margin:0 auto;image-rendering:pixelated;max-width:84px;height:auto}
figure.flip figcaption{font-size:10.5px;line-height:1.3;margin-top:2px;font-family:var(--mono)}
figure.flip figcaption span{display:block;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
figure.flip.broke{border-color:#f3a9a9} figure.flip.fixed{border-color:#9fd8ab}
figure.flip .t{font-weight:700} figure.flip.broke .t{color:var(--fail)} figure.flip.fixed .t{color:var(--pass)}
table.kv th{text-align:left;font-weight:500;color:var(--mut);background:none;white-space:nowrap;
border-bottom:1px solid #eef0f2}
table.kv td{font-family:var(--mono);font-size:12px;overflow-wrap:anywhere;max-width:720px}
details.row{margin:3px 0;background:#fff;border:1px solid var(--line);border-radius:4px;padding:3px 8px}
details.row summary{cursor:pointer;font-size:12.5px}
.cols{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start} .cols>.card{max-width:100%}
footer{margin-top:30px;color:var(--mut);font-size:11.5px}
@media print{nav{display:none}}
"""

# Sorting is a convenience; the report reads fully without JavaScript.
JS = """
document.querySelectorAll('table.summary thead th').forEach(function(th,i){th.addEventListener('click',function(){
var tb=th.closest('table').tBodies[0],rows=Array.prototype.slice.call(tb.rows),d=th.dataset.dir==='a'?-1:1;
th.dataset.dir=d>0?'a':'d';function k(r){var c=r.cells[i],v=c.dataset.v;return v!==undefined?
(v===''?NaN:parseFloat(v)):c.textContent.trim().toLowerCase();}
rows.sort(function(a,b){var x=k(a),y=k(b);if(typeof x==='number'){if(isNaN(x))return 1;if(isNaN(y))return -1;
return d*(x-y);}return d*(x<y?-1:x>y?1:0);});rows.forEach(function(r){tb.appendChild(r);});});});
"""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


# ---------------------------------------------------------------- helpers
def _pill(row: dict[str, Any]) -> str:
    o = outcome(row)
    if row["status"] == "measured":
        cls = o
    else:
        cls = "failing" if row["failing"] else "skip"
    return f'<span class="pill {cls}">{esc(o)}</span>'


def _td(text: str, v: Any = None, cls: str = "n", title: str = "") -> str:
    f = num(v)
    dv = "" if f is None else f"{f:.10g}"  # cells without a finite number sort as empty
    t = f' title="{esc(title)}"' if title else ""
    return f'<td class="{cls}" data-v="{dv}"{t}>{text}</td>'


def _exact(v: Any) -> str:
    """A number in full (for a tooltip), or n/a when it is missing or not finite."""
    f = num(v)
    return MISSING if f is None else repr(v) if isinstance(v, (int, float)) else f"{f:.10g}"


def _where(row: dict[str, Any]) -> str:
    return row["target"] + (f":{row['backend']}" if row["backend"] else "") + (f"@{row['device']}" if row["device"] else "")


def _short(row: dict[str, Any], with_fw: bool) -> str:
    s = f"{row['format']}/{row['quantize']} {_where(row)}"
    return f"{row['framework']}→{s}" if with_fw else s


def _versions(inp: "ReportInput") -> dict[str, str]:
    out: dict[str, str] = {}
    host = inp.run_info.get("host")
    sources = [inp.run_info.get("versions"), host.get("versions") if isinstance(host, dict) else None]
    sources += [(b.get("provenance") or {}).get("versions") for b in inp.baselines.values()]
    for src in sources:
        if isinstance(src, dict):
            for k, v in src.items():
                out.setdefault(str(k), str(v))
    return out


def _host_text(inp: "ReportInput") -> str:
    host = inp.run_info.get("host")
    if isinstance(host, dict):
        parts = [host.get("hostname") or host.get("node"), host.get("cpu_model"),
                 f"{host['cpu_count']} CPUs" if host.get("cpu_count") else None, host.get("platform")]
        return " · ".join(str(p) for p in parts if p)
    prov = next((b.get("provenance") or {} for b in inp.baselines.values()), {})
    parts = [host, prov.get("cpu_model"), prov.get("platform")]
    return " · ".join(str(p) for p in parts if p) or "—"


def _plain(v: Any, key: str = "") -> str:
    """A value as a reader wants it: units from the key's suffix, lists joined, short floats."""
    if isinstance(v, bool) or v is None:
        return str(v).lower() if isinstance(v, bool) else "—"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if num(v) is None:  # NaN, ±inf
            return MISSING
        if key.endswith("_bytes"):
            return f"{fmt_bytes(v)} ({v:,.0f} B)" if abs(v) >= 1024 else fmt_bytes(v)
        if key.endswith("_ms"):
            return f"{fmt_ms(v)} ms"
        return f"{v:.6g}" if isinstance(v, float) else str(v)
    if isinstance(v, (list, tuple)):
        return ", ".join(_plain(x) for x in v) or "—"
    if isinstance(v, dict):
        return " · ".join(f"{k}: {_plain(x, str(k))}" for k, x in v.items()) or "—"
    return str(v)


def _value(v: Any, limit: int = 400, key: str = "") -> str:
    s = clean(_plain(v, key))
    return esc(s if len(s) <= limit else s[: limit - 1] + "…")


def _kv_table(d: dict[str, Any], cls: str = "kv") -> str:
    if not d:
        return '<p class="muted">none recorded</p>'
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{_value(v, key=str(k))}</td></tr>" for k, v in d.items())
    return f'<table class="{cls}"><tbody>{rows}</tbody></table>'


def _class_name(labels: list[str], i: int) -> str:
    return str(labels[i]) if 0 <= i < len(labels) else str(i)


# ---------------------------------------------------------------- sections
def _header(inp: "ReportInput", counts: dict[str, Any], versions: dict[str, str]) -> str:
    ov = overall(counts)
    cls = {"pass": "pass", "degraded": "degraded", "fail": "fail"}.get(ov, "skip")
    req = inp.run_info.get("request") or inp.run_info
    req_text = " · ".join(f"{esc(k)} <span class=mono>{_value(v, 120)}</span>" for k, v in req.items()
                          if k in _REQUEST_KEYS and v not in (None, "", [], ()))
    base = " &nbsp; ".join(
        f"<b>{esc(fw)}</b> <span class=mono>{fmt_pct(b.get('accuracy'))}</span> · p50 "
        f"<span class=mono>{fmt_ms((b.get('latency') or {}).get('p50_ms'))} ms</span> · "
        f"<span class=mono>{fmt_bytes(b.get('size_bytes'))}</span>"
        for fw, b in sorted(inp.baselines.items())) or "—"
    vers = " · ".join(f"{k} <span class=mono>{esc(versions[k])}</span>" for k in _KEY_VERSIONS if k in versions)
    return (f'<header class="top"><h1>{esc(inp.model)} <span class="muted" style="font-weight:400">on</span> '
            f'{esc(inp.dataset)} <span class="pill big {cls}">{esc(ov.upper())}</span></h1>'
            f'<div class="sub">deploytool migration report</div><dl class="meta">'
            f'<dt>Run</dt><dd class="mono">{esc(inp.run_id)}</dd>'
            f'<dt>Created</dt><dd class="mono">{esc(inp.run_info.get("created_at") or "—")}</dd>'
            f'<dt>Host</dt><dd>{esc(_host_text(inp))}</dd>'
            f'<dt>Samples</dt><dd class="mono">{len(inp.y_true)} · {len(inp.labels)} classes</dd>'
            f'<dt>Baseline</dt><dd>{base}</dd>'
            f'<dt>Request</dt><dd>{req_text or "—"}</dd>'
            f'<dt>Versions</dt><dd style="grid-column:span 3">{vers or "—"}</dd></dl></header>')


def _matrix(rows: list[dict[str, Any]]) -> str:
    cols = list(dict.fromkeys(_where(r) for r in rows))
    if len(cols) < 2:
        return ""
    names = list(dict.fromkeys(f"{r['framework']}→{r['format']}/{r['quantize']}" for r in rows))
    grid: list[list[svg.Cell | None]] = [[None] * len(cols) for _ in names]
    for r in rows:
        i, j = names.index(f"{r['framework']}→{r['format']}/{r['quantize']}"), cols.index(_where(r))
        o = outcome(r)
        if r["status"] == "measured":
            text, fill = fmt_points(r["accuracy_delta_points"]), _OUTCOME_FILL.get(o, "#e6e8eb")
        else:
            text, fill = _STATUS_SHORT.get(r["status"], r["status"][:8]), "#e0736f" if r["failing"] else "#e6e8eb"
        tip = f"{r['label']}: {o}" + (f" — {first_line(r['reason'], 300)}" if r["reason"] else "")
        grid[i][j] = svg.Cell(fill, text, tip, dark=r["failing"] and r["status"] != "measured")
    return ('<figure style="margin:8px 0"><figcaption class="caption">Matrix: accuracy change in points against the '
            'baseline (colour = verdict; grey = not run, red = failed to run). Hover a cell for details.'
            '</figcaption>' + svg.heatmap(grid, names, cols, title="verdict matrix") + "</figure>")


def _summary(inp: "ReportInput", rows: list[dict[str, Any]], counts: dict[str, Any]) -> str:
    out = ['<section id="summary"><h2>Summary</h2>']
    parts = [f"<b>{counts['rows']}</b> rows", f"<b>{counts['measured']}</b> measured",
             f'<span class="pill pass">{counts["pass"]} pass</span>',
             f'<span class="pill degraded">{counts["degraded"]} degraded</span>',
             f'<span class="pill fail">{counts["fail"]} fail</span>']
    parts += [f'<span class="pill {"failing" if s in _failing_statuses() else "skip"}">{n} {esc(s)}</span>'
              for s, n in counts["statuses"].items() if s != "measured"]
    if counts["regressions"]:
        parts.append(f'<span class="reg">↓ {counts["regressions"]} regressed since an earlier run</span>')
    out.append(f'<div class="counts">{"".join(f"<span>{p}</span>" for p in parts)}</div>')
    attention = [r for r in rows if r["failing"] or r["regression"]]
    if attention:
        items = []
        for r in attention:
            why = "; ".join(r["broken"]) if r["status"] == "measured" else first_line(r["reason"], 300)
            reg = f' <span class="reg">↓ {esc("; ".join(r["regression"]))}</span>' if r["regression"] else ""
            items.append(f'<li><span class="mono">{esc(r["label"])}</span> {_pill(r)} {esc(why)}{reg}</li>')
        out.append(f'<ul class="attention">{"".join(items)}</ul>')
    out.append(_matrix(rows))
    out.append(_summary_table(rows))
    out.append("</section>")
    return "".join(out)


def _failing_statuses() -> tuple[str, ...]:
    from deploytool.result import FAILING_STATUSES

    return FAILING_STATUSES


def _summary_table(rows: list[dict[str, Any]]) -> str:
    notes: dict[str, int] = {}
    mem_names: dict[str, str] = {}
    tolerance_sets: dict[str, list[str]] = {}
    body = []
    for i, r in enumerate(rows, 1):
        cls = ("failing" if r["failing"] else "degraded" if r["verdict"] == "degraded"
               else "skipped" if r["status"] != "measured" else "")
        d = r["accuracy_delta_points"]
        dcls = "n neg" if d is not None and d <= -0.005 else ("n pos" if d is not None and d >= 0.005 else "n")
        mem = fmt_bytes(r["memory_bytes"])
        mem_title, ratio_title, ratio_mark = "", "", ""
        if r["memory_figures"] and r["memory_bytes"] is not None:
            tgt, base = (list(r["memory_figures"]) + [None])[:2]
            pair = f"{tgt}" + (f" ÷ baseline {base}" if base else "")
            letter = mem_names.setdefault(pair, "abcdefghijklmnopqrstuvwxyz"[len(mem_names) % 26])
            mem_title = ratio_title = pair
            mem = f'{mem}<sup class="fn">{letter}</sup>'
            if base and base != tgt:
                ratio_title = f"not like for like: the target's {tgt} divided by the baseline's {base}"
                ratio_mark = '<span class="warn" title="figures of different kinds">≠</span>'
        if r["status"] == "measured":
            if r["broken"]:
                why = "<br>".join(_check_short(c) for c in r["checks"] if c.get("outcome") != "pass")
            elif r["checks"]:
                why = f'<span class="muted">all {len(r["checks"])} checks pass</span>'
            else:
                why = '<span class="muted">no tolerance checks</span>'
            checks_title = "\n".join(
                f"{c.get('metric')}: {_exact(c.get('value'))} (pass {_exact(c.get('pass_limit'))}, fail "
                f"{_exact(c.get('fail_limit'))}) → {c.get('outcome')}" for c in r["checks"])
            if r["tolerances"]:
                tolerance_sets.setdefault(json.dumps(r["tolerances"], sort_keys=True), []).append(r["label"])
        else:
            why = esc(first_line(r["reason"], 220)) or '<span class="muted">no reason recorded</span>'
            checks_title = clean(r["reason"])[:2000]
        if r.get("bundle"):
            why += f' <a class="bundle" href="{esc(r["bundle"])}/README.md" title="model, inputs and reproduce.py">reproducer</a>'
        marks = "".join(f'<sup class="fn">[{notes.setdefault(n, len(notes) + 1)}]</sup>' for n in r["notes"])
        reg = (f'<span class="reg" title="{esc("; ".join(r["regression"]))}">↓</span>' if r["regression"] else "")
        body.append(
            f'<tr class="{cls}"><td class="n" data-v="{i}">{i}</td><td>{esc(r["framework"])}</td>'
            f'<td>{esc(r["format"])}</td><td>{esc(r["quantize"])}</td><td>{esc(_where(r))}</td>'
            + _td(fmt_pct(r["accuracy"]), r["accuracy"])
            + _td(fmt_points(d), d, dcls)
            + _td(fmt_pct(r["agreement"]), r["agreement"])
            + _td(fmt_count(r["flipped_count"]), r["flipped_count"])
            + _td(fmt_float(r["max_abs_error"]), r["max_abs_error"])
            + _td(fmt_ms(r["p50_ms"]), r["p50_ms"]) + _td(fmt_ratio(r["latency_ratio_p50"]), r["latency_ratio_p50"])
            + _td(fmt_ms(r["p90_ms"]), r["p90_ms"]) + _td(fmt_ratio(r["latency_ratio_p90"]), r["latency_ratio_p90"])
            + _td(mem, r["memory_bytes"], title=mem_title)
            + _td(fmt_ratio(r["memory_ratio"]) + ratio_mark, r["memory_ratio"], title=ratio_title)
            + _td(fmt_bytes(r["size_bytes"]), r["size_bytes"]) + _td(fmt_ratio(r["size_ratio"]), r["size_ratio"])
            + f'<td>{_pill(r)}{reg}</td><td class="why" title="{esc(checks_title)}">{why}</td>'
            f'<td class="n">{marks}</td></tr>')
    heads = [("#", "n"), ("framework", ""), ("format", ""), ("quant", ""), ("target", ""), ("accuracy", "n"),
             ("Δ pts", "n"), ("agree", "n"), ("flips", "n"), ("max err", "n"), ("p50 ms", "n"), ("×", "n"),
             ("p90 ms", "n"), ("×", "n"), ("memory", "n"), ("×", "n"), ("size", "n"), ("×", "n"), ("result", ""),
             ("tolerance broken / reason", ""), ("notes", "")]
    thead = "".join(f'<th class="{c}">{esc(h)}</th>' for h, c in heads)
    out = [f'<div class="scroll card" style="padding:0"><table class="summary"><thead><tr>{thead}</tr></thead>'
           f'<tbody>{"".join(body)}</tbody></table></div>',
           '<p class="caption">× = ratio to the same framework\'s PC baseline (latency at batch 1 after warm-up; '
           'size on disk). Δ pts = accuracy change in percentage points. Click a column header to sort.</p>']
    if mem_names:
        items = "".join(f"<li><b>{letter}</b>: <span class=mono>{esc(name)}</span></li>"
                        for name, letter in mem_names.items())
        if any(r["memory_figures"] and len(r["memory_figures"]) > 1 and r["memory_figures"][1]
               and r["memory_figures"][0] != r["memory_figures"][1] for r in rows):
            items += ('<li><span class="warn">≠</span> the ratio divides figures of different kinds (e.g. a process '
                      "peak by a peak increase): read it as an order of magnitude at best</li>")
        out.append(f'<h3>Memory figures</h3><ul class="caption" style="list-style:none;padding-left:4px">{items}</ul>'
                   '<p class="caption">Each memory number is named for what was measured; its ratio divides it by the '
                   'baseline figure named after "÷" (hover a cell).</p>')
    if tolerance_sets:
        trs = []
        for key, labels in tolerance_sets.items():
            tol = json.loads(key)
            limits = "; ".join(f"{m}: pass {v[0]:g}, fail {v[1]:g}" for m, v in tol.items())
            trs.append(f'<tr><td class="mono">{esc(limits)}</td><td class="n">{len(labels)}</td>'
                       f'<td style="font-size:11.5px">{esc(", ".join(labels[:6]))}{" …" if len(labels) > 6 else ""}'
                       f"</td></tr>")
        out.append('<h3>Tolerances used</h3><table class="kv"><thead><tr><th>limits</th><th class="n">rows</th>'
                   f'<th>rows (first few)</th></tr></thead><tbody>{"".join(trs)}</tbody></table>')
    if notes:
        out.append('<h3>Notes</h3><ol class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ol>")
    return "".join(out)


def _check_short(c: dict[str, Any]) -> str:
    """`agreement 0.9625 degraded (pass ≥ 0.98, fail < 0.95)` — the value, its outcome and the limits it met."""
    from deploytool.spec import TOLERANCE_METRICS

    lower_is_better = TOLERANCE_METRICS.get(c.get("metric"), "max") == "max"
    op_pass, op_fail = ("≤", ">") if lower_is_better else ("≥", "<")
    g = lambda v: "n/a" if num(v) is None else f"{num(v):.4g}"  # noqa: E731
    o = c.get("outcome", "")
    return (f'{esc(c.get("metric"))} <b class="mono">{g(c.get("value"))}</b> <span class="pill {esc(o)}">{esc(o)}'
            f'</span> <span class="muted">(pass {op_pass} {g(c.get("pass_limit"))}, fail {op_fail} '
            f'{g(c.get("fail_limit"))})</span>')


def _load_samples(path: str | None) -> np.ndarray | None:
    if not path:
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None


def _plots(inp: "ReportInput", rows: list[dict[str, Any]], res_by_key: dict[str, Any]) -> str:
    measured = [r for r in rows if r["status"] == "measured"]
    with_fw = len({r["framework"] for r in rows}) > 1
    formats = list(dict.fromkeys(r["format"] for r in measured))
    targets = list(dict.fromkeys(_where(r) for r in measured))
    fcol = {f: svg.PALETTE[i % len(svg.PALETTE)] for i, f in enumerate(formats)}
    tshape = {t: svg.SHAPES[i % len(svg.SHAPES)] for i, t in enumerate(targets)}
    groups: Counter[tuple[float, float]] = Counter()
    pts = []
    for r in measured:
        if r["accuracy"] is None or not r["size_bytes"]:
            continue
        key = (round(r["size_bytes"]), round(100 * r["accuracy"], 6))
        groups[key] += 1
        pts.append((key, r))
    sizes = [r["size_bytes"] for _, r in pts] + [num(b.get("size_bytes")) or 0 for b in inp.baselines.values()]
    unit, div = next(((u, d) for u, d in (("MiB", 1 << 20), ("KiB", 1 << 10)) if max(sizes, default=0) >= 2 * d),
                     ("B", 1))
    points, labelled = [], set()
    for key, r in pts:
        label = ""
        if key not in labelled:
            labelled.add(key)
            extra = groups[key] - 1
            label = (f"{r['framework']}→" if with_fw else "") + f"{r['format']}/{r['quantize']}" + (
                f" +{extra}" if extra else "")
        points.append(svg.Point(r["size_bytes"] / div, 100 * r["accuracy"], label,
                                f"{r['label']}: {fmt_pct(r['accuracy'])}, {fmt_bytes(r['size_bytes'])}, {outcome(r)}",
                                fcol[r["format"]], tshape[_where(r)], alert=r["failing"]))
    for fw, b in sorted(inp.baselines.items()):
        if num(b.get("accuracy")) is not None and num(b.get("size_bytes")):
            points.append(svg.Point(float(b["size_bytes"]) / div, 100 * float(b["accuracy"]), f"{fw} baseline",
                                    f"{fw} baseline (PC): {fmt_pct(b['accuracy'])}, {fmt_bytes(b['size_bytes'])}",
                                    baseline=True))
    legend = ([("format", "", "none")] + [(f, fcol[f], "circle") for f in formats] + [("target", "", "none")]
              + [(t, "#666", tshape[t]) for t in targets] + [("PC baseline", "#111", "diamond")])
    scatter = svg.scatter(points, title="accuracy vs model size", x_label=f"model size on disk ({unit})",
                          y_label="accuracy (%)", y_fmt=lambda v: f"{v:.4g}", legend=legend)

    tcol = {t: svg.PALETTE[i % len(svg.PALETTE)] for i, t in enumerate(targets)}
    dists = []
    for fw, b in sorted(inp.baselines.items()):
        stats = _stats(_load_samples(b.get("latency_samples_path")), b.get("latency") or {})
        if stats:
            dists.append(svg.Distribution(f"{fw} baseline (pc)", stats[0], baseline=True, note=stats[1]))
    for r in measured:
        stats = _stats(_load_samples(r["latency_path"]), r)
        if stats:
            dists.append(svg.Distribution(_short(r, with_fw), stats[0], tcol[_where(r)], note=stats[1]))
    box = svg.boxplot(dists, title="latency distribution per row", x_label="latency per sample at batch 1 (ms)")
    return ('<section id="plots"><h2>Plots</h2><div class="plots">'
            f'<figure>{scatter}<figcaption>Accuracy against size on disk, one point per measured row (colour = '
            'format, shape = target, red ring = failing); ◆ = PC baseline. Coinciding points share one label '
            '("+n"); hover for each.</figcaption></figure>'
            f'<figure>{box}<figcaption>Per-sample latency of every measured row and the baselines, from the stored '
            'latency samples (rows without a sample file show their summary percentiles only).</figcaption></figure>'
            "</div></section>")


def _stats(samples: np.ndarray | None, summary: dict[str, Any]) -> tuple[dict[str, float], str] | None:
    if samples is not None and samples.size:
        s = svg.distribution_stats(samples)
        if s:
            return s, ""
    p50 = num(summary.get("p50_ms"))
    if p50 is None or not math.isfinite(p50):
        return None
    s = {"p50": p50}
    for k, src in (("p90", "p90_ms"), ("p99", "p99_ms"), ("min", "min_ms"), ("max", "max_ms")):
        v = num(summary.get(src))
        if v is not None and math.isfinite(v):
            s[k] = v
    return s, "summary only"


def _flips_of(row: dict[str, Any]) -> list[dict[str, int]]:
    return list(row["flipped"])


def _confusion(inp: "ReportInput", rows: list[dict[str, Any]], res_by_key: dict[str, Any]) -> str:
    with_flips = [(r, _flips_of(r)) for r in rows if r["status"] == "measured"]
    with_flips = sorted([(r, f) for r, f in with_flips if f], key=lambda rf: -len(rf[1]))
    out = ['<section id="confusion"><h2>Confusion difference against the baseline</h2>']
    if not with_flips:
        out.append('<p class="muted">No measured row changed any top-1 prediction: every confusion matrix equals '
                   "the baseline's.</p></section>")
        return "".join(out)
    out.append('<p class="caption">Target confusion minus baseline confusion (rows = true class, columns = predicted '
               'class), computed from the flipped samples. Green = better than the baseline (more correct on the '
               'diagonal, fewer of an error elsewhere), red = worse. Blank = no change. Worst rows first.</p>')
    n_cls = max(len(inp.labels), 1 + max((max(f["true_label"], f["baseline_pred"], f["target_pred"])
                                          for _, fl in with_flips for f in fl), default=0))
    support = np.bincount(np.asarray(inp.y_true, dtype=np.int64).ravel().clip(0), minlength=n_cls) \
        if len(inp.y_true) else np.zeros(n_cls, np.int64)
    out.append('<div class="cm-grid">')
    for r, flips in with_flips[:CONFUSION_TABLES_MAX]:
        diff = np.zeros((n_cls, n_cls), dtype=np.int64)
        for f in flips:
            diff[f["true_label"], f["target_pred"]] += 1
            diff[f["true_label"], f["baseline_pred"]] -= 1
        classes = list(range(n_cls))
        if n_cls > CONFUSION_FULL_MAX_CLASSES:
            classes = sorted({c for f in flips for c in (f["true_label"], f["baseline_pred"], f["target_pred"])})
        peak = max(int(np.abs(diff).max()), 1)
        broke = sum(f["baseline_pred"] == f["true_label"] for f in flips)
        fixed = sum(f["target_pred"] == f["true_label"] for f in flips)
        head = "".join(f'<th title="{esc(_class_name(inp.labels, c))}">{esc(_class_name(inp.labels, c)[:6])}</th>'
                       for c in classes)
        trs = []
        for i in classes:
            tds = []
            for j in classes:
                v = int(diff[i, j])
                if v == 0:
                    tds.append('<td class="z"></td>')
                    continue
                good = (v > 0) == (i == j)
                alpha = 0.18 + 0.62 * abs(v) / peak
                rgb = "26,127,55" if good else "198,40,40"
                tds.append(f'<td style="background:rgba({rgb},{alpha:.2f})" title="true {esc(_class_name(inp.labels, i))}'
                           f', predicted {esc(_class_name(inp.labels, j))}: {v:+d}">{v:+d}</td>')
            trs.append(f'<tr><th title="{esc(_class_name(inp.labels, i))}">{esc(_class_name(inp.labels, i)[:10])}</th>'
                       f'{"".join(tds)}<td class="sup">{int(support[i]) if i < len(support) else 0}</td></tr>')
        subset = (f" · {len(classes)} of {n_cls} classes (those the flips touch)" if len(classes) < n_cls else "")
        out.append(f'<div class="card"><h3 style="margin-top:0">{esc(r["label"])}</h3>'
                   f'<div class="caption">{len(flips)} flips: {broke} newly wrong, {fixed} newly right, '
                   f'{len(flips) - broke - fixed} wrong either way{subset}</div>'
                   f'<table class="cm" data-combo="{esc(r["combo_key"])}"><thead><tr><th class="corner">true \\ pred'
                   f'</th>{head}<th class="corner">n</th></tr></thead><tbody>{"".join(trs)}</tbody></table></div>')
    out.append("</div>")
    if len(with_flips) > CONFUSION_TABLES_MAX:
        rest = ", ".join(r["label"] for r, _ in with_flips[CONFUSION_TABLES_MAX:])
        out.append(f'<p class="caption">{len(with_flips) - CONFUSION_TABLES_MAX} more rows with flips not drawn: '
                   f"{esc(rest)} (their flip lists are in report.json).</p>")
    out.append("</section>")
    return "".join(out)


def _image(images: Any, index: int) -> np.ndarray | None:
    if images is None or not (0 <= index < len(images)):
        return None
    a = np.asarray(images[index])
    if a.ndim == 3 and a.shape[-1] not in (1, 3, 4) and a.shape[0] in (1, 3, 4):
        a = a.transpose(1, 2, 0)  # a channels-first sample
    return a if a.ndim == 2 or (a.ndim == 3 and a.shape[-1] in (1, 3, 4)) else None


def _gallery(inp: "ReportInput", rows: list[dict[str, Any]], res_by_key: dict[str, Any]) -> str:
    with_flips = [(r, _flips_of(r)) for r in rows if r["status"] == "measured"]
    with_flips = sorted([(r, f) for r, f in with_flips if f], key=lambda rf: -len(rf[1]))
    out = ['<section id="gallery"><h2>Flipped samples</h2>']
    if not with_flips:
        out.append('<p class="muted">No flipped samples.</p></section>')
        return "".join(out)
    out.append('<p class="caption">Samples whose top-1 prediction differs from the baseline, newly wrong first '
               f'(red), then wrong either way, then newly right (green); up to {GALLERY_PER_ROW} per row. '
               "Each shows the sample index, the true class, the baseline's prediction and the target's.</p>")
    cache: dict[int, tuple[str, int, int] | None] = {}
    for r, flips in with_flips:
        ordered = sorted(flips, key=lambda f: (0 if f["baseline_pred"] == f["true_label"] else
                                               (2 if f["target_pred"] == f["true_label"] else 1), f["index"]))
        figs = []
        for f in ordered[:GALLERY_PER_ROW]:
            idx = int(f["index"])
            if idx not in cache:
                img = _image(inp.images, idx)
                cache[idx] = png.thumbnail_uri(img) if img is not None else None
            kind = ("broke" if f["baseline_pred"] == f["true_label"] else
                    "fixed" if f["target_pred"] == f["true_label"] else "changed")
            t, b, p = (_class_name(inp.labels, f[k]) for k in ("true_label", "baseline_pred", "target_pred"))
            if cache[idx]:
                uri, w, h = cache[idx]
                pic = f'<img src="{uri}" width="{w}" height="{h}" alt="sample {idx}">'
            else:
                pic = '<div class="muted" style="height:56px">no image</div>'
            figs.append(f'<figure class="flip {kind}" title="#{idx}: true {esc(t)}, baseline {esc(b)}, target {esc(p)}">'
                        f'{pic}<figcaption><span class="muted">#{idx}</span><span>true {esc(t)}</span>'
                        f'<span>base {esc(b)}</span><span class="t">tgt {esc(p)}</span></figcaption></figure>')
        more = f" (showing {GALLERY_PER_ROW})" if len(flips) > GALLERY_PER_ROW else ""
        out.append(f'<div class="gal-row" data-combo="{esc(r["combo_key"])}"><h3>{esc(r["label"])} — '
                   f'{len(flips)} flipped{more}</h3><div class="gal">{"".join(figs)}</div></div>')
    out.append("</section>")
    return "".join(out)


def _provenance(inp: "ReportInput", rows: list[dict[str, Any]], res_by_key: dict[str, Any],
                versions: dict[str, str]) -> str:
    out = ['<section id="provenance"><h2>Provenance</h2><div class="cols">']
    info = {k: v for k, v in inp.run_info.items() if k not in ("versions", "host")}
    out.append(f'<div class="card"><h3 style="margin-top:0">Run</h3>{_kv_table(info)}</div>')
    host = inp.run_info.get("host")
    if host:
        facts = {k: v for k, v in host.items() if k != "versions"} if isinstance(host, dict) else {"host": host}
        out.append(f'<div class="card"><h3 style="margin-top:0">Host</h3>{_kv_table(facts)}</div>')
    out.append(f'<div class="card"><h3 style="margin-top:0">Versions</h3>{_kv_table(dict(sorted(versions.items())))}'
               "</div>")
    for fw, b in sorted(inp.baselines.items()):
        facts = {"accuracy": fmt_pct(b.get("accuracy")), "samples": b.get("num_samples"),
                 "latency": b.get("latency"), "memory_bytes": b.get("memory_bytes"),
                 "size_bytes": b.get("size_bytes"), "artifact_sha256": b.get("artifact_sha256"),
                 **{k: v for k, v in (b.get("provenance") or {}).items() if k != "versions"}}
        out.append(f'<div class="card"><h3 style="margin-top:0">Baseline: {esc(fw)}</h3>'
                   f"{_kv_table({k: v for k, v in facts.items() if v is not None})}</div>")
    out.append("</div><h3>Per row: artifact, environment, timings</h3>")
    for r in rows:
        art = {k: v for k, v in r["artifact"].items() if k not in ("notes",)}
        stage = r["stage_seconds"]
        stage_text = " · ".join(f"{k} {num(v):.3f} s" for k, v in stage.items() if num(v) is not None)
        body = ['<div class="cols" style="margin:6px 0">']
        body.append(f'<div><h3>Artifact</h3>{_kv_table(art)}</div>')
        body.append(f'<div><h3>Environment</h3>{_kv_table(r["environment"])}</div>')
        extra = {"memory_bytes": r["memory_by_name"] or None, "tolerances": r["tolerances"] or None,
                 "stage_seconds": stage_text or None, "load_ms": r["load_ms"],
                 "first_inference_ms": r["first_inference_ms"], "throughput_sps": r["throughput_sps"],
                 "mean_abs_error": r["mean_abs_error"], "outputs": r["outputs_path"],
                 "combo_key": r["combo_key"]}
        body.append(f'<div><h3>Measurement</h3>{_kv_table({k: v for k, v in extra.items() if v is not None})}</div>')
        if r["reason"]:
            body.append(f'<div style="flex-basis:100%"><h3>Reason</h3><pre class="mono" style="white-space:pre-wrap;'
                        f'margin:0;max-height:240px;overflow:auto">{esc(r["reason"][:8000])}</pre></div>')
        body.append("</div>")
        conv = " ".join(str(x) for x in (art.get("converter"), art.get("converter_version")) if x)
        line = " · ".join(x for x in (conv, stage_text) if x)
        out.append(f'<details class="row"><summary><span class="mono">{esc(r["label"])}</span> {_pill(r)} '
                   f'<span class="muted">{esc(line)}</span></summary>{"".join(body)}</details>')
    out.append("</section>")
    return "".join(out)


def render(inp: "ReportInput", rows: list[dict[str, Any]], started: float | None = None) -> str:
    t0 = started if started is not None else time.perf_counter()
    counts = counts_of(rows)
    versions = _versions(inp)
    res_by_key = {r.combo_key: r for r in inp.results}
    body = [_header(inp, counts, versions),
            '<nav><a href="#summary">Summary</a><a href="#plots">Plots</a><a href="#confusion">Confusion difference'
            '</a><a href="#gallery">Flipped samples</a><a href="#provenance">Provenance</a></nav>',
            _summary(inp, rows, counts), _plots(inp, rows, res_by_key), _confusion(inp, rows, res_by_key),
            _gallery(inp, rows, res_by_key), _provenance(inp, rows, res_by_key, versions)]
    from deploytool import __version__

    elapsed_ms = 1000 * (time.perf_counter() - t0)
    body.append(f'<footer>Generated by deploytool {esc(__version__)} in {elapsed_ms:.0f} ms · report schema '
                f'v{SCHEMA_VERSION} · self-contained: no external resources. Machine-readable: report.json; CI: '
                "summary.md, junit.xml.</footer>")
    title = f"deploytool · {inp.model} on {inp.dataset} · {inp.run_id}"
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{esc(title)}</title>'
            f'<style>{CSS}</style></head><body><main>{"".join(body)}</main><script>{JS}</script></body></html>\n')
