"""The report's one line chart, in pure Python (like svg.py, whose scales, axes and legend it reuses): series of
(x, y) points joined in x order, each with its colour and dash. A non-finite y leaves a gap; a baseline series is
drawn thick, black and dashed above the others; a thin series light and behind them (one seed under a mean); a
band shades a (low, high) range per x (an IQR). It only draws what it is given.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from deploytool.report.svg import PALETTE, Scale, _axes, _g, _legend, _marker, _svg_open, esc, fmt_tick, wide_spread
from deploytool.value import value

DASHES = ("", "6 3", "2 3", "8 3 2 3")
BASELINE_COLOUR = "#111"


@value(frozen=False)
class Series:
    label: str  # in the legend and each point's tooltip; "" keeps a series out of the legend
    xs: Sequence[float]
    ys: Sequence[float | None]  # None: no value at that x (the line has a gap)
    colour: str = PALETTE[0]
    dash: str = ""  # an SVG stroke-dasharray, "" for a solid line
    baseline: bool = False  # the reference (a PC model): thick, black, dashed, diamond markers, drawn last
    thin: bool = False  # light and thin, no markers, drawn first
    band: tuple[Sequence[float], Sequence[float]] | None = None  # (low, high) per x, shaded behind the line

    @property
    def stroke(self) -> str:
        return BASELINE_COLOUR if self.baseline else self.colour


def _ok(*vs: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in vs)


def _segments(s: Series) -> list[list[tuple[float, float]]]:
    """The series' points in x order (non-finite x dropped), split where y is not finite."""
    pts = sorted(((float(x), float(y) if y is not None else math.nan) for x, y in zip(s.xs, s.ys) if _ok(x)),
                 key=lambda p: p[0])
    out: list[list[tuple[float, float]]] = [[]]
    for x, y in pts:
        if math.isfinite(y):
            out[-1].append((x, y))
        elif out[-1]:
            out.append([])
    return [seg for seg in out if seg]


def _band_points(s: Series) -> list[tuple[float, float, float]]:
    if s.band is None:
        return []
    lo, hi = s.band
    return sorted((float(x), float(a), float(b)) for x, a, b in zip(s.xs, lo, hi) if _ok(x, a, b))


def line_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str,
               x_log: bool | None = False, y_log: bool | None = False, y_range: tuple[float, float] | None = None,
               x_fmt: Callable[[float], str] = fmt_tick, y_fmt: Callable[[float], str] = fmt_tick,
               width: int = 600, height: int = 340) -> str:
    """Lines with a marker on each point (its value in a tooltip); log axes when asked, or (None) when the values
    span more than 10x (20x for y)."""
    ml, mr, mb = 58, 14, 40
    drawn = [(s, _segments(s), _band_points(s)) for s in series]
    drawn = [d for d in drawn if d[1] or d[2]]
    legend = [(s.label, s.stroke, "diamond" if s.baseline else "circle") for s, _, _ in drawn if s.label]
    legend_svg, legend_lines = _legend(legend, ml, 14, width - mr)
    mt = 12 + 15 * legend_lines
    out = [_svg_open(width, height, title, "plot lines")]
    if not drawn:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#666">no measured points</text></svg>')
        return "".join(out)
    xs = [x for _, segs, band in drawn for x, _ in (p for seg in segs for p in seg)] + [b[0] for d in drawn for b in d[2]]
    ys = ([y for _, segs, _ in drawn for seg in segs for _, y in seg]
          + [v for d in drawn for b in d[2] for v in b[1:]])
    xl = (wide_spread(xs, 10.0) if x_log is None else x_log) and min(xs) > 0
    yl = (wide_spread(ys, 20.0) if y_log is None else y_log) and min(ys) > 0 and y_range is None
    xpad = 0.0 if xl else (max(xs) - min(xs)) * 0.04
    ypad = 0.0 if yl else (max(ys) - min(ys)) * 0.08
    sx = Scale(min(xs) / (1.15 if xl else 1) - xpad, max(xs) * (1.15 if xl else 1) + xpad, ml, width - mr, xl)
    y_lo, y_hi = y_range or (min(ys) / (1.3 if yl else 1) - ypad, max(ys) * (1.3 if yl else 1) + ypad)
    sy = Scale(y_lo, y_hi, height - mb, mt, yl)
    out.append(_axes(sx, sy, width, height, ml, mr, mt, mb, x_label, y_label, x_fmt, y_fmt))
    if yl:  # _axes names only a log x axis
        out.append(f'<text x="{ml + 4}" y="{mt + 12}" fill="#777">{esc(y_label)} on a log scale</text>')
    out.append(legend_svg)
    for s, _, band in drawn:  # bands first, under every line
        if len(band) > 1:
            edge = [f"{_g(sx(x))},{_g(sy(hi))}" for x, _, hi in band] + \
                   [f"{_g(sx(x))},{_g(sy(lo))}" for x, lo, _ in reversed(band)]
            out.append(f'<polygon class="band" points="{" ".join(edge)}" fill="{s.stroke}" fill-opacity="0.15" '
                       'stroke="none"/>')
    for s, segs, _ in sorted(drawn, key=lambda d: (not d[0].thin, d[0].baseline)):
        if s.baseline:
            style = 'stroke-width="2.6" stroke-dasharray="6 3"'
        elif s.thin:
            style = 'stroke-width="1" stroke-opacity="0.35"'
        else:
            style = 'stroke-width="1.8"' + (f' stroke-dasharray="{s.dash}"' if s.dash else "")
        out.append(f"<g><title>{esc(s.label)}</title>")
        for seg in segs:
            if len(seg) > 1:
                coords = " ".join(f"{_g(sx(x))},{_g(sy(y))}" for x, y in seg)
                out.append(f'<polyline points="{coords}" fill="none" stroke="{s.stroke}" {style}/>')
            if s.thin:
                continue
            for x, y in seg:
                out.append(f"<g><title>{esc(s.label)}: {esc(x_fmt(x))}, {esc(y_fmt(y))}</title>"
                           + _marker("diamond" if s.baseline else "circle", sx(x), sy(y), 3.5 if s.baseline else 3,
                                     f'class="pt" fill="{s.stroke}"') + "</g>")
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
