"""What the plots, the verdict matrix, the confusion difference and the
flipped-sample gallery of the HTML report show, built from the `ReportRow`s
`summary_rows` builds: SVG strings from svg.py,
PNG thumbnails from png.py and plain values for the templates. It loads only
the latency sample files; it never reads a Result, recomputes a comparison or
writes HTML.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from deploytool.report import png, svg, tasks
from deploytool.report.numbers import fmt_bytes, num
from deploytool.report.text import first_line

if TYPE_CHECKING:
    from deploytool.report import ReportInput
    from deploytool.report.rows import ReportRow
    from deploytool.report.tasks import Column, TaskView

GALLERY_PER_ROW = 24
CONFUSION_TABLES_MAX = 12
CONFUSION_FULL_MAX_CLASSES = 12  # beyond this, show only the classes the flips touch
_STATUS_SHORT = {"conversion_failed": "conv ✗", "runtime_failed": "run ✗", "load_failed": "load ✗", "timeout": "timeout",
                 "error": "error ✗", "unsupported": "unsupp.", "not_applicable": "n/a",
                 "delegate_refused": "refused", "interrupted": "interr.", "device_lost": "lost ✗",
                 "wrong_abi": "ABI ✗", "worker_lost": "worker ✗", "no_worker": "no worker"}
_OUTCOME_FILL = {"pass": "#cdebd3", "degraded": "#ffe1a6", "fail": "#f3a9a9"}


def _class_name(labels: list[str], i: int) -> str:
    return str(labels[i]) if 0 <= i < len(labels) else str(i)


def _short(row: "ReportRow", with_fw: bool) -> str:
    s = f"{row.format}/{row.quantize} {row.where}"
    return f"{row.framework}→{s}" if with_fw else s


# ---------------------------------------------------------------- verdict matrix and plots
def matrix(rows: list["ReportRow"], view: "TaskView | None" = None) -> str:
    """SVG heatmap, one cell per (conversion, place it ran): the task's headline number (a classifier's accuracy
    change, a regressor's RMSE change, raw outputs' smallest cosine) or why it did not run; "" if one column."""
    headline = (view or tasks.view_of(rows)).headline
    cols = list(dict.fromkeys(v.where for v in rows))
    if len(cols) < 2:
        return ""
    names = list(dict.fromkeys(f"{v.framework}→{v.format}/{v.quantize}" for v in rows))
    grid: list[list[svg.Cell | None]] = [[None] * len(cols) for _ in names]
    for v in rows:
        i, j = names.index(f"{v.framework}→{v.format}/{v.quantize}"), cols.index(v.where)
        if v.status == "measured":
            text, fill = tasks.text_of(headline, tasks.metric_of(v, headline.attr)), _OUTCOME_FILL.get(v.outcome, "#e6e8eb")
        else:
            text, fill = _STATUS_SHORT.get(v.status, v.status[:8]), "#e0736f" if v.failing else "#e6e8eb"
        tip = f"{v.label}: {v.outcome}" + (f" — {first_line(v.reason, 300)}" if v.reason else "")
        grid[i][j] = svg.Cell(fill, text, tip, dark=v.failing and v.status != "measured")
    return svg.heatmap(grid, names, cols, title="verdict matrix")


def _load_samples(path: str | None) -> np.ndarray | None:
    if not path:
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None


def plots(inp: "ReportInput", rows: list["ReportRow"], view: "TaskView | None" = None) -> dict[str, str]:
    """The Plots section's SVGs, by the run's task (deploytool.report.tasks): its quality metric against size
    ("scatter": accuracy for a classifier, RMSE for a regressor, the smallest cosine for raw outputs), per-sample
    latency per row ("box"), and where the view has one its per-row metric ("rows": a regressor's RMSE change)."""
    view = view or tasks.view_of(rows)
    out = {"scatter": _size_scatter(inp, rows, view), "box": _latency_box(inp, rows)}
    if view.row_metric is not None:
        out["rows"] = row_metric(rows, view.row_metric)
    return out


def _size_scatter(inp: "ReportInput", rows: list["ReportRow"], view: "TaskView") -> str:
    scale = 100.0 if view.size.percent else 1.0
    measured = [v for v in rows if v.status == "measured"]
    with_fw = len({v.framework for v in rows}) > 1
    formats = list(dict.fromkeys(v.format for v in measured))
    targets = list(dict.fromkeys(v.where for v in measured))
    fcol = {f: svg.PALETTE[i % len(svg.PALETTE)] for i, f in enumerate(formats)}
    tshape = {t: svg.SHAPES[i % len(svg.SHAPES)] for i, t in enumerate(targets)}
    groups: Counter[tuple[float, float]] = Counter()
    pts: list[tuple[tuple[float, float], "ReportRow", float, float]] = []
    for v in measured:
        metric = tasks.metric_of(v, view.size.attr)
        if metric is None or not v.size_bytes:
            continue
        key: tuple[float, float] = (round(v.size_bytes), round(scale * metric, 6))
        groups[key] += 1
        pts.append((key, v, v.size_bytes, metric))
    baselines = [(fw, value, size) for fw, b in sorted(inp.baselines.items())
                 if (size := num(b.get("size_bytes"))) and (value := tasks.baseline_value(view, fw, b, rows)) is not None]
    sizes = [size for _, _, size, _ in pts] + [size for _, _, size in baselines]
    unit, div = next(((u, d) for u, d in (("MiB", 1 << 20), ("KiB", 1 << 10)) if max(sizes, default=0) >= 2 * d),
                     ("B", 1))
    points, labelled = [], set()
    for key, v, size, metric in pts:
        label = ""
        if key not in labelled:
            labelled.add(key)
            extra = groups[key] - 1
            label = (f"{v.framework}→" if with_fw else "") + f"{v.format}/{v.quantize}" + (
                f" +{extra}" if extra else "")
        points.append(svg.Point(size / div, scale * metric, label,
                                f"{v.label}: {view.size.head} {tasks.text_of(view.size, metric)}, {fmt_bytes(size)}, {v.outcome}",
                                fcol[v.format], tshape[v.where], alert=v.failing))
    for fw, value, size in baselines:
        points.append(svg.Point(size / div, scale * value, f"{fw} baseline",
                                f"{fw} baseline (PC): {view.size.head} {tasks.text_of(view.size, value)}, {fmt_bytes(size)}",
                                baseline=True))
    legend = ([("format", "", "none")] + [(f, fcol[f], "circle") for f in formats] + [("target", "", "none")]
              + [(t, "#666", tshape[t]) for t in targets] + ([("PC baseline", "#111", "diamond")] if baselines else []))
    return svg.scatter(points, title=f"{view.size.head} vs model size", x_label=f"model size on disk ({unit})",
                       y_label=view.size_axis, y_fmt=lambda v: f"{v:.4g}", legend=legend)


def _latency_box(inp: "ReportInput", rows: list["ReportRow"]) -> str:
    measured = [v for v in rows if v.status == "measured"]
    with_fw = len({v.framework for v in rows}) > 1
    targets = list(dict.fromkeys(v.where for v in measured))
    tcol = {t: svg.PALETTE[i % len(svg.PALETTE)] for i, t in enumerate(targets)}
    dists = []
    for fw, b in sorted(inp.baselines.items()):
        stats = _stats(_load_samples(b.get("latency_samples_path")), b.get("latency") or {})
        if stats:
            dists.append(svg.Distribution(f"{fw} baseline (pc)", stats[0], baseline=True, note=stats[1]))
    for v in measured:
        stats = _stats(_load_samples(v.latency_path), {"p50_ms": v.p50_ms, "p90_ms": v.p90_ms, "p99_ms": v.p99_ms})
        if stats:
            dists.append(svg.Distribution(_short(v, with_fw), stats[0], tcol[v.where], note=stats[1]))
    return svg.boxplot(dists, title="latency distribution per row", x_label="latency per sample at batch 1 (ms)")


def row_metric(rows: list["ReportRow"], column: "Column") -> str:
    """SVG: one measured row's value of `column` (a regressor's RMSE change against the baseline) per point, at
    its # in the summary table, coloured by format; a percentage change is drawn in percent."""
    measured = [(i, v, x) for i, v in enumerate(rows, 1)
                if v.status == "measured" and (x := tasks.metric_of(v, column.attr)) is not None]
    formats = list(dict.fromkeys(v.format for _, v, _ in measured))
    col = {f: svg.PALETTE[i % len(svg.PALETTE)] for i, f in enumerate(formats)}
    scale = 100.0 if column.percent else 1.0
    points = [svg.Point(float(i), scale * x, f"#{i}", f"#{i} {v.label}: {column.head} {tasks.text_of(column, x)}",
                        col[v.format], alert=v.failing) for i, v, x in measured]
    return svg.scatter(points, title=f"{column.head} per row", x_label="row (# in the summary table)",
                       y_label=column.head + (" (%)" if scale != 1.0 else ""), x_log=False,
                       x_fmt=lambda x: f"{x:.0f}", y_fmt=lambda y: f"{y:.4g}",
                       legend=[("format", "", "none")] + [(f, col[f], "circle") for f in formats])


def output_errors(rows: list["ReportRow"]) -> str:
    """SVG: each output's largest error over its range, per measured row at its # in the summary table."""
    measured = [(i, v) for i, v in enumerate(rows, 1) if v.status == "measured" and v.outputs]
    if not measured:
        return ""
    names = list(dict.fromkeys(o.name for _, v in measured for o in v.outputs))
    col = {n: svg.PALETTE[i % len(svg.PALETTE)] for i, n in enumerate(names)}
    points = [svg.Point(float(i), max(float(o.rel_error), 1e-12), "",
                        f"#{i} {v.label} · {o.name}: error / range {o.rel_error:.3g}", col[o.name], "circle")
              for i, v in measured for o in v.outputs]
    return svg.scatter(points, title="per-output error", x_label="row (# in the summary table)",
                       y_label="max |error| / output range", x_log=False, x_fmt=lambda x: f"{x:.0f}",
                       legend=[("output", "", "none")] + [(n, col[n], "circle") for n in names])


def _stats(samples: np.ndarray | None, summary: dict[str, Any]) -> tuple[dict[str, float], str] | None:
    """The box of a latency distribution: from its samples, else from a summary's p50_ms (p90_ms, p99_ms, min_ms,
    max_ms when it has them: a baseline's latency summary does, a row only its percentiles)."""
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
def with_flips(rows: list["ReportRow"]) -> list["ReportRow"]:
    """Measured rows that changed a prediction, most flips first."""
    return sorted((v for v in rows if v.status == "measured" and v.flipped), key=lambda v: -len(v.flipped))


def confusion(inp: "ReportInput", flipped_rows: list["ReportRow"]) -> dict[str, Any]:
    """Target minus baseline confusion per row, computed from its flips alone; the first CONFUSION_TABLES_MAX rows."""
    n_cls = max(len(inp.labels), 1 + max((max(f.true_label, f.baseline_pred, f.target_pred)
                                          for v in flipped_rows for f in v.flipped), default=0))
    support = np.bincount(np.asarray(inp.y_true, dtype=np.int64).ravel().clip(0), minlength=n_cls) \
        if len(inp.y_true) else np.zeros(n_cls, np.int64)
    name = lambda c: _class_name(inp.labels, c)
    tables = []
    for v in flipped_rows[:CONFUSION_TABLES_MAX]:
        flips = v.flipped
        diff = np.zeros((n_cls, n_cls), dtype=np.int64)
        for f in flips:
            diff[f.true_label, f.target_pred] += 1
            diff[f.true_label, f.baseline_pred] -= 1
        classes = list(range(n_cls))
        if n_cls > CONFUSION_FULL_MAX_CLASSES:
            classes = sorted({c for f in flips for c in (f.true_label, f.baseline_pred, f.target_pred)})
        peak = max(int(np.abs(diff).max()), 1)
        lines = []
        for i in classes:
            cells: list[dict[str, str] | None] = []
            for j in classes:
                n = int(diff[i, j])
                if n == 0:
                    cells.append(None)
                    continue
                rgb = "26,127,55" if (n > 0) == (i == j) else "198,40,40"  # green: better than the baseline
                cells.append({"text": f"{n:+d}", "title": f"true {name(i)}, predicted {name(j)}: {n:+d}",
                              "style": f"background:rgba({rgb},{0.18 + 0.62 * abs(n) / peak:.2f})"})
            lines.append({"name": name(i), "cells": cells, "support": int(support[i]) if i < len(support) else 0})
        broke = sum(f.baseline_pred == f.true_label for f in flips)
        fixed = sum(f.target_pred == f.true_label for f in flips)
        tables.append({"row": v, "flips": len(flips), "broke": broke, "fixed": fixed,
                       "either": len(flips) - broke - fixed,
                       "subset": f" · {len(classes)} of {n_cls} classes (those the flips touch)"
                       if len(classes) < n_cls else "",
                       "classes": [name(c) for c in classes], "lines": lines})
    return {"tables": tables, "rest": [v.label for v in flipped_rows[CONFUSION_TABLES_MAX:]]}


def _image(images: Any, index: int) -> np.ndarray | None:
    if images is None or not (0 <= index < len(images)):
        return None
    a = np.asarray(images[index])
    if a.ndim == 3 and a.shape[-1] not in (1, 3, 4) and a.shape[0] in (1, 3, 4):
        a = a.transpose(1, 2, 0)  # a channels-first sample
    return a if a.ndim == 2 or (a.ndim == 3 and a.shape[-1] in (1, 3, 4)) else None


def _values(inputs: Any, index: int, shown: int = 8) -> str:
    """A sample of named inputs (tokens, features, a sequence) as text: each input's first values."""
    if inputs is None:
        return ""
    parts = []
    for name, a in inputs.items():
        v = np.asarray(a[index]).reshape(-1)
        head = " ".join(f"{x:.4g}" if a.dtype.kind == "f" else str(x) for x in v[:shown])
        parts.append(f"{name}: {head}{' …' if v.size > shown else ''}")
    return "; ".join(parts)


def outputs_table(rows: list["ReportRow"]) -> list[dict[str, Any]]:
    """Every output of every measured row against the baseline's (the view says when it is shown)."""
    return [{"row": v, "name": o.name, "shape": "×".join(str(d) for d in o.shape) or "1",
             "max_abs_error": o.max_abs_error, "rel_error": o.rel_error, "cosine_min": o.cosine_min,
             "cosine_mean": o.cosine_mean, "exact_match": o.exact_match,
             "scored": bool(v.scored_output) and o.name == v.scored_output}
            for v in rows if v.status == "measured" for o in v.outputs]


def regression_scatters(inp: "ReportInput", rows: list["ReportRow"], most: int = 12, points: int = 400) -> list[str]:
    """One scatter per measured row (a regressor's: the view says when): the row's first output value against the
    PC baseline's on the same samples (on the diagonal when they agree)."""
    out = []
    for v in [r for r in rows if r.status == "measured"][:most]:
        base = (inp.baselines.get(v.framework) or {}).get("outputs_path")
        got, ref = _load_samples(v.outputs_path), _load_samples(base)
        if got is None or ref is None or len(got) != len(ref):
            continue
        got, ref = got.reshape(len(got), -1)[:, 0], ref.reshape(len(ref), -1)[:, 0]
        idx = np.unique(np.linspace(0, len(got) - 1, num=min(points, len(got))).round().astype(int))
        pts = [svg.Point(float(ref[i]), float(got[i]), "", f"sample {i}: PC {ref[i]:.5g}, {v.where} {got[i]:.5g}",
                         svg.PALETTE[0], "circle") for i in idx]
        out.append(svg.scatter(pts, title=f"{v.label}: outputs against the PC baseline's",
                               x_label="PC baseline output", y_label=f"{v.format}/{v.quantize} output",
                               x_log=False))
    return out


def gallery(inp: "ReportInput", flipped_rows: list["ReportRow"]) -> list[dict[str, Any]]:
    """Up to GALLERY_PER_ROW flipped samples per row as PNG thumbnails with their three classes."""
    cache: dict[int, tuple[str, int, int] | None] = {}
    out = []
    for v in flipped_rows:
        # newly wrong first, then wrong either way, then newly right
        ordered = sorted(v.flipped, key=lambda f: (0 if f.baseline_pred == f.true_label else
                                                   (2 if f.target_pred == f.true_label else 1), f.index))
        figs = []
        for f in ordered[:GALLERY_PER_ROW]:
            idx = int(f.index)
            if idx not in cache:
                img = _image(inp.images, idx)
                cache[idx] = png.thumbnail_uri(img) if img is not None else None
            figs.append({"index": idx, "thumb": cache[idx], "values": _values(inp.inputs, idx),
                         "kind": ("broke" if f.baseline_pred == f.true_label else
                                  "fixed" if f.target_pred == f.true_label else "changed"),
                         # a test set without labels has no true class (-1)
                         "true": _class_name(inp.labels, f.true_label) if f.true_label >= 0 else "",
                         "base": _class_name(inp.labels, f.baseline_pred),
                         "target": _class_name(inp.labels, f.target_pred)})
        out.append({"row": v, "flips": len(v.flipped), "figs": figs})
    return out


