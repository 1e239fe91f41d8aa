"""Thread counts, set and checked: the same intra-op thread count for TensorFlow and PyTorch (training and
inference), and what a span of work actually used — process CPU time over wall time, and how many of the
process's threads did a real share of it.

TensorFlow sizes its thread pools once per process, when its runtime starts (the first op), so
`pin_tensorflow` only works in a process where TensorFlow has not run yet (a spawned training worker, a fresh
`deploytool` process); where it is too late it says so and reports the count TensorFlow really has. Nothing here
imports TensorFlow or PyTorch at import time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from deploytool.proc.quiet import import_tensorflow

# A thread that did at least 1% of the span's CPU time counts as used. Small models spend most of their time in
# Python on the main thread: a pool thread doing real kernels gets a few percent there (LeNet-1 on 512 digits,
# 2 threads: 1.5-3.5% each), while a thread that only woke up did 0.4%.
BUSY_SHARE = 0.01


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def pin_tensorflow(threads: int) -> dict[str, Any]:
    """Ask TensorFlow for `threads` intra-op and inter-op threads; returns what it has (0 = TF's default: one per
    usable core). `pinned` is False when TensorFlow already ran in this process with other counts."""

    tf = import_tensorflow()
    pinned = True
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # "cannot be modified after initialization": TF ran already with other counts
        pinned = False
    intra = tf.config.threading.get_intra_op_parallelism_threads() or usable_cores()
    inter = tf.config.threading.get_inter_op_parallelism_threads() or usable_cores()
    return {"threads_requested": threads, "intra_op_threads": intra, "inter_op_threads": inter,
            "pinned": pinned and intra == threads and inter == threads}


def pin_torch(threads: int) -> dict[str, Any]:
    """The same for PyTorch: intra-op threads can change at any time; inter-op ones only before their first use."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # already set, or inter-op work already ran
        pass
    intra, inter = torch.get_num_threads(), torch.get_num_interop_threads()
    return {"threads_requested": threads, "intra_op_threads": intra, "inter_op_threads": inter,
            "pinned": intra == threads and inter == threads}


def pin(framework: str, threads: int) -> dict[str, Any]:
    return pin_tensorflow(threads) if framework == "keras" else pin_torch(threads)


def not_pinned_note(facts: dict[str, Any]) -> str | None:
    if facts.get("pinned", True):
        return None
    return (f"ran {facts['intra_op_threads']} intra-op / {facts['inter_op_threads']} inter-op threads although "
            f"{facts['threads_requested']} were requested: TensorFlow had already started in this process "
            "and sizes its thread pools once")


def thread_cpu_seconds(task_dir: Path = Path("/proc/self/task")) -> dict[int, float]:
    """CPU time (user + system) of each thread of this process so far, by thread id; {} where /proc is missing."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[int, float] = {}
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # the thread ended meanwhile
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15 of stat)
    return out


def busy_threads(before: dict[int, float], after: dict[int, float], min_share: float = BUSY_SHARE) -> int:
    """How many threads each did at least `min_share` of the CPU time spent between two `thread_cpu_seconds()`
    snapshots (a thread born in between counts all its time)."""
    spent = [after[t] - before.get(t, 0.0) for t in after]
    total = sum(s for s in spent if s > 0)
    if total <= 0:
        return 0
    return sum(1 for s in spent if s >= min_share * total)


def cpu_percent(cpu_seconds: float, wall_seconds: float) -> float:
    """Process CPU time over wall time, in percent: 100 = one core busy the whole time, 200 = two."""
    return 100.0 * cpu_seconds / wall_seconds if wall_seconds > 0 else 0.0
