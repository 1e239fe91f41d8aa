"""The HTML report: one self-contained file (inline CSS, JS and SVG, images as
data: URIs, a Content-Security-Policy that forbids any outside fetch) with the
header, summary table, plots, confusion difference, flipped-sample gallery and
provenance of one run. Python here builds plain view data (numbers already
formatted, SVG strings from svg.py, thumbnails from png.py); the Jinja2
templates in templates/ lay it out, autoescaping everything but that SVG. It
reads a Result only in `_row_view`, loads only the latency sample files, and
never recomputes a comparison or changes a verdict.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from deploytool.report import png, svg
from deploytool.report.text import (MISSING, SCHEMA_VERSION, clean, counts_of, first_line, fmt_bytes, fmt_count,
                                    fmt_float, fmt_ms, fmt_pct, fmt_points, fmt_ratio, num, outcome, overall)

if TYPE_CHECKING:
    from deploytool.report import ReportInput
    from deploytool.result import Result

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
# Inline styles (style="" attributes, in SVG too) need 'unsafe-inline'; the one script is allowed by its hash only.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '{script_hash}'"


# ---------------------------------------------------------------- the one place a Result is read
def _row_view(result: "Result") -> dict[str, Any]:
    """What the page shows of one Result beyond its summary row: flips, artifact, environment, memory,
    timings and file paths. The only code in this module that reads a Result; templates read views."""
    d = result.details
    return {"combo_key": result.combo_key,
            "flipped": list((d.get("comparison") or {}).get("flipped") or []),
            "artifact": dict(d.get("artifact") or {}), "environment": dict(d.get("environment") or {}),
            "memory_by_name": d.get("memory_bytes"), "stage_seconds": dict(d.get("stage_seconds") or {}),
            "latency_path": d.get("latency_samples_path") or None, "outputs_path": result.outputs_path or None}


def _views(inp: "ReportInput", rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary rows (reading order) joined with their `_row_view` and the words every section shares."""
    details = {v["combo_key"]: v for v in map(_row_view, inp.results)}
    return [_shared(row, details[row["combo_key"]]) for row in rows]


def _shared(row: dict[str, Any], detail: dict[str, Any] | None = None) -> dict[str, Any]:
    o = outcome(row)
    pill = o if row["status"] == "measured" else "failing" if row["failing"] else "skip"
    return {**row, **(detail or {}), "where": _where(row), "outcome": o, "pill": pill}


