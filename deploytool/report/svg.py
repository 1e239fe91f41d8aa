"""Tiny inline-SVG plots for the report — a scatter, a line chart, horizontal box
plots and a heatmap — in pure Python, because the report must render in milliseconds and
matplotlib alone takes a second to import. It only draws what it is given: it
never reads files, loads results or decides what is worth plotting.
"""

from __future__ import annotations

import math
import re
from html import escape
from typing import Callable, Sequence

import numpy as np

from deploytool.value import value

# Okabe-Ito: distinguishable for colour-blind readers and in greyscale prints.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
SHAPES = ("circle", "square", "triangle", "cross")
_FONT = 'font-family="ui-sans-serif,system-ui,sans-serif" font-size="11"'
_CTRL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(s: object) -> str:
    """Text safe inside SVG/HTML/XML, with control characters (ANSI escapes from tool logs) removed."""
    return escape(_CTRL.sub("", str(s)), quote=True)


def _g(v: float) -> str:
    return f"{v:.1f}"


def fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000 or a < 0.01:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:.3g}"


class Scale:
    """Maps a data interval to a pixel interval, linearly or in log10."""

    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False):
        self.log = log and lo > 0
        lo, hi = (math.log10(lo), math.log10(hi)) if self.log else (lo, hi)
        if hi - lo < 1e-12:  # a single value: centre it
            pad = abs(lo) * 0.05 or (0.5 if not self.log else 0.1)
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: float) -> float:
        t = math.log10(max(v, 1e-300)) if self.log else v
        return self.a + (t - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    @property
    def domain(self) -> tuple[float, float]:
        return (10 ** self.lo, 10 ** self.hi) if self.log else (self.lo, self.hi)

    def ticks(self, n: int = 5) -> list[float]:
        lo, hi = self.domain
        if self.log:
            out = []
            for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
                steps = (1, 2, 5) if (math.log10(hi) - math.log10(lo)) <= 2.5 else (1,)
                out += [m * 10.0 ** e for m in steps if lo <= m * 10.0 ** e <= hi * (1 + 1e-9)]
            if len(out) >= 2:
                return out
        return nice_ticks(lo, hi, n)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


def wide_spread(values: Sequence[float], factor: float = 20.0) -> bool:
    """True when the positive values span more than `factor`: then a log axis reads better."""
    pos = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return bool(pos) and max(pos) / min(pos) > factor


def _marker(shape: str, x: float, y: float, r: float, attrs: str) -> str:
    if shape == "square":
        return f'<rect x="{_g(x - r)}" y="{_g(y - r)}" width="{_g(2 * r)}" height="{_g(2 * r)}" {attrs}/>'
    if shape == "triangle":
        pts = f"{_g(x)},{_g(y - r * 1.2)} {_g(x - r * 1.1)},{_g(y + r * 0.8)} {_g(x + r * 1.1)},{_g(y + r * 0.8)}"
        return f'<polygon points="{pts}" {attrs}/>'
    if shape == "diamond":
        pts = f"{_g(x)},{_g(y - r * 1.4)} {_g(x + r * 1.4)},{_g(y)} {_g(x)},{_g(y + r * 1.4)} {_g(x - r * 1.4)},{_g(y)}"
        return f'<polygon points="{pts}" {attrs}/>'
    if shape == "cross":
        d = f"M{_g(x - r)},{_g(y - r)}L{_g(x + r)},{_g(y + r)}M{_g(x - r)},{_g(y + r)}L{_g(x + r)},{_g(y - r)}"
        return f'<path d="{d}" stroke-width="2.2" {attrs}/>'
    return f'<circle cx="{_g(x)}" cy="{_g(y)}" r="{_g(r)}" {attrs}/>'


def _svg_open(width: int, height: int, title: str, cls: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{esc(title)}" {_FONT}>'
            f"<title>{esc(title)}</title>")


@value(frozen=False)
class Point:
    x: float
    y: float
    label: str  # short text drawn beside the point
    title: str  # full text on hover
    colour: str = PALETTE[0]
    shape: str = "circle"
    baseline: bool = False
    alert: bool = False  # drawn with a red ring (a failing row)


def scatter(points: Sequence[Point], *, title: str, x_label: str, y_label: str,
            x_fmt: Callable[[float], str] = fmt_tick, y_fmt: Callable[[float], str] = fmt_tick,
            x_log: bool | None = None, legend: Sequence[tuple[str, str, str]] = (),
            width: int = 600, height: int = 340) -> str:
    """Points with greedy non-overlapping labels; legend items are (text, colour, shape)."""
    ml, mr, mb = 58, 14, 40
    legend_svg, legend_lines = _legend(legend, ml, 14, width - mr)
    mt = 12 + 15 * legend_lines
    pts = [p for p in points if p.x is not None and p.y is not None and math.isfinite(p.x) and math.isfinite(p.y)]
    out = [_svg_open(width, height, title, "plot scatter")]
    if not pts:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#666">no measured points</text></svg>')
        return "".join(out)
    xs, ys = [p.x for p in pts], [p.y for p in pts]
    log = wide_spread(xs, 10.0) if x_log is None else x_log
    xpad = 0.0 if log else (max(xs) - min(xs)) * 0.06
    ypad = (max(ys) - min(ys)) * 0.08
    sx = Scale(min(xs) / (1.25 if log else 1) - xpad, max(xs) * (1.25 if log else 1) + xpad, ml, width - mr, log)
    sy = Scale(min(ys) - ypad, max(ys) + ypad, height - mb, mt)
    out.append(_axes(sx, sy, width, height, ml, mr, mt, mb, x_label, y_label, x_fmt, y_fmt))
    out.append(legend_svg)
    placed: list[tuple[float, float, float, float]] = []
    labels = []
    # markers: baselines last so they stay visible on top of coinciding rows
    for p in sorted(pts, key=lambda p: (p.baseline, p.alert)):
        x, y = sx(p.x), sy(p.y)
        if p.baseline:
            mark = _marker("diamond", x, y, 5.5, 'class="pt baseline" fill="#111" stroke="#fff" stroke-width="1.2"')
        else:
            stroke = 'stroke="#c62828" stroke-width="2"' if p.alert else 'stroke="#fff" stroke-width="0.8"'
            fill = f'fill="none" stroke="{p.colour}"' if p.shape == "cross" else f'fill="{p.colour}" {stroke}'
            mark = _marker(p.shape, x, y, 4.5, f'class="pt" fill-opacity="0.85" {fill}')
        out.append(f'<g><title>{esc(p.title)}</title>{mark}</g>')
    # labels: baselines and alerts first so they win the space
    for p in sorted(pts, key=lambda p: (not p.baseline, not p.alert)):
        if not p.label:
            continue
        x, y = sx(p.x), sy(p.y)
        w, h = 6.0 * len(p.label), 11
        lx = x + 8 if x + 8 + w < width - mr else x - 8 - w
        box = (lx, y - 8, lx + w, y - 8 + h)
        if not any(b[0] < box[2] and box[0] < b[2] and b[1] < box[3] and box[1] < b[3] for b in placed):
            placed.append(box)
            weight = ' font-weight="600"' if p.baseline else ""
            labels.append(f'<text x="{_g(lx)}" y="{_g(y + 1)}" fill="#333" paint-order="stroke" stroke="#fafafa" '
                          f'stroke-width="3"{weight}>{esc(p.label)}</text>')
    out += labels
    out.append("</svg>")
    return "".join(out)


def _axes(sx: Scale, sy: Scale, width: int, height: int, ml: int, mr: int, mt: int, mb: int,
          x_label: str, y_label: str, x_fmt: Callable[[float], str], y_fmt: Callable[[float], str]) -> str:
    o = [f'<rect x="{ml}" y="{mt}" width="{width - ml - mr}" height="{height - mt - mb}" fill="#fafafa" stroke="#ccc"/>']
    for t in sx.ticks(6):
        x = sx(t)
        o.append(f'<line x1="{_g(x)}" x2="{_g(x)}" y1="{mt}" y2="{height - mb}" stroke="#e4e4e4"/>'
                 f'<text x="{_g(x)}" y="{height - mb + 14}" text-anchor="middle" fill="#555">{esc(x_fmt(t))}</text>')
    for t in sy.ticks(5):
        y = sy(t)
        o.append(f'<line x1="{ml}" x2="{width - mr}" y1="{_g(y)}" y2="{_g(y)}" stroke="#e4e4e4"/>'
                 f'<text x="{ml - 5}" y="{_g(y + 4)}" text-anchor="end" fill="#555">{esc(y_fmt(t))}</text>')
    o.append(f'<text x="{(ml + width - mr) / 2}" y="{height - 6}" text-anchor="middle" fill="#333">'
             f'{esc(x_label)}{" (log scale)" if sx.log else ""}</text>')
    o.append(f'<text transform="translate(13 {(mt + height - mb) / 2}) rotate(-90)" text-anchor="middle" '
             f'fill="#333">{esc(y_label)}</text>')
    return "".join(o)


def _legend(items: Sequence[tuple[str, str, str]], x0: float, y0: float, x_max: float) -> tuple[str, int]:
    """Items are (text, colour, shape); shape "none" is a group heading (muted text, no marker).
    Wraps at x_max; returns the SVG and the number of lines used."""
    o, x, y, lines = [], x0, y0, 1 if items else 0
    for text, colour, shape in items:
        w = (6 + 6.6 * len(text) + (10 if x > x0 else 0)) if shape == "none" else 20 + 6.6 * len(text)
        if x + w > x_max and x > x0:
            x, y, lines = x0, y + 15, lines + 1
        if shape == "none":
            x += 10 if x > x0 else 0
            o.append(f'<text x="{_g(x)}" y="{_g(y)}" fill="#777">{esc(text)}</text>')
            x += 6 + 6.6 * len(text)
            continue
        fill = f'fill="none" stroke="{colour}"' if shape == "cross" else f'fill="{colour}"'
        o.append(_marker(shape, x + 4, y - 4, 4, f'class="legend" {fill}'))
        o.append(f'<text x="{_g(x + 11)}" y="{_g(y)}" fill="#333">{esc(text)}</text>')
        x += w
    return "".join(o), lines


@value(frozen=False)
class Distribution:
    label: str
    stats: dict[str, float]  # min, p1, p25, p50, p75, p90, p99, max, n
    colour: str = PALETTE[0]
    baseline: bool = False
    note: str = ""  # e.g. "summary only" when no per-sample file exists


def distribution_stats(samples: np.ndarray) -> dict[str, float]:
    s = np.asarray(samples, dtype=np.float64).ravel()
    s = s[np.isfinite(s)]
    if s.size == 0:
        return {}
    q = np.percentile(s, [1, 25, 50, 75, 90, 99])
    return {"min": float(s.min()), "p1": float(q[0]), "p25": float(q[1]), "p50": float(q[2]), "p75": float(q[3]),
            "p90": float(q[4]), "p99": float(q[5]), "max": float(s.max()), "n": int(s.size)}


def _box(d: Distribution, sx: Scale, yc: float, row_px: int) -> str:
    """One distribution's box at height `yc`, with its tooltip: whiskers p1-p99, box p25-p75, bar p50, diamond p90,
    cross max."""
    s = d.stats
    tip = (f"{d.label}: n={s.get('n', '?')} p50={s['p50']:.4g} ms"
           + "".join(f" {k}={s[k]:.4g}" for k in ("p90", "p99", "min", "max") if k in s)
           + (f" ({d.note})" if d.note else ""))
    g = [f'<g class="dist"><title>{esc(tip)}</title>']
    p1, p99 = s.get("p1", s.get("min")), s.get("p99", s.get("max"))
    if p1 is not None and p99 is not None:
        g.append(f'<line x1="{_g(sx(p1))}" x2="{_g(sx(p99))}" y1="{_g(yc)}" y2="{_g(yc)}" stroke="#555"/>'
                 f'<line x1="{_g(sx(p1))}" x2="{_g(sx(p1))}" y1="{_g(yc - 4)}" y2="{_g(yc + 4)}" stroke="#555"/>'
                 f'<line x1="{_g(sx(p99))}" x2="{_g(sx(p99))}" y1="{_g(yc - 4)}" y2="{_g(yc + 4)}" stroke="#555"/>')
    if "p25" in s and "p75" in s:
        x0, x1 = sx(s["p25"]), sx(s["p75"])
        fill = "#444" if d.baseline else d.colour
        g.append(f'<rect class="box" x="{_g(x0)}" y="{_g(yc - row_px * 0.3)}" width="{_g(max(x1 - x0, 1.5))}" '
                 f'height="{_g(row_px * 0.6)}" fill="{fill}" fill-opacity="0.35" stroke="{fill}"/>')
    x50 = sx(s["p50"])
    g.append(f'<line class="median" x1="{_g(x50)}" x2="{_g(x50)}" y1="{_g(yc - row_px * 0.36)}" '
             f'y2="{_g(yc + row_px * 0.36)}" stroke="#000" stroke-width="2"/>')
    if "p90" in s:
        g.append(_marker("diamond", sx(s["p90"]), yc, 2.6, 'fill="#c62828"'))
    if "max" in s:
        g.append(_marker("cross", sx(s["max"]), yc, 2.5, 'stroke="#777" fill="none"'))
    g.append("</g>")
    return "".join(g)


def boxplot(dists: Sequence[Distribution], *, title: str, x_label: str, log: bool | None = None,
            width: int = 600, row_px: int = 18) -> str:
    """One horizontal box per distribution: box p25-p75, bar p50, diamond p90, whiskers p1-p99, x max."""
    rows = [d for d in dists if d.stats.get("p50") is not None]
    label_w = min(250, 12 + 6.1 * max((len(d.label) for d in rows), default=10))
    ml, mr, mt, mb = int(label_w), 16, 26, 40
    height = mt + mb + row_px * max(len(rows), 1)
    out = [_svg_open(width, height, title, "plot boxplot")]
    if not rows:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#666">no latency samples</text></svg>')
        return "".join(out)
    lows = [d.stats.get("min", d.stats["p50"]) for d in rows]
    highs = [d.stats.get("max", d.stats["p50"]) for d in rows]
    use_log = wide_spread(lows + highs) if log is None else log
    lo, hi = min(lows), max(highs)
    if use_log and lo <= 0:
        lo = min(v for v in lows + [d.stats["p50"] for d in rows] if v > 0)
    sx = Scale(lo / 1.1 if use_log else lo - (hi - lo) * 0.03, hi * 1.1 if use_log else hi + (hi - lo) * 0.03,
               ml, width - mr, use_log)
    plot_h = height - mt - mb
    o = [f'<rect x="{ml}" y="{mt}" width="{width - ml - mr}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>']
    for t in sx.ticks(6):
        x = sx(t)
        o.append(f'<line x1="{_g(x)}" x2="{_g(x)}" y1="{mt}" y2="{mt + plot_h}" stroke="#e4e4e4"/>'
                 f'<text x="{_g(x)}" y="{mt + plot_h + 14}" text-anchor="middle" fill="#555">{fmt_tick(t)}</text>')
    o.append(f'<text x="{(ml + width - mr) / 2}" y="{height - 6}" text-anchor="middle" fill="#333">'
             f'{esc(x_label)}{" (log scale)" if sx.log else ""}</text>')
    o.append(_legend_text(ml, 14))
    for i, d in enumerate(rows):
        yc = mt + row_px * i + row_px / 2
        if i % 2:
            o.append(f'<rect x="{ml}" y="{_g(yc - row_px / 2)}" width="{width - ml - mr}" height="{row_px}" fill="#f0f0f0"/>')
        weight = ' font-weight="600"' if d.baseline else ""
        o.append(f'<text x="{ml - 6}" y="{_g(yc + 4)}" text-anchor="end" fill="#222"{weight}>{esc(d.label)}</text>')
        o.append(_box(d, sx, yc, row_px))
    out += o
    out.append("</svg>")
    return "".join(out)


def _legend_text(x: float, y: float) -> str:
    return (f'<text x="{x}" y="{y}" fill="#555">box p25–p75 · black bar p50 · '
            f'<tspan fill="#c62828">◆ p90</tspan> · whiskers p1–p99 · × max</text>')


@value(frozen=False)
class Cell:
    fill: str
    text: str = ""
    title: str = ""
    dark: bool = False  # white text on a dark fill


def heatmap(cells: Sequence[Sequence[Cell | None]], row_labels: Sequence[str], col_labels: Sequence[str], *,
            title: str, cell_w: int = 74, cell_h: int = 20) -> str:
    """A grid of coloured cells (None = empty), labelled rows on the left, column labels on top."""
    ml = int(min(260, 12 + 6.1 * max((len(r) for r in row_labels), default=4)))
    mt = 24 + int(min(90, 5.2 * max((len(c) for c in col_labels), default=4))) if any(
        len(c) * 6.1 > cell_w for c in col_labels) else 22
    width, height = ml + cell_w * len(col_labels) + 4, mt + cell_h * len(row_labels) + 4
    out = [_svg_open(width, height, title, "plot heatmap")]
    for j, c in enumerate(col_labels):
        x = ml + cell_w * j + cell_w / 2
        if mt > 22:
            out.append(f'<text transform="translate({_g(x)} {mt - 6}) rotate(-35)" fill="#222">{esc(c)}</text>')
        else:
            out.append(f'<text x="{_g(x)}" y="{mt - 7}" text-anchor="middle" fill="#222">{esc(c)}</text>')
    for i, r in enumerate(row_labels):
        y = mt + cell_h * i
        out.append(f'<text x="{ml - 6}" y="{y + cell_h / 2 + 4}" text-anchor="end" fill="#222">{esc(r)}</text>')
        for j, cell in enumerate(cells[i]):
            if cell is None:
                continue
            x = ml + cell_w * j
            out.append(f'<g class="cell"><title>{esc(cell.title)}</title><rect x="{x + 1}" y="{y + 1}" '
                       f'width="{cell_w - 2}" height="{cell_h - 2}" rx="2" fill="{cell.fill}"/>'
                       f'<text x="{x + cell_w / 2}" y="{y + cell_h / 2 + 4}" text-anchor="middle" '
                       f'font-family="ui-monospace,monospace" fill="{"#fff" if cell.dark else "#111"}">'
                       f"{esc(cell.text)}</text></g>")
    out.append("</svg>")
    return "".join(out)


def image_grid(images: Sequence[tuple[str, int, int, str]], *, title: str, columns: int = 8, caption_px: int = 26) -> str:
    """Thumbnails (PNG data URI, width, height, caption) in a grid; each caption is two short lines split at '|'."""
    if not images:
        return f'{_svg_open(300, 40, title, "plot images")}<text x="150" y="24" text-anchor="middle" fill="#666">none</text></svg>'
    cw = max(w for _, w, _, _ in images) + 16
    ch = max(h for _, _, h, _ in images) + caption_px + 8
    cols = min(columns, len(images))
    rows = -(-len(images) // cols)
    out = [_svg_open(cw * cols, ch * rows, title, "plot images")]
    for i, (uri, w, h, caption) in enumerate(images):
        x, y = (i % cols) * cw + 8, (i // cols) * ch + 4
        out.append(f'<g><title>{esc(caption.replace("|", " "))}</title>'
                   f'<image href="{esc(uri)}" x="{x}" y="{y}" width="{w}" height="{h}"/>')
        for j, line in enumerate(caption.split("|")[:2]):
            out.append(f'<text x="{x + w / 2}" y="{y + h + 11 + 11 * j}" text-anchor="middle" fill="#333" '
                       f'font-size="9">{esc(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
