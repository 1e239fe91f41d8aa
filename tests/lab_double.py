"""A runtime test double for the lab's regression tests (named as one): it runs the
real LiteRT interpreter for the outputs, then replaces the measured latencies with
a seeded synthetic distribution (so identical nights are identical, as they would
be on a quiet machine) scaled by `SLOWER`, and flips the top class of the first
`FLIPS` samples (both only in runs with `only_threads` threads, when that knob is set,
so one cell of a night can regress alone). Registered on the host target as runtime "lab-double".
The row also says it was timed on a quiet machine (`busy`: the share of the CPUs other
processes took before timing, 0 by default), as its synthetic latencies were; `busy`
None keeps the row's real reading, and `real_latency` keeps LiteRT's real timings
(scaled by `slower`): the noise benchmark runs nights under a real CPU burner so.
`band_runs` >= 0 makes only the next `band_runs` runs slower, the others not: a process
that lands in a runtime's slower band (onnxruntime's LeNet-5 reads +25% in about one
process in four beside the PC baseline on the 2-core VM).

Processes the test starts (a `dask worker`, a `deploytool lab run` driver) get the
double with `--preload tests.lab_double` or `register()`, and its knobs from
$LAB_DOUBLE_KNOBS (JSON); `sleep_s` holds each run that long (a cell to kill
mid-way), and `log` names a file that gets a `start PID` and a `done PID` line per
measured cell (nothing may be measured twice)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from deploytool import runtimes
from deploytool.artifact import Artifact
from deploytool.data.feed import Feed
from deploytool.runtimes.base import Outputs
from deploytool.runtimes.litert import LiteRTRuntime

KNOBS: dict[str, Any] = {"slower": 1.0, "flips": 0, "seed": 0, "sleep_s": 0.0, "log": "", "only_threads": 0, "busy": 0.0,
         "real_latency": False, "band_runs": -1}


class LabDouble(LiteRTRuntime):
    name = "lab-double"
    # run where the cell runs, not in a spawned measuring worker: the knobs a test sets live in this process
    in_process = False

    def _run(self, inputs: Feed) -> Outputs:
        out = super()._run(inputs)
        _log("start")
        if KNOBS["sleep_s"]:
            time.sleep(float(KNOBS["sleep_s"]))
        rng = np.random.default_rng(KNOBS["seed"])
        chosen = not KNOBS["only_threads"] or self._threads == KNOBS["only_threads"]
        slower = KNOBS["slower"] if chosen else 1.0
        if KNOBS["band_runs"] >= 0:  # a slower band of a few processes: `slower` for the next band_runs runs only
            slower = slower if KNOBS["band_runs"] > 0 else 1.0
            KNOBS["band_runs"] = max(0, KNOBS["band_runs"] - 1)
        if KNOBS["real_latency"]:
            out.latency_ms = np.asarray(out.latency_ms) * slower
        else:
            out.latency_ms = rng.lognormal(np.log(0.2 * slower), 0.2, len(out.latency_ms))
        if KNOBS["busy"] is not None:
            out.environment["cpu_busy_fraction_before_timing"] = float(KNOBS["busy"])
        n = int(KNOBS["flips"]) if chosen else 0
        if n:
            top = out.outputs[:n].argmax(1)
            out.outputs[np.arange(n), (top + 1) % out.outputs.shape[1]] += 1000.0
        out.environment["runtime"] = self.name
        _log("done")
        return out


class SlowLiteRT(LiteRTRuntime):
    """The real LiteRT interpreter made really slower: after each inference it spins for ($LAB_SLOWER - 1) x the
    time the inference took (read when a model loads; 1.0 by default). Unlike LabDouble it is measured in a
    spawned worker and timed against the PC baseline like any host row (registered as runtime "lab-slow"), so a
    slowdown reaches the paired ratio as a real regression would."""

    name = "lab-slow"

    def _load(self, artifact: Artifact) -> None:
        self._extra = max(0.0, float(os.environ.get("LAB_SLOWER") or 1.0) - 1.0)
        super()._load(artifact)

    def _predict(self, x: Feed) -> Feed:
        t = time.perf_counter()
        out = super()._predict(x)
        if self._extra:
            until = time.perf_counter() + self._extra * (time.perf_counter() - t)
            while time.perf_counter() < until:
                pass
        return out


def _log(what: str) -> None:
    if KNOBS["log"]:
        with open(KNOBS["log"], "a") as f:
            f.write(f"{what} {os.getpid()}\n")


def register() -> None:
    KNOBS.update(json.loads(os.environ.get("LAB_DOUBLE_KNOBS") or "{}"))
    runtimes.register("host", "tflite", "lab-double", LabDouble)
    runtimes.register("host", "tflite", "lab-slow", SlowLiteRT)


def unregister() -> None:
    runtimes.unregister("host", "tflite", "lab-double")
    runtimes.unregister("host", "tflite", "lab-slow")


def dask_setup(worker: object) -> None:
    """`dask worker --preload tests.lab_double`: the worker's cells can run the double."""
    register()
