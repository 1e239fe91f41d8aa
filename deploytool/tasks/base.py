"""What a task is: the strategy one kind of model output is judged by. A `Task` holds everything that differs
between tasks, in one place: when it is inferred from the labels and the scored output (`claims`), which labels it
accepts (`check_labels`), its default tolerances and the direction of its own metrics, the metrics it computes on
the scored output (`score`), and how the report shows it (`TaskView`: columns, plots, sections, header words).
Pure values and numpy: it reads no file, and the report turns its column declarations into text."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping

import numpy as np

from deploytool.value import value

Limits = tuple[float, float]
Tolerances = dict[str, dict[str, Limits]]  # group ("none", "quantized") -> metric -> (pass limit, fail limit)

# How a column writes its number (deploytool.report.tasks holds the functions): a share in percent, points of a
# percentage, a count, a float, a cosine, 4 significant digits, a signed relative change, scientific notation.
FORMATS = ("pct", "points", "count", "float", "cosine", "g", "signed_pct", "e")


@value
class Flip:
    """A sample whose top-1 class differs from the baseline's (true_label -1: the test set has no labels)."""

    index: int
    true_label: int
    baseline_pred: int
    target_pred: int


@value
class Column:
    head: str
    attr: str  # the metric it shows: a Comparison field (accuracy, rmse, ...) or one of the task's own metrics
    fmt: str  # how the number is written (FORMATS)
    worse_when: str = ""  # "low" / "high": the cell is marked when the value moved that way from the baseline's
    title: str = ""  # what it means: the head's tooltip and the table's legend
    percent: bool = False  # a share or a relative change: plotted in percent

    def __post_init__(self) -> None:
        if self.fmt not in FORMATS:
            raise ValueError(f"column {self.head!r}: format {self.fmt!r} is not one of {', '.join(FORMATS)}")


@value
class TaskView:
    """What the report shows of a run of one task."""

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


@value
class Scores:
    """A task's numbers for one row's scored output. `fields` are the Comparison's own (accuracy, agreement, mae,
    ...); `metrics` are the task's own metrics (a task added later: they travel in Comparison.task_metrics)."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    flipped: tuple[Flip, ...] = ()


class Task:
    """One task. A subclass sets the class attributes and overrides the hooks it needs; an instance is registered
    in deploytool.tasks.TASKS under its `name`."""

    name: str = ""
    tolerances: Tolerances = {}  # the default limits per group (a manifest's or --tolerance's replace them)
    metrics: Mapping[str, str] = {}  # the task's own metrics -> the good direction ("min"/"max") of a limit on it
    label_metrics: tuple[str, ...] = ()  # metrics that need labels: not checked on a test set without them
    scores_one_output: bool = True  # its metrics are of one output (the scored one); False: of every output alike
    view: TaskView
    unlabelled_view: TaskView | None = None  # the view of a run whose test set has no labels (None: `view`)

    def claims(self, y: np.ndarray | None, scored_shape: tuple[int, ...]) -> bool:
        """Whether a run with these labels (None: none) and this scored output (one sample's shape) is this task
        when the user names none. Tasks are asked in the order they were registered."""
        return False

    def check_labels(self, y: np.ndarray, values: int, where: str) -> None:
        """Refuse labels this task cannot judge (one line, DataError); `values` = the scored output's values per
        sample."""

    def uninformative(self, baseline: np.ndarray) -> str:
        """Why this task's agreement metrics say nothing with a baseline that gave these outputs (a weak test set:
        the row is then judged on output error and cosine, deploytool.tasks.weak_set), in one sentence; "" when
        they do."""
        return ""

    def score(self, target: np.ndarray, baseline: np.ndarray, y: np.ndarray | None) -> Scores:
        """The task's numbers: `target` and `baseline` are the scored output as the model gives it ((N, ...)
        float32: reshape to (N, -1) for values per sample); `y` the labels (None: the test set has none)."""
        return Scores()


__all__ = ["FORMATS", "Column", "Flip", "Limits", "Scores", "Task", "TaskView", "Tolerances"]
