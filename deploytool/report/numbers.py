"""How every form of the report writes a number: a metric as a finite float or None (`num`), `n/a` for one
that is missing or not finite, and the short formats of shares, points, ratios, milliseconds, bytes and counts.
A leaf: the report's other modules import it, it imports none of them."""

from __future__ import annotations

import math
from typing import Any

MISSING = "n/a"  # how every table shows a number that is missing or not finite (NaN, ±inf)


def num(v: Any) -> float | None:
    """A metric as a finite float, or None when missing or not finite: NaN and ±inf (a model that outputs
    inf, a ratio over a zero baseline) have no value to show or sort by. Older stores kept them as "inf"."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def fmt_pct(v: Any, digits: int = 2) -> str:
    f = num(v)
    return MISSING if f is None else f"{100 * f:.{digits}f}%"


def fmt_points(v: Any) -> str:
    f = num(v)
    if f is None:
        return MISSING
    return "±0.00" if abs(f) < 0.005 else f"{f:+.2f}".replace("-", "−")


def fmt_ratio(v: Any) -> str:
    f = num(v)
    return MISSING if f is None else f"{f:.2f}×"


def fmt_ms(v: Any) -> str:
    f = num(v)
    if f is None:
        return MISSING
    return f"{f:.3f}" if f < 1 else (f"{f:.2f}" if f < 100 else f"{f:,.0f}")


def fmt_bytes(v: Any) -> str:
    f = num(v)
    if f is None:
        return MISSING
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(f) >= size:
            return f"{f / size:.1f} {unit}"
    return f"{f:.0f} B"


def fmt_float(v: Any) -> str:
    f = num(v)
    return MISSING if f is None else f"{f:.3g}"


def fmt_count(v: Any) -> str:
    f = num(v)
    return MISSING if f is None else f"{int(f)}"


def fmt_cosine(v: Any) -> str:
    f = num(v)
    return MISSING if f is None else f"{f:.6f}"
