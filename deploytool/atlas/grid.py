"""The atlas grid as values: architecture x route, each cell the outcome of one stored row (pass / degraded / fail,
conversion failure, runtime failure, unsupported) with its latency, size and links, and one summary line per
converter ("onnx2tf converts 7 of 9 architectures"). Pure: it reads Results and entries, never the store or files."""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

from deploytool.convert.registry import STEPS
from deploytool.result import Result, Status
from deploytool.value import value

# what a cell's colour says, in the order the legend lists them
OUTCOMES = ("pass", "degraded", "fail", "conversion_failed", "runtime_failed", "unsupported", "build_failed")
_UNSUPPORTED = (Status.UNSUPPORTED, Status.NOT_APPLICABLE)
# The smallest rounding any route applies is float16 weights computed in float32 (tflite/fp16 on the host): a
# weight's relative step of 2**-11 (0.05%), where int8 steps are 1/256 of a tensor's range. When that alone moves the
# outputs by more than ROUNDING_REL_ERROR of their range (20 times the step) or changes the top-1 class of more than
# ROUNDING_FLIPS of the samples, the model amplifies rounding, and its quantized cells say more about its weights than
# about the converters. The trained LeNet-5 moves by 0.02-0.03% at fp16 (both frameworks). Real-size networks with
# random weights amplify (their 50 and more layers untrained): in the full tier keras MobileNet v1, v2, v3-large,
# ResNet50 and EfficientNet-B0 move by 1.1-3.4% at fp16 and their int8 rows, from two independent quantizers, end at
# cosine 0.1-0.4; ConvNeXt-Tiny moves by under 0.01% and its int8 row is degraded, not failed. An uncalibrated route
# (ONNX dynamic-range) fails as the calibrated ones do.
ROUNDING_REL_ERROR = 0.01
ROUNDING_FLIPS = 0.05


@value(frozen=False)
class AtlasEntry:
    """One architecture's line of the atlas: how it was built and the migrate run of its rows (or why none)."""

    name: str
    family: str
    provider: str
    built: dict[str, Any] | None = None  # Built as JSON
    run_id: str = ""
    error: str = ""  # the build's or migrate's one line, when there is no run
    seconds: float = 0.0


@value
class Cell:
    outcome: str  # OUTCOMES
    title: str  # the tooltip: the row, its verdict or reason, its triage
    p50_ms: float | None = None
    size_bytes: float | None = None
    report: str = ""  # the run's report, relative to the atlas page
    bundle: str = ""  # the row's bug bundle, relative to the atlas page
    triage: str = ""


@value(frozen=False)
class GridRow:
    name: str
    family: str
    provider: str
    params: int | None
    note: str  # how informative its test set is, or why it has no rows
    report: str = ""
    cells: dict[str, Cell] = field(default_factory=dict)  # route -> cell


@value
class RouteSummary:
    converter: str
    converted: int  # architectures whose every conversion by it succeeded
    tried: int  # architectures it was asked to convert
    rows_pass: int
    rows: int

    @property
    def line(self) -> str:
        return (f"{self.converter} converts {self.converted} of {self.tried} architecture"
                f"{'s' if self.tried != 1 else ''}; {self.rows_pass} of {self.rows} rows pass")


def route_of(r: Result) -> str:
    """A column of the grid: what was made and where it ran (the source's converter is in the cell's title)."""
    return f"{r.combo.format}/{r.combo.quantize} {r.combo.where}"


def outcome_of(r: Result) -> str:
    if r.verdict is not None:
        return str(r.verdict)
    if r.status in _UNSUPPORTED:
        return "unsupported"
    if r.status is Status.CONVERSION_FAILED:
        return "conversion_failed"
    return "runtime_failed"


