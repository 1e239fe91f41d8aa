"""What the report shows of a run, by its task: each task's `TaskView` (declared in its module,
deploytool.tasks; a classifier run on a test set without labels has its own) says which quality columns the HTML
table, summary.md and the terminal have, which number the verdict matrix shows, what the "vs size" and per-row
plots measure, what the header says of the test set and the baseline, and which optional sections and plots
apply. This module writes the views' numbers; a new task adds nothing here nor in the templates or writers: they
read the view. Pure: rows in, view data out; it never reads files."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable

from deploytool.report.numbers import MISSING, fmt_cosine, fmt_count, fmt_float, fmt_pct, fmt_points, num
from deploytool.tasks import TASKS, Column, TaskView
from deploytool.tasks.raw import COS_MIN, REL_ERR

if TYPE_CHECKING:
    from deploytool.report.rows import ReportRow


def _g(v: float | None) -> str:
    return MISSING if v is None else f"{v:.4g}"


def _signed_pct(v: float | None) -> str:
    # a change that rounds to nothing reads ±0.00%, never -0.00%
    return MISSING if v is None else "±0.00%" if abs(v) < 5e-5 else f"{100 * v:+.2f}%".replace("-", "−")


def _e(v: float | None) -> str:
    return MISSING if v is None else f"{v:.2e}"


# A column's format name (deploytool.tasks.base.FORMATS) -> how its number is written.
FORMATTERS: dict[str, Callable[[float | None], str]] = {
    "pct": fmt_pct, "points": fmt_points, "count": fmt_count, "float": fmt_float, "cosine": fmt_cosine, "g": _g,
    "signed_pct": _signed_pct, "e": _e}


def text_of(column: Column, value: float | None) -> str:
    return FORMATTERS[column.fmt](value)


def metric_of(row: Any, attr: str) -> float | None:
    """A row's value of a column's metric: its own field, else one of its task's own metrics (None: missing)."""
    if hasattr(row, attr):
        return num(getattr(row, attr))
    return num((getattr(row, "task_metrics", None) or {}).get(attr))


def view_for(task: str, labelled: bool = True, outputs: int = 1) -> TaskView:
    """The view of a run of `task` (its task's, deploytool.tasks; an unknown task: a classifier's); a model of
    several outputs shows each one (the per-output table and plot) whatever its task."""
    known = TASKS[task] if task in TASKS else TASKS["classification"]
    view = known.view if labelled or known.unlabelled_view is None else known.unlabelled_view
    if outputs > 1:
        view = replace(view, sections=view.sections | {"outputs"}, plots=view.plots | {"per_output"})
    return view


def view_of(rows: Iterable["ReportRow"]) -> TaskView:
    """The run's view from its measured rows: their task (a run is one model, so one task; none measured: a
    classifier's), whether any was scored against labels, and their most outputs. A classifier on a weak test set
    (deploytool.tasks.weak_set: agreement says nothing) is read by what its rows were judged on: the cosine is its
    headline, beside the output error."""
    measured = [r for r in rows if r.status == "measured"]
    task = next((r.task for r in measured if r.task in TASKS), "classification")
    labelled = not measured or any(r.accuracy is not None for r in measured)
    view = view_for(task, labelled, max((len(r.outputs) for r in measured), default=1))
    if any(r.agreement_uninformative for r in measured):
        view = replace(view, columns=_with(view.columns, COS_MIN, REL_ERR), brief=_with(view.brief, COS_MIN),
                       headline=COS_MIN)
    return view


def _with(columns: tuple[Column, ...], *more: Column) -> tuple[Column, ...]:
    return columns + tuple(c for c in more if c.attr not in {x.attr for x in columns})


def weak_set_warnings(rows: Iterable["ReportRow"]) -> list[str]:
    """What the header says of the test set from the rows' judgements: each distinct reason a row gave for agreement
    saying nothing (a weak test set), once."""
    reasons = dict.fromkeys(r.agreement_uninformative for r in rows
                            if r.status == "measured" and r.agreement_uninformative)
    return [f"weak: {why}; agreement says nothing, rows judged on output error and cosine" for why in reasons]


def cells(view: TaskView, row: Any, columns: tuple[Column, ...] | None = None) -> list[dict[str, Any]]:
    """The row's quality cells (the view's table columns unless named): text, the value a column sorts by, and
    whether it reads worse than the baseline. `row` is a ReportRow or anything with its metric attributes."""
    out = []
    for c in view.columns if columns is None else columns:
        v = metric_of(row, c.attr)
        bad = v is not None and ((c.worse_when == "low" and v <= -0.005) or (c.worse_when == "high" and v >= 0.005))
        out.append({"text": text_of(c, v), "value": v, "cls": "n neg" if bad else "n"})
    return out


def baseline_value(view: TaskView, framework: str, baseline: dict[str, Any], rows: Iterable["ReportRow"]) -> float | None:
    """A PC baseline's value of the view's `size` metric: its accuracy from baseline.json, its RMSE from the rows
    compared with it (each carries its baseline's); None for a view that has none (raw outputs, no labels)."""
    if not view.baseline_metric:
        return None
    value = num(baseline.get(view.baseline_metric))
    if value is None:
        value = next((num(getattr(r, f"baseline_{view.baseline_metric}", None)) for r in rows
                      if r.framework == framework and num(getattr(r, f"baseline_{view.baseline_metric}", None))
                      is not None), None)
    return value


def dataset_words(view: TaskView, samples: int, classes: int) -> str:
    """The header's words for the test set: `64 · 10 classes`, `64 · float targets`, `40 · no labels`."""
    return f"{samples} · {view.test_set.format(classes=classes)}"


_SECTION_WORDS = (("outputs", "every output"), ("confusion", "confusion difference"), ("gallery", "flipped samples"))


def contents(view: TaskView) -> list[str]:
    """What the HTML report holds beyond the summary, in words (summary.md's pointer to it)."""
    return ["plots"] + [words for section, words in _SECTION_WORDS if section in view.sections]