# ---------------------------------------------------------------- templates and static files
@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("deploytool.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=_finalize, keep_trailing_newline=True)
    env.filters.update(fmt_pct=fmt_pct, fmt_points=fmt_points, fmt_ratio=fmt_ratio, fmt_ms=fmt_ms,
                       fmt_bytes=fmt_bytes, fmt_float=fmt_float, fmt_count=fmt_count, first_line=first_line,
                       sort_value=_sort_value, value=_value, g4=lambda v: MISSING if num(v) is None else f"{num(v):.4g}")
    return env


def _finalize(v: Any) -> Any:
    # Converter logs carry ANSI colour codes and control characters: no text reaches the page with them.
    from markupsafe import Markup

    return clean(v) if isinstance(v, str) and not isinstance(v, Markup) else v


@lru_cache(maxsize=None)
def _static(name: str) -> str:
    from importlib import resources

    return (resources.files("deploytool.report") / "static" / name).read_text(encoding="utf-8")


def _script_hash(js: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")


def _template(name: str, **context: Any) -> Any:
    from markupsafe import Markup

    return Markup(_environment().get_template(name).render(**context))


# ---------------------------------------------------------------- formatting helpers (filters)
def _sort_value(v: Any) -> str:
    f = num(v)
    return "" if f is None else f"{f:.10g}"  # cells without a finite number sort as empty


def _exact(v: Any) -> str:
    """A number in full (for a tooltip), or n/a when it is missing or not finite."""
    f = num(v)
    return MISSING if f is None else repr(v) if isinstance(v, (int, float)) else f"{f:.10g}"


def _where(row: dict[str, Any]) -> str:
    return row["target"] + (f":{row['backend']}" if row["backend"] else "") + (f"@{row['device']}" if row["device"] else "")


def _short(row: dict[str, Any], with_fw: bool) -> str:
    s = f"{row['format']}/{row['quantize']} {_where(row)}"
    return f"{row['framework']}→{s}" if with_fw else s


def _plain(v: Any, key: str = "") -> str:
    """A value as a reader wants it: units from the key's suffix, lists joined, short floats."""
    if isinstance(v, bool) or v is None:
        return str(v).lower() if isinstance(v, bool) else "—"
    if isinstance(v, (int, float)):
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


def _value(v: Any, limit: int = 400, key: Any = "") -> str:
    s = clean(_plain(v, str(key)))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _class_name(labels: list[str], i: int) -> str:
    return str(labels[i]) if 0 <= i < len(labels) else str(i)


# ---------------------------------------------------------------- header and provenance facts
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


def _header(inp: "ReportInput", counts: dict[str, Any], versions: dict[str, str]) -> dict[str, Any]:
    ov = overall(counts)
    req = inp.run_info.get("request") or inp.run_info
    return {
        "model": inp.model, "dataset": inp.dataset, "overall": ov,
        "overall_pill": ov if ov in ("pass", "degraded", "fail") else "skip",
        "run_id": inp.run_id, "created_at": inp.run_info.get("created_at") or "—", "host": _host_text(inp),
        "samples": len(inp.y_true), "classes": len(inp.labels),
        "request": [(k, _value(v, 120)) for k, v in req.items()
                    if k in _REQUEST_KEYS and v not in (None, "", [], ())],
        "baselines": [{"framework": fw, "accuracy": fmt_pct(b.get("accuracy")),
                       "p50_ms": fmt_ms((b.get("latency") or {}).get("p50_ms")), "size": fmt_bytes(b.get("size_bytes"))}
                      for fw, b in sorted(inp.baselines.items())],
        "versions": [(k, versions[k]) for k in _KEY_VERSIONS if k in versions],
    }


def _provenance(inp: "ReportInput", views: list[dict[str, Any]], versions: dict[str, str]) -> dict[str, Any]:
    cards = [("Run", {k: v for k, v in inp.run_info.items() if k not in ("versions", "host")})]
    host = inp.run_info.get("host")
    if host:
        cards.append(("Host", {k: v for k, v in host.items() if k != "versions"} if isinstance(host, dict)
                      else {"host": host}))
    cards.append(("Versions", dict(sorted(versions.items()))))
    for fw, b in sorted(inp.baselines.items()):
        facts = {"accuracy": fmt_pct(b.get("accuracy")), "samples": b.get("num_samples"),
                 "latency": b.get("latency"), "memory_bytes": b.get("memory_bytes"),
                 "size_bytes": b.get("size_bytes"), "artifact_sha256": b.get("artifact_sha256"),
                 **{k: v for k, v in (b.get("provenance") or {}).items() if k != "versions"}}
        cards.append((f"Baseline: {fw}", {k: v for k, v in facts.items() if v is not None}))
    details = []
    for v in views:
        art = {k: x for k, x in v["artifact"].items() if k != "notes"}
        stage_text = " · ".join(f"{k} {num(s):.3f} s" for k, s in v["stage_seconds"].items() if num(s) is not None)
        measurement = {"memory_bytes": v["memory_by_name"], "tolerances": v["tolerances"] or None,
                       "stage_seconds": stage_text or None, "load_ms": v["load_ms"],
                       "first_inference_ms": v["first_inference_ms"], "throughput_sps": v["throughput_sps"],
                       "mean_abs_error": v["mean_abs_error"], "outputs": v["outputs_path"], "combo_key": v["combo_key"]}
        conv = " ".join(str(x) for x in (art.get("converter"), art.get("converter_version")) if x)
        details.append({"row": v, "artifact": art, "line": " · ".join(x for x in (conv, stage_text) if x),
                        "measurement": {k: x for k, x in measurement.items() if x is not None}})
    return {"cards": cards, "rows": details}


# ---------------------------------------------------------------- summary
def _summary(rows: list[dict[str, Any]], views: list[dict[str, Any]], counts: dict[str, Any]) -> dict[str, Any]:
    from deploytool.result import FAILING_STATUSES

    attention = [{"row": v, "regression": "; ".join(v["regression"]),
                  "why": "; ".join(v["broken"]) if v["status"] == "measured" else first_line(v["reason"], 300)}
                 for v in views if v["failing"] or v["regression"]]
    return {"counts": counts, "attention": attention, "matrix": _matrix(views), "table": _summary_table(rows),
            "statuses": [(s, n, "failing" if s in FAILING_STATUSES else "skip")
                         for s, n in counts["statuses"].items() if s != "measured"]}


def _matrix(views: list[dict[str, Any]]) -> str:
    cols = list(dict.fromkeys(v["where"] for v in views))
    if len(cols) < 2:
        return ""
    names = list(dict.fromkeys(f"{v['framework']}→{v['format']}/{v['quantize']}" for v in views))
    grid: list[list[svg.Cell | None]] = [[None] * len(cols) for _ in names]
    for v in views:
        i, j = names.index(f"{v['framework']}→{v['format']}/{v['quantize']}"), cols.index(v["where"])
        if v["status"] == "measured":
            text, fill = fmt_points(v["accuracy_delta_points"]), _OUTCOME_FILL.get(v["outcome"], "#e6e8eb")
        else:
            text, fill = _STATUS_SHORT.get(v["status"], v["status"][:8]), "#e0736f" if v["failing"] else "#e6e8eb"
        tip = f"{v['label']}: {v['outcome']}" + (f" — {first_line(v['reason'], 300)}" if v["reason"] else "")
        grid[i][j] = svg.Cell(fill, text, tip, dark=v["failing"] and v["status"] != "measured")
    return svg.heatmap(grid, names, cols, title="verdict matrix")


def _summary_table(rows: list[dict[str, Any]]) -> str:
    """The sortable table of every row plus its footnotes (memory figures, tolerances used, notes)."""
    notes: dict[str, int] = {}
    mem_names: dict[str, str] = {}
    tolerance_sets: dict[str, list[str]] = {}
    lines = []
    for i, r in enumerate(rows, 1):
        v = _shared(r)
        d = v["accuracy_delta_points"]
        line = {"i": i, "row": v, "mem_letter": "", "mem_title": "", "ratio_title": "", "unlike": False,
                "cls": ("failing" if v["failing"] else "degraded" if v["verdict"] == "degraded"
                        else "skipped" if v["status"] != "measured" else ""),
                "delta_cls": "n neg" if d is not None and d <= -0.005 else "n pos" if d is not None and d >= 0.005
                else "n",
                "broken": [_check_view(c) for c in v["checks"] if c.get("outcome") != "pass"],
                "marks": [notes.setdefault(n, len(notes) + 1) for n in v["notes"]]}
        if v["memory_figures"] and v["memory_bytes"] is not None:
            tgt, base = (list(v["memory_figures"]) + [None])[:2]
            pair = f"{tgt}" + (f" ÷ baseline {base}" if base else "")
            line.update(mem_letter=mem_names.setdefault(pair, "abcdefghijklmnopqrstuvwxyz"[len(mem_names) % 26]),
                        mem_title=pair, ratio_title=pair)
            if base and base != tgt:
                line.update(unlike=True,
                            ratio_title=f"not like for like: the target's {tgt} divided by the baseline's {base}")
        if v["status"] == "measured":
            line["title"] = "\n".join(
                f"{c.get('metric')}: {_exact(c.get('value'))} (pass {_exact(c.get('pass_limit'))}, fail "
                f"{_exact(c.get('fail_limit'))}) → {c.get('outcome')}" for c in v["checks"])
            if v["tolerances"]:
                tolerance_sets.setdefault(json.dumps(v["tolerances"], sort_keys=True), []).append(v["label"])
        else:
            line.update(title=clean(v["reason"])[:2000], reason=first_line(v["reason"], 220))
        lines.append(line)
    tolerances = [("; ".join(f"{m}: pass {lim[0]:g}, fail {lim[1]:g}" for m, lim in json.loads(key).items()), labels)
                  for key, labels in tolerance_sets.items()]
    return _template("summary_table.html.j2", lines=lines, mem_names=mem_names, tolerances=tolerances,
                     notes=list(notes), any_unlike=any(line["unlike"] for line in lines))


def _check_view(c: dict[str, Any]) -> dict[str, Any]:
    """The words of `agreement 0.9625 degraded (pass ≥ 0.98, fail < 0.95)`: value, outcome and the limits it met."""
    from deploytool.spec import TOLERANCE_METRICS

    lower_is_better = TOLERANCE_METRICS.get(c.get("metric"), "max") == "max"
    op_pass, op_fail = ("≤", ">") if lower_is_better else ("≥", "<")
    return {"metric": c.get("metric"), "value": c.get("value"), "outcome": c.get("outcome", ""),
            "op_pass": op_pass, "op_fail": op_fail, "pass_limit": c.get("pass_limit"),
            "fail_limit": c.get("fail_limit")}


# ---------------------------------------------------------------- plots
def _load_samples(path: str | None) -> np.ndarray | None:
    if not path:
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None


def _plots(inp: "ReportInput", views: list[dict[str, Any]]) -> dict[str, str]:
    measured = [v for v in views if v["status"] == "measured"]
    with_fw = len({v["framework"] for v in views}) > 1
    formats = list(dict.fromkeys(v["format"] for v in measured))
    targets = list(dict.fromkeys(v["where"] for v in measured))
    fcol = {f: svg.PALETTE[i % len(svg.PALETTE)] for i, f in enumerate(formats)}
    tshape = {t: svg.SHAPES[i % len(svg.SHAPES)] for i, t in enumerate(targets)}
    groups: Counter[tuple[float, float]] = Counter()
    pts = []
    for v in measured:
        if v["accuracy"] is None or not v["size_bytes"]:
            continue
        key = (round(v["size_bytes"]), round(100 * v["accuracy"], 6))
        groups[key] += 1
        pts.append((key, v))
    sizes = [v["size_bytes"] for _, v in pts] + [num(b.get("size_bytes")) or 0 for b in inp.baselines.values()]
    unit, div = next(((u, d) for u, d in (("MiB", 1 << 20), ("KiB", 1 << 10)) if max(sizes, default=0) >= 2 * d),
                     ("B", 1))
    points, labelled = [], set()
    for key, v in pts:
        label = ""
        if key not in labelled:
            labelled.add(key)
            extra = groups[key] - 1
            label = (f"{v['framework']}→" if with_fw else "") + f"{v['format']}/{v['quantize']}" + (
                f" +{extra}" if extra else "")
        points.append(svg.Point(v["size_bytes"] / div, 100 * v["accuracy"], label,
                                f"{v['label']}: {fmt_pct(v['accuracy'])}, {fmt_bytes(v['size_bytes'])}, {v['outcome']}",
                                fcol[v["format"]], tshape[v["where"]], alert=v["failing"]))
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
    for v in measured:
        stats = _stats(_load_samples(v["latency_path"]), v)
        if stats:
            dists.append(svg.Distribution(_short(v, with_fw), stats[0], tcol[v["where"]], note=stats[1]))
    box = svg.boxplot(dists, title="latency distribution per row", x_label="latency per sample at batch 1 (ms)")
    return {"scatter": scatter, "box": box}


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


# ---------------------------------------------------------------- confusion difference and gallery
def _with_flips(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Measured rows that changed a prediction, most flips first."""
    return sorted((v for v in views if v["status"] == "measured" and v["flipped"]), key=lambda v: -len(v["flipped"]))


def _confusion(inp: "ReportInput", with_flips: list[dict[str, Any]]) -> dict[str, Any]:
    n_cls = max(len(inp.labels), 1 + max((max(f["true_label"], f["baseline_pred"], f["target_pred"])
                                          for v in with_flips for f in v["flipped"]), default=0))
    support = np.bincount(np.asarray(inp.y_true, dtype=np.int64).ravel().clip(0), minlength=n_cls) \
        if len(inp.y_true) else np.zeros(n_cls, np.int64)
    name = lambda c: _class_name(inp.labels, c)  # noqa: E731
    tables = []
    for v in with_flips[:CONFUSION_TABLES_MAX]:
        flips = v["flipped"]
        diff = np.zeros((n_cls, n_cls), dtype=np.int64)
        for f in flips:
            diff[f["true_label"], f["target_pred"]] += 1
            diff[f["true_label"], f["baseline_pred"]] -= 1
        classes = list(range(n_cls))
        if n_cls > CONFUSION_FULL_MAX_CLASSES:
            classes = sorted({c for f in flips for c in (f["true_label"], f["baseline_pred"], f["target_pred"])})
        peak = max(int(np.abs(diff).max()), 1)
        lines = []
        for i in classes:
            cells = []
            for j in classes:
                n = int(diff[i, j])
                rgb = "26,127,55" if (n > 0) == (i == j) else "198,40,40"  # green: better than the baseline
                cells.append(None if n == 0 else {"text": f"{n:+d}", "title": f"true {name(i)}, predicted {name(j)}: {n:+d}",
                                                  "style": f"background:rgba({rgb},{0.18 + 0.62 * abs(n) / peak:.2f})"})
            lines.append({"name": name(i), "cells": cells, "support": int(support[i]) if i < len(support) else 0})
        broke = sum(f["baseline_pred"] == f["true_label"] for f in flips)
        fixed = sum(f["target_pred"] == f["true_label"] for f in flips)
        tables.append({"row": v, "flips": len(flips), "broke": broke, "fixed": fixed, "either": len(flips) - broke - fixed,
                       "subset": f" · {len(classes)} of {n_cls} classes (those the flips touch)"
                       if len(classes) < n_cls else "",
                       "classes": [name(c) for c in classes], "lines": lines})
    return {"tables": tables, "rest": [v["label"] for v in with_flips[CONFUSION_TABLES_MAX:]]}


def _image(images: Any, index: int) -> np.ndarray | None:
    if images is None or not (0 <= index < len(images)):
        return None
    a = np.asarray(images[index])
    if a.ndim == 3 and a.shape[-1] not in (1, 3, 4) and a.shape[0] in (1, 3, 4):
        a = a.transpose(1, 2, 0)  # a channels-first sample
    return a if a.ndim == 2 or (a.ndim == 3 and a.shape[-1] in (1, 3, 4)) else None


def _gallery(inp: "ReportInput", with_flips: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cache: dict[int, tuple[str, int, int] | None] = {}
    out = []
    for v in with_flips:
        # newly wrong first, then wrong either way, then newly right
        ordered = sorted(v["flipped"], key=lambda f: (0 if f["baseline_pred"] == f["true_label"] else
                                                      (2 if f["target_pred"] == f["true_label"] else 1), f["index"]))
        figs = []
        for f in ordered[:GALLERY_PER_ROW]:
            idx = int(f["index"])
            if idx not in cache:
                img = _image(inp.images, idx)
                cache[idx] = png.thumbnail_uri(img) if img is not None else None
            figs.append({"index": idx, "thumb": cache[idx],
                         "kind": ("broke" if f["baseline_pred"] == f["true_label"] else
                                  "fixed" if f["target_pred"] == f["true_label"] else "changed"),
                         **{k: _class_name(inp.labels, f[src]) for k, src in
                            (("true", "true_label"), ("base", "baseline_pred"), ("target", "target_pred"))}})
        out.append({"row": v, "flips": len(v["flipped"]), "figs": figs})
    return out


# ---------------------------------------------------------------- the page
def render(inp: "ReportInput", rows: list[dict[str, Any]], started: float | None = None) -> str:
    from markupsafe import Markup

    from deploytool import __version__

    t0 = started if started is not None else time.perf_counter()
    counts = counts_of(rows)
    versions = _versions(inp)
    views = _views(inp, rows)
    with_flips = _with_flips(views)
    summary = _summary(rows, views, counts)
    plots = _plots(inp, views)
    # SVG from svg.py escapes its own text: it is the only markup the templates receive as such
    summary["matrix"] = Markup(summary["matrix"])
    plots = {k: Markup(s) for k, s in plots.items()}
    context = {"header": _header(inp, counts, versions), "summary": summary, "plots": plots,
               "confusion": _confusion(inp, with_flips), "gallery": _gallery(inp, with_flips),
               "gallery_per_row": GALLERY_PER_ROW, "provenance": _provenance(inp, views, versions)}
    js = _static("report.js")
    return str(_template(
        "report.html.j2", **context, title=f"deploytool · {inp.model} on {inp.dataset} · {inp.run_id}",
        css=Markup(_static("report.css")), js=Markup(js), csp=Markup(_CSP.format(script_hash=_script_hash(js))),
        version=__version__, schema_version=SCHEMA_VERSION, elapsed_ms=1000 * (time.perf_counter() - t0)))
