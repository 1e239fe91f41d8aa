"""A line chart for the report in pure Python (like svg.py, whose scales, axes and legend it reuses): series of
(x, y) points joined in x order, each with its colour and dash. It only draws what it is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from deploytool.report.svg import PALETTE, Scale, _axes, _g, _legend, _svg_open, esc, fmt_tick, wide_spread

DASHES = ("", "6 3", "2 3", "8 3 2 3")


@dataclass
class Series:
    label: str
    points: Sequence[tuple[float, float]]  # (x, y); non-finite points are left out
    colour: str = PALETTE[0]
    dash: str = ""  # an SVG stroke-dasharray, "" for a solid line


def _finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return sorted((float(x), float(y)) for x, y in points
                  if x is not None and y is not None and math.isfinite(x) and math.isfinite(y))


def line_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str,
               x_log: bool | None = None, y_log: bool | None = None,
               x_fmt: Callable[[float], str] = fmt_tick, y_fmt: Callable[[float], str] = fmt_tick,
               width: int = 600, height: int = 340) -> str:
    """Lines with markers; log axes when asked, or (None) when the values span more than 10x (20x for y)."""
    ml, mr, mb = 58, 14, 40
    drawn = [(s, _finite(s.points)) for s in series]
    drawn = [(s, pts) for s, pts in drawn if pts]
    legend_svg, legend_lines = _legend([(s.label, s.colour, "circle") for s, _ in drawn], ml, 14, width - mr)
    mt = 12 + 15 * legend_lines
    out = [_svg_open(width, height, title, "plot lines")]
    if not drawn:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#666">no measured points</text></svg>')
        return "".join(out)
    xs = [x for _, pts in drawn for x, _ in pts]
    ys = [y for _, pts in drawn for _, y in pts]
    xl = (wide_spread(xs, 10.0) if x_log is None else x_log) and min(xs) > 0
    yl = (wide_spread(ys, 20.0) if y_log is None else y_log) and min(ys) > 0
    xpad = 0.0 if xl else (max(xs) - min(xs)) * 0.04
    ypad = 0.0 if yl else (max(ys) - min(ys)) * 0.08
    sx = Scale(min(xs) / (1.15 if xl else 1) - xpad, max(xs) * (1.15 if xl else 1) + xpad, ml, width - mr, xl)
    sy = Scale(min(ys) / (1.3 if yl else 1) - ypad, max(ys) * (1.3 if yl else 1) + ypad, height - mb, mt, yl)
    out.append(_axes(sx, sy, width, height, ml, mr, mt, mb, x_label, y_label, x_fmt, y_fmt))
    if yl:  # _axes names only a log x axis
        out.append(f'<text x="{ml + 4}" y="{mt + 12}" fill="#777">{esc(y_label)} on a log scale</text>')
    out.append(legend_svg)
    for s, pts in drawn:
        coords = " ".join(f"{_g(sx(x))},{_g(sy(y))}" for x, y in pts)
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(f'<g><title>{esc(s.label)}</title><polyline points="{coords}" fill="none" stroke="{s.colour}" '
                   f'stroke-width="1.8"{dash}/>')
        out += [f'<circle cx="{_g(sx(x))}" cy="{_g(sy(y))}" r="3" fill="{s.colour}"><title>{esc(s.label)}: '
                f'{esc(x_fmt(x))}, {esc(y_fmt(y))}</title></circle>' for x, y in pts]
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
