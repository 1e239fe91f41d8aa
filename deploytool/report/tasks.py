"""What the report shows of a run, by its task: one `TaskView` per task (classification, regression, raw) says
which quality columns the summary table has, what the "vs size" plot measures, and which sections apply
(confusion difference and flipped-sample gallery for a classifier only). A new task is one more entry here and
nothing in the templates: they read the view. Pure: rows in, view data out; it never reads files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from deploytool.report.text import fmt_count, fmt_float, fmt_pct, fmt_points, num

if TYPE_CHECKING:
    from deploytool.report.rows import ReportRow


def _g(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def _signed_pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:+.2f}%"


def _cos(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.6f}"


@dataclass(frozen=True)
class Column:
    head: str
    attr: str  # the ReportRow field it shows
    fmt: Callable[[float | None], str]
    worse_when: str = ""  # "low" / "high": the cell is marked when the value moved that way from the baseline's
    title: str = ""


@dataclass(frozen=True)
class TaskView:
    task: str
    columns: tuple[Column, ...]
    size_metric: str  # the ReportRow field plotted against size on disk
    size_label: str
    size_percent: bool  # shown as a percentage
    baseline_metric: str  # the baseline's value of size_metric in the run's baselines ("" : none to plot)
    sections: frozenset[str]  # the optional sections that apply: confusion, gallery


VIEWS = {
    "classification": TaskView(
        "classification",
        (Column("accuracy", "accuracy", fmt_pct), Column("Δ pts", "accuracy_delta_points", fmt_points, "low"),
         Column("agree", "agreement", fmt_pct, title="top-1 agreement with the PC baseline"),
         Column("flips", "flipped_count", fmt_count), Column("max err", "max_abs_error", fmt_float)),
        "accuracy", "accuracy (%)", True, "accuracy", frozenset({"confusion", "gallery"})),
    "regression": TaskView(
        "regression",
        (Column("MAE", "mae", _g), Column("RMSE", "rmse", _g),
         Column("ΔRMSE", "rmse_increase", _signed_pct, "high", "RMSE change against the PC baseline's"),
         Column("cos min", "cosine_min", _cos, title="smallest per-sample cosine with the PC baseline's outputs"),
         Column("max err", "max_abs_error", fmt_float)),
        "rmse", "RMSE against the labels", False, "rmse", frozenset()),
    "raw": TaskView(
        "raw",
        (Column("cos min", "cosine_min", _cos, title="smallest per-sample cosine with the PC baseline's outputs"),
         Column("rel err", "rel_error", _g, title="largest |error| over the output's range"),
         Column("max err", "max_abs_error", fmt_float), Column("mean err", "mean_abs_error", _g)),
        "cosine_min", "smallest cosine with the PC baseline", False, "", frozenset()),
}


def view_of(rows: list["ReportRow"]) -> TaskView:
    """The run's view: its measured rows' task (a run is one model, so one task; none measured: classification)."""
    tasks = [r.task for r in rows if r.status == "measured" and r.task in VIEWS]
    return VIEWS[tasks[0]] if tasks else VIEWS["classification"]


def cells(view: TaskView, row: "ReportRow") -> list[dict[str, Any]]:
    """The row's quality cells: text, the value a column sorts by, and whether it reads worse than the baseline."""
    out = []
    for c in view.columns:
        v = num(getattr(row, c.attr, None))
        bad = v is not None and ((c.worse_when == "low" and v <= -0.005) or (c.worse_when == "high" and v >= 0.005))
        out.append({"text": c.fmt(v), "value": v, "cls": "n neg" if bad else "n"})
    return out
