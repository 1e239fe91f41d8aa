"""What the report shows of a run, by its task: one `TaskView` per task (classification, regression, raw, and
a classifier run on a test set without labels) says which quality columns the HTML table, summary.md and the
terminal have, which number the verdict matrix shows, what the "vs size" and per-row plots measure, what the
header says of the test set and the baseline, and which optional sections and plots apply. A new task is one more
entry here and nothing in the templates or writers: they read the view. Pure: rows in, view data out; it never
reads files."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable

from deploytool.report.numbers import MISSING, fmt_cosine, fmt_count, fmt_float, fmt_pct, fmt_points, num

if TYPE_CHECKING:
    from deploytool.report.rows import ReportRow


def _g(v: float | None) -> str:
    return MISSING if v is None else f"{v:.4g}"


def _signed_pct(v: float | None) -> str:
    # a change that rounds to nothing reads ±0.00%, never -0.00%
    return MISSING if v is None else "±0.00%" if abs(v) < 5e-5 else f"{100 * v:+.2f}%".replace("-", "−")


def _e(v: float | None) -> str:
    return MISSING if v is None else f"{v:.2e}"


@dataclass(frozen=True)
class Column:
    head: str
    attr: str  # the ReportRow field it shows (the same name as the Result's metric)
    fmt: Callable[[float | None], str]
    worse_when: str = ""  # "low" / "high": the cell is marked when the value moved that way from the baseline's
    title: str = ""  # what it means: the head's tooltip and the table's legend
    percent: bool = False  # a share or a relative change: plotted in percent


@dataclass(frozen=True)
class TaskView:
    task: str
    columns: tuple[Column, ...]  # the HTML summary table's quality columns
    brief: tuple[Column, ...]  # the few a line of text holds: summary.md and the terminal
    headline: Column  # the one number per row the verdict matrix shows
    size: Column  # plotted against size on disk; the header's baseline figure when baseline_metric is set
    size_axis: str
    baseline_metric: str  # where a baseline's value of `size` is ("" : none to plot or show)
    test_set: str  # what the header says the test set holds besides its size; {classes} = the class count
    row_metric: Column | None = None  # plotted per measured row (its change against the baseline)
    sections: frozenset[str] = frozenset()  # optional sections: confusion, gallery, outputs (the per-output table)
    plots: frozenset[str] = frozenset()  # optional plots: per_output (each output's error), fits (per sample)

    @property
    def legend(self) -> str:
        """The table's legend of its quality columns: `ΔRMSE = RMSE change against ...; cos min = ...`."""
        return "; ".join(f"{c.head} = {c.title}" for c in self.columns if c.title)


ACCURACY = Column("accuracy", "accuracy", fmt_pct, title="top-1 accuracy against the test set's labels", percent=True)
DELTA_PTS = Column("Δ pts", "accuracy_delta_points", fmt_points, "low",
                   "accuracy change against the PC baseline in percentage points")
AGREE = Column("agree", "agreement", fmt_pct, title="top-1 agreement with the PC baseline", percent=True)
FLIPS = Column("flips", "flipped_count", fmt_count, title="samples whose top-1 class differs from the PC baseline's")
MAX_ERR = Column("max err", "max_abs_error", fmt_float, title="largest |output − PC baseline's output|")
MEAN_ERR = Column("mean err", "mean_abs_error", _g, title="mean |output − PC baseline's output|")
COS_MIN = Column("cos min", "cosine_min", fmt_cosine, title="smallest per-sample cosine with the PC baseline's outputs")
REL_ERR = Column("rel err", "rel_error", _g, title="largest |error| over the output's range")
MAE = Column("MAE", "mae", _g, title="mean absolute error against the labels")
RMSE = Column("RMSE", "rmse", _g, title="root mean square error against the labels")
D_RMSE = Column("ΔRMSE", "rmse_increase", _signed_pct, "high", "RMSE change against the PC baseline's", True)

VIEWS = {
    "classification": TaskView(
        "classification", (ACCURACY, DELTA_PTS, AGREE, FLIPS, MAX_ERR),
        (replace(ACCURACY, head="acc"), DELTA_PTS, AGREE, FLIPS), DELTA_PTS,
        ACCURACY, "accuracy (%)", "accuracy", "{classes} classes",
        sections=frozenset({"confusion", "gallery"})),
    # a classifier's test set without labels: no accuracy, so the rows are read by agreement with the baseline;
    # its flips have no true class, so there is no confusion difference (rows = true class) to draw
    "classification, no labels": TaskView(
        "classification", (AGREE, FLIPS, COS_MIN, MAX_ERR), (AGREE, FLIPS, COS_MIN), AGREE,
        AGREE, "top-1 agreement with the PC baseline (%)", "", "no labels · {classes} classes",
        sections=frozenset({"gallery"})),
    "regression": TaskView(
        "regression", (MAE, RMSE, D_RMSE, COS_MIN, MAX_ERR), (RMSE, D_RMSE, MAE, COS_MIN), D_RMSE,
        RMSE, "RMSE against the labels", "rmse", "float targets", row_metric=D_RMSE,
        sections=frozenset({"outputs"}), plots=frozenset({"fits"})),
    "raw": TaskView(
        "raw", (COS_MIN, REL_ERR, MAX_ERR, MEAN_ERR), (COS_MIN, replace(REL_ERR, fmt=_e), replace(MAX_ERR, fmt=_e)), COS_MIN,
        COS_MIN, "smallest cosine with the PC baseline", "", "no labels",
        sections=frozenset({"outputs"}), plots=frozenset({"per_output"})),
}


def view_for(task: str, labelled: bool = True, outputs: int = 1) -> TaskView:
    """The view of a run of `task` (an unknown task: a classifier's); a model of several outputs shows each one
    (the per-output table and plot) whatever its task."""
    view = VIEWS.get(task if labelled or f"{task}, no labels" not in VIEWS else f"{task}, no labels",
                     VIEWS["classification"])
    if outputs > 1:
        view = replace(view, sections=view.sections | {"outputs"}, plots=view.plots | {"per_output"})
    return view


def view_of(rows: Iterable["ReportRow"]) -> TaskView:
    """The run's view from its measured rows: their task (a run is one model, so one task; none measured: a
    classifier's), whether any was scored against labels, and their most outputs. A classifier on a weak test set
    (deploytool.run.weak_set: agreement says nothing) is read by what its rows were judged on: the cosine is its
    headline, beside the output error."""
    measured = [r for r in rows if r.status == "measured"]
    task = next((r.task for r in measured if r.task in VIEWS), "classification")
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
        v = num(getattr(row, c.attr, None))
        bad = v is not None and ((c.worse_when == "low" and v <= -0.005) or (c.worse_when == "high" and v >= 0.005))
        out.append({"text": c.fmt(v), "value": v, "cls": "n neg" if bad else "n"})
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
