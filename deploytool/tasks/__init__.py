"""The tasks a model's outputs are judged by, as registered strategies (one module each, as Optimum keeps one
config class per model family): classification, regression, raw, and any a plugin registers. A task module holds
its inference rule, label checks, default tolerances, metrics and report view (deploytool.tasks.base.Task);
nothing elsewhere branches on a task's name. A new task is one module that calls `register_task` when imported
(named in $DEPLOYTOOL_PLUGINS outside deploytool)."""

from __future__ import annotations

import numpy as np

from deploytool.errors import UnknownOption
from deploytool.registry import Registry
from deploytool.tasks.base import Column, Flip, Scores, Task, TaskView, Tolerances
from deploytool.tasks.classification import Classification
from deploytool.tasks.raw import Raw
from deploytool.tasks.regression import Regression
from deploytool.tolerances import TOLERANCE_METRICS

TASKS: Registry[Task] = Registry("task")


def register_task(task: Task) -> Task:
    """Offer `task` to --task and the manifests (and to inference, after the tasks registered before it). Its own
    metrics join the tolerance vocabulary; one already there with another direction is refused."""
    if not task.name:
        raise ValueError("a task needs a name")
    for metric, good in task.metrics.items():
        if good not in ("min", "max"):
            raise UnknownOption(f"task {task.name!r}: metric {metric!r} must be 'min' or 'max' (good), not {good!r}")
        if TOLERANCE_METRICS.get(metric, good) != good:
            raise UnknownOption(f"task {task.name!r}: metric {metric!r} is already a {TOLERANCE_METRICS[metric]} "
                                "metric; name yours otherwise")
    for group in task.tolerances.values():
        unknown = [m for m in group if m not in TOLERANCE_METRICS and m not in task.metrics]
        if unknown:
            raise UnknownOption(f"task {task.name!r}: a tolerance on {unknown[0]!r}, which no task measures")
    TOLERANCE_METRICS.update(task.metrics)
    TASKS.add(task.name, task)
    return task


for _task in (Classification(), Regression(), Raw()):
    register_task(_task)


def names() -> tuple[str, ...]:
    return TASKS.names()


def get_task(name: str) -> Task:
    return TASKS.lookup(name)


def infer_task(y: np.ndarray | None, scored_shape: tuple[int, ...]) -> str:
    """The first registered task that claims labels `y` (None: none) and the scored output's sample shape:
    integer labels are a classification, float labels a regression; without labels, one score per class
    (N, C >= 2) is a classification, anything else raw outputs."""
    labels = y if y is not None and len(y) else None
    return next(name for name, task in TASKS.items() if task.claims(labels, scored_shape))


__all__ = ["TASKS", "Column", "Flip", "Scores", "Task", "TaskView", "Tolerances", "get_task", "infer_task", "names",
           "register_task"]