def converter_of(r: Result) -> str:
    """The converter(s) that made the row's file, without versions ("tf2onnx", "torch.onnx + onnxruntime.quant")."""
    if r.artifact is not None and r.artifact.converter:
        return re.sub(r"\s+v?\d+(?:\.\d+)+\S*", "", r.artifact.converter)
    if r.plan is not None and r.plan.steps:  # a conversion that failed: its steps' tools, as a file would name them
        return " + ".join(STEPS[s].converter if s in STEPS else s for s in r.plan.steps)
    return r.combo.format


def cell_of(r: Result, report: str, bundle: str) -> Cell:
    m = r.metrics
    what = str(r.verdict) if r.verdict is not None else f"{r.status}: {r.reason[:300]}"
    triage = r.triage.klass if r.triage is not None else ""
    title = f"{r.combo.label} · {converter_of(r)} · {what}" + (f" [{triage}]" if triage else "")
    return Cell(outcome_of(r), title, m.get("p50_ms"), m.get("size_bytes"), report, bundle, triage)


def summaries(rows: list[GridRow], converters: dict[tuple[str, str], str]) -> list[RouteSummary]:
    """One line per converter: `converters` maps (architecture, route) to the converter of that cell."""
    by: dict[str, dict[str, list[Cell]]] = {}
    for row in rows:
        for route, cell in row.cells.items():
            conv = converters.get((row.name, route))
            if conv:
                by.setdefault(conv, {}).setdefault(row.name, []).append(cell)
    out = []
    for conv, archs in sorted(by.items()):
        converted = sum(all(c.outcome not in ("conversion_failed", "unsupported") for c in cells)
                        for cells in archs.values())
        cells = [c for cs in archs.values() for c in cs]
        out.append(RouteSummary(conv, converted, len(archs), sum(c.outcome == "pass" for c in cells), len(cells)))
    return out


def counts(rows: list[GridRow]) -> dict[str, int]:
    """Cells per outcome over the whole grid (an architecture that did not build counts once)."""
    out = {o: 0 for o in OUTCOMES}
    for row in rows:
        if not row.cells:
            out["build_failed"] += 1
        for cell in row.cells.values():
            out[cell.outcome] += 1
    return out


def route_order(rows: list[GridRow]) -> list[str]:
    """The grid's columns: by format, then quantization in the order first seen, then where."""
    seen: dict[str, int] = {}
    for row in rows:
        for route in row.cells:
            seen.setdefault(route, len(seen))
    return sorted(seen, key=lambda r: (r.split("/")[0], seen[r]))


def rounding_sensitivity(results: list[Result]) -> str:
    """Why an architecture's quantized cells say little about their converters, in one phrase: its fp16-weight row
    on the host (the smallest rounding of any route) already moves its outputs by more than ROUNDING_REL_ERROR of
    their range or flips more than ROUNDING_FLIPS of the baseline's top-1 classes. "" when it does not, or has no
    such measured row."""
    for r in results:
        c = r.comparison
        if (r.status is not Status.MEASURED or c is None or c.rel_error is None or c.agreement_uninformative
                or (r.combo.format, r.combo.quantize, r.combo.target) != ("tflite", "fp16", "host")):
            continue
        flips = 1.0 - c.agreement if c.task == "classification" else 0.0
        if c.rel_error > ROUNDING_REL_ERROR or flips > ROUNDING_FLIPS:
            flipped = f" and flip {100 * flips:.0f}% of top-1" if c.task == "classification" else ""
            return (f"fp16 weights alone move its outputs by {100 * c.rel_error:.1f}% of their range{flipped}: the "
                    "model amplifies rounding, so its quantized cells say more about its weights than about their "
                    "converters")
    return ""


def describe_build(built: dict[str, Any] | None, error: str) -> str:
    if built is None:
        return error
    classes = built.get("classes_predicted") or 0
    spread = f"{classes} classes predicted" if classes else f"outputs vary by {built.get('output_std', 0):.3g}"
    return f"{built.get('params', 0):,} params; {spread}" + (f"; {error}" if error else "")
