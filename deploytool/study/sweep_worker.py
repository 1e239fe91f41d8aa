"""One child process of the sweep (a `proc.worker.Worker` the sweep starts per job): `run(job)` measures one
runtime at one or more thread counts over a list of batch sizes (`infer`), or trains one point of the training
grid (`train`), and returns what it measured as plain JSON values.

Why a child: TensorFlow fixes its thread pools when it starts, so a Keras point at another thread count needs a
fresh process; and a process of its own gives each runtime a clean peak RSS and CPU time, not the parent's
(which may hold TensorFlow, PyTorch and a browser driver at once). It never stores or reports.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from deploytool.artifact import IMPLIED_INPUT, Artifact
from deploytool.data import load_dataset
from deploytool.data.feed import Feed
from deploytool.errors import StageFailed, first_line_of
from deploytool.proc.quiet import import_tensorflow
from deploytool.runtimes import make_runtime
from deploytool.runtimes.measure import PeakRss
from deploytool.spec import load_spec
from deploytool.study.sweep_measure import PointBudget, cpu_seconds, point_stats, time_point
from deploytool.train import FILE_NAMES
from deploytool.train.fit import fit_keras, fit_torch

# TensorFlow's pools are sized when it starts: a format it runs gets its thread count before anything imports it.
TF_FORMATS = ("keras", "saved_model")
# Set in the child before anything imports TensorFlow.


def _pin_tensorflow_threads(threads: int) -> None:
    tf = import_tensorflow()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def infer(job: dict[str, Any]) -> list[dict[str, Any]]:
    import numpy as np

    artifact = Artifact.from_json(job["artifact"])
    inputs = Feed.one(IMPLIED_INPUT, np.load(job["inputs"], allow_pickle=False))  # a zoo model's one input
    budget = PointBudget(**job["budget"])
    points = []
    for threads, batches in job["points"]:  # [[threads, [batch, ...]], ...]: only the points not stored yet
        if artifact.format in TF_FORMATS:
            _pin_tensorflow_threads(threads)  # the job holds one thread count for these (see sweep.py)
        base = {"threads": threads}
        try:
            rt = make_runtime(job["target"], artifact.format, job["runtime"], threads=threads, warmup_runs=0)
            rt.load(artifact)
        except StageFailed as e:
            points += [{**base, "batch": b, "status": e.status, "reason": e.reason} for b in batches]
            continue
        with rt:
            # what the runtime says it ran with (its thread setting, version): one untimed sample
            env = dict(rt.run(inputs[:1]).environment)
            for batch in batches:
                if rt.fixed_batch is not None and batch != rt.fixed_batch:
                    points.append({**base, "batch": batch, "status": "skipped",
                                   "reason": f"the artifact has a fixed batch of {rt.fixed_batch}"})
                    continue
                peak = PeakRss().start()
                try:
                    times, cpu_s, wall_s = time_point(rt.predict_feed, rt.feed_of(inputs), batch, budget)
                except Exception as e:  # a runtime that fails at one batch: that point's result
                    points.append({**base, "batch": batch, "status": "runtime_failed",
                                   "reason": f"{type(e).__name__}: {first_line_of(str(e))}"})
                    continue
                memory = peak.stop()
                points.append({**base, "batch": batch, "status": "measured",
                               **point_stats(times, batch, cpu_s, wall_s), "memory_bytes": memory,
                               "environment": env})
    return points


def train(job: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    fw, threads = job["framework"], int(job["threads"])
    if fw == "keras":
        _pin_tensorflow_threads(threads)
        import keras  # noqa: F401  (imported here: its CPU time is not the first epoch's)
    else:
        import torch  # noqa: F401
    spec = load_spec(job["model"])
    spec = replace(spec, train=replace(spec.train, batch_size=int(job["batch_size"]), optimizer=job["optimizer"],
                                       learning_rate=float(job["learning_rate"])))
    ds = load_dataset(spec, Path(job["data_dir"]) if job.get("data_dir") else None)
    n = job.get("train_samples")
    if n:
        ds = replace(ds, x_train=ds.x_train[:n], y_train=ds.y_train[:n])
    epochs = int(job["epochs"])
    accuracy: list[float] = []
    cpu_per_epoch: list[float] = []
    marks = {"cpu": 0.0}

    def before_epoch(epoch: int) -> None:
        marks["cpu"] = cpu_seconds()

    def after_epoch(epoch: int, predict: Any) -> None:
        cpu_per_epoch.append(cpu_seconds() - marks["cpu"])
        accuracy.append(float(np.mean(np.asarray(predict(ds.x_test)).argmax(1) == ds.y_test)))

    fit = fit_keras if fw == "keras" else fit_torch
    extra = {} if fw == "keras" else {"threads": threads}
    peak = PeakRss().start()
    with tempfile.TemporaryDirectory(prefix="sweep-train-") as tmp:
        t0 = time.perf_counter()
        _, _, _, seconds, _, _ = fit(spec, ds, epochs, Path(tmp) / FILE_NAMES[fw], False,
                                  after_epoch=after_epoch, before_epoch=before_epoch, **extra)
        wall = time.perf_counter() - t0
    memory = peak.stop()
    return {"seconds_per_epoch": [float(s) for s in seconds], "accuracy_per_epoch": accuracy,
            "cpu_seconds_per_epoch": cpu_per_epoch, "memory_bytes": memory, "wall_seconds": wall,
            "train_samples": int(len(ds.x_train)), "test_samples": int(len(ds.x_test))}


def run(job: dict[str, Any]) -> Any:
    """In the child: one job, its result as JSON values (numpy scalars made floats). A job that fails leaves its
    traceback in the child's log (the sweep's run log) and raises."""
    try:
        result = infer(job) if job["kind"] == "infer" else train(job)
        return json.loads(json.dumps(result, default=float))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        raise
