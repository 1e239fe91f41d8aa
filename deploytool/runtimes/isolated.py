"""In-process runtimes (host rows and the PC baseline) measured in a process of
their own, so a row's memory figure is the model's and not an accident of what
the measuring process imported or ran before. One spawned worker (a
`proc.worker.Worker`) per runtime class, reused for a run's rows: its framework
is imported when it starts, and each row's load + run is one measured span. The
figure is that span's peak RSS above the worker's RSS just before it, after
garbage collection and malloc_trim, so a row measures the same alone and inside
a matrix. This module moves a measurement across the process boundary; the
runtimes and measure.py do the measuring, proc.worker runs the process. It
never compares or stores.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from deploytool import runtimes
from deploytool.artifact import Artifact
from deploytool.data.feed import Feed, as_feed
from deploytool.data.ondisk import STREAM_BYTES, OnDisk, remove_scratch, scratch_dir
from deploytool.errors import StageFailed
from deploytool.proc.quiet import WORKER_ENV
from deploytool.proc.failures import WorkerLost, WorkerTimedOut
from deploytool.latency import PairedLatency, clean_blocks, floor_of
from deploytool.runtimes.base import Outputs, Runtime
from deploytool.runtimes.measure import (
    PAIR_BLOCKS,
    PAIR_CLEAN_WANTED,
    PAIR_FIRST_BLOCKS,
    PAIR_MAX_BLOCKS,
    least_busy_cpus,
    others_busy_fraction,
    pair_blocks,
    release_free_memory,
    time_paired,
)

if TYPE_CHECKING:
    from deploytool.proc.worker import Worker

# What each figure of an isolated measurement is (the report's legend reads these).
ISOLATED_DELTA = "isolated_peak_rss_delta_bytes"
ISOLATED_IDLE = "isolated_idle_rss_bytes"

# Samples of the unmeasured priming run (at least one whole batch of the batched pass's usual size).
PRIMING_SAMPLES = 256
PRIMING_LATENCY_SAMPLES = 20

# glibc's mallopt(M_MMAP_THRESHOLD): a fixed threshold turns off its dynamic raising, which would
# otherwise let a reused worker keep large freed blocks in its heap (and look cheaper on the next row).
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 128 * 1024

# A runtime worker's environment: TensorFlow's native log silenced whole (level 3: its errors too). The worker has no
# log file of its own, so its lines would land on the user's terminal; what fails reaches the row as the exception's
# message (a crash: WorkerLost). A run that imported TensorFlow itself used to pass its level 3 on by inheritance.
RUNTIME_WORKER_ENV = {**WORKER_ENV, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _init_worker(ref: str, *also: str) -> None:
    """A runtime worker's start: `ref`'s framework imported (and those of `also`: a pairing worker's targets)."""
    warnings.filterwarnings("ignore")
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        pass
    for r in (ref, *also):
        _class(r).import_framework()


def _class(ref: str) -> type[Runtime]:
    import importlib

    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def _measure(ref: str, options: dict[str, Any], artifact: Artifact, inputs: Feed) -> Outputs:
    """In the worker: one load + run, its memory taken above the idle RSS just before it.

    The model is first loaded and run once on a few samples, unmeasured: a runtime initialises itself
    lazily (thread pools, kernel registries, the code pages of the kernels this model uses), and
    that would be charged to whichever row came first in this worker.
    """

    cls = _class(ref)
    # The priming run takes the measured run's code path (warm-up, K, the CPU-load check without its wait):
    # a shorter one left ~1.5 MiB of first-use allocations to the first measured row.
    priming = {**options, "latency_samples": PRIMING_LATENCY_SAMPLES, "load_check_s": 0.0}
    with cls(**priming, own_process=True) as primer:
        primer.load(artifact)
        primer.run(inputs[:PRIMING_SAMPLES])
    del primer
    release_free_memory()
    with cls(**options, own_process=True) as rt:
        rt.load(artifact)
        out = rt.run(inputs)
        idle = rt._peak.rss_before_bytes if rt._peak is not None else 0
    delta = out.memory_bytes.pop("process_peak_rss_delta_bytes", None)
    if delta is not None:
        out.memory_bytes[ISOLATED_DELTA] = delta
        out.memory_bytes[ISOLATED_IDLE] = float(idle)
    streamed = sum(a.nbytes for a in inputs.arrays() if isinstance(a, OnDisk))
    if streamed:
        out.notes.append(f"the test set ({streamed / 2**20:,.0f} MiB) was read from a file a batch at a time, "
                         "so the worker's memory does not grow with it")
    out.environment["measured_in"] = (f"own process (pid {os.getpid()}), reused for this runtime's rows; the model "
                                      f"loaded and ran once on {min(len(inputs), PRIMING_SAMPLES)} samples before "
                                      "the measured load + run")
    return out


# Samples a paired timing cycles through (batch 1, the same ones for target and reference).
PAIR_SAMPLES = 200

# In a pairing worker: the reference runtime, loaded once and kept between rows (key -> runtime), and the fastest
# block figure each reference has timed in this worker (key -> ms: its floor, see deploytool.latency).
_REFERENCES: dict[tuple, Any] = {}
_FLOORS: dict[tuple, float] = {}


def _reference(ref: str, options: dict[str, Any], artifact: Artifact) -> tuple[tuple, Any]:
    """(its key, the reference runtime): loaded on first use, the previous one closed."""
    key = (ref, artifact.sha256, tuple(sorted((k, repr(v)) for k, v in options.items())))
    if key not in _REFERENCES:
        for old in _REFERENCES.values():
            old.close()
        _REFERENCES.clear()
        rt = _class(ref)(**options, own_process=True)
        rt.load(artifact)
        _REFERENCES[key] = rt
    return key, _REFERENCES[key]


def _pin(cpus: tuple[int, ...]) -> dict[int, set[int]]:
    """Pin every thread of this process (a framework's pool threads too, not only the caller) to `cpus`;
    returns each thread's former affinity, for `_unpin`."""
    former = {}
    for task in os.listdir("/proc/self/task"):
        tid = int(task)
        try:
            former[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended meanwhile
            continue
    return former


def _unpin(former: dict[int, set[int]]) -> None:
    for tid, cpus in former.items():
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


def _paired(target_ref: str, target_options: dict[str, Any], target_artifact: Artifact, target_inputs: Any,
            ref: str, ref_options: dict[str, Any], ref_artifact: Artifact, ref_inputs: Any,
            reference: str) -> PairedLatency:
    """In a pairing worker: the target and the reference (the PC baseline's model in its runtime, kept loaded)
    timed in alternating blocks, every thread pinned to the CPUs other processes used least just before."""
    key, baseline = _reference(ref, ref_options, ref_artifact)
    floor = _FLOORS.get(key, float("nan"))
    blocks = pair_blocks(target_options.get("latency_samples"))
    full = blocks == PAIR_BLOCKS  # a quick run's timing is not extended

    def enough(t: list[float], r: list[float]) -> bool:
        return int(clean_blocks(t, r, reference_floor_ms=floor).sum()) >= PAIR_CLEAN_WANTED

    if full and not math.isfinite(floor):
        blocks = PAIR_FIRST_BLOCKS
    cls = _class(target_ref)
    cls.import_framework()
    threads = int(target_options.get("threads", 1))
    with cls(**target_options, own_process=True) as rt:
        rt.load(target_artifact)
        cpus = least_busy_cpus(threads)
        former = _pin(cpus) if cpus else {}
        try:
            stat = Path("/proc/stat")
            before, wall, own = stat.read_text(), time.perf_counter(), sum(os.times()[:2])
            timed = time_paired(rt.predict_feed, baseline.predict_feed, rt.feed_of(target_inputs),
                                baseline.feed_of(ref_inputs),
                                int(target_options.get("warmup_runs", 10)), blocks=blocks,
                                max_blocks=PAIR_MAX_BLOCKS if full else 0, enough=enough if full else None)
            wall, own = time.perf_counter() - wall, sum(os.times()[:2]) - own
            others = others_busy_fraction(before, stat.read_text(), own, wall, os.cpu_count() or 1)
        finally:
            _unpin(former)
    t, r = timed["target_ms"], timed["reference_ms"]
    _FLOORS[key] = floor_of(timed["reference_block_ms"], floor)
    plan = timed["plan"]
    return PairedLatency.of(timed["target_block_ms"], timed["reference_block_ms"], reference, cpus=tuple(cpus),
                            reference_floor_ms=floor, budget_s=plan.budget_s, sized=plan.why(*timed["one_inference_s"]),
                            target_p50_ms=float(np.median(t)), target_p90_ms=float(np.percentile(t, 90)),
                            reference_p50_ms=float(np.median(r)), reference_p90_ms=float(np.percentile(r, 90)),
                            readings_per_block=int(timed["readings_per_block"]),
                            others_busy_fraction=None if others is None else round(others, 3),
                            cpu_count=os.cpu_count() or 0)


def _ref(cls: type[Runtime]) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class RuntimeWorkers:
    """`measure(cls, options, artifact, inputs) -> Outputs`, each runtime class in its own reused worker."""

    def __init__(self) -> None:
        self._workers: dict[str, Worker] = {}
        self.started = 0  # workers made (a test counts them); a failed one is replaced by a new one
        # large test sets written once for the run's rows (deploytool.data.ondisk): id -> (the array, its file)
        self._on_disk: dict[int, tuple[np.ndarray, OnDisk]] = {}
        self._scratch: Path | None = None
        self._log: Path | None = None  # where the workers' own output goes (relog); None: this process's

    def relog(self, log_path: Path) -> None:
        """Send every worker's stdout and stderr (native libraries' too: LiteRT's "Created TensorFlow Lite XNNPACK
        delegate" on every interpreter) to `log_path` from now on, this run's log, not the user's terminal; a
        worker that crashes leaves its last lines there."""
        self._log = Path(log_path)
        for worker in self._workers.values():
            worker.relog(self._log)

    def sendable(self, inputs: Feed | np.ndarray) -> Feed:
        """What goes to a worker for `inputs`: each array itself, or, past STREAM_BYTES, as a file the worker
        reads a batch at a time (written once for every row given the same array), so a worker's memory does not
        grow with the test set."""
        return as_feed(inputs).map(lambda _, a: self._streamed(a) if a.nbytes > STREAM_BYTES else a)

    def _streamed(self, a: np.ndarray) -> Any:
        kept = self._on_disk.get(id(a))
        if kept is not None and kept[0] is a:
            return kept[1]
        if self._scratch is None:
            self._scratch = scratch_dir()
        disk = OnDisk.write(a, self._scratch / f"x{len(self._on_disk)}.npy")
        self._on_disk[id(a)] = (a, disk)
        return disk

    def _add(self, key: str, refs: tuple[str, ...], preload: tuple[str, ...]) -> Worker:
        """A new worker under `key` that loads the runtime classes `refs` (not started yet)."""
        # multiprocessing and the forkserver load when a row first needs a worker: a run whose rows are all
        # stored, and every command that measures nothing, start none (bench/bench_user_onnx.py)
        from deploytool.proc.worker import Worker

        self._workers[key] = Worker(_init_worker, refs, log_path=self._log, env=RUNTIME_WORKER_ENV, preload=preload)
        self.started += 1
        return self._workers[key]

    def _worker(self, ref: str) -> Worker:
        if ref not in self._workers:
            self._add(ref, (ref,), _class(ref).preload)
        return self._workers[ref]

    def warm(self, cls: type[Runtime]) -> None:
        """Start `cls`'s worker now (its framework imported), without waiting: a run starts its rows'
        workers while the conversions finish, so no row pays a framework's import."""

        ref = _ref(cls)
        if ref not in self._workers:
            self._worker(ref).start()

    def warm_pairing(self, ref_cls: type[Runtime], targets: list[type[Runtime]]) -> None:
        """Start the pairing worker of `ref_cls` (see `paired`) without waiting, its framework and those of
        `targets` imported: a run starts it while the conversions finish."""
        key = "paired:" + _ref(ref_cls)
        if key not in self._workers:
            also = tuple(dict.fromkeys(_ref(c) for c in targets if c is not ref_cls))
            preload = (*ref_cls.preload, *(p for c in targets for p in c.preload))
            self._add(key, (_ref(ref_cls), *also), preload).start()

    def measure(self, cls: type[Runtime], options: dict[str, Any], artifact: Artifact, inputs: Feed) -> Outputs:
        ref, timeout_s = _ref(cls), options.get("timeout_s")
        try:
            return self._worker(ref).call(_measure, ref, dict(options), artifact,
                                          self.sendable(inputs), timeout=timeout_s)
        except WorkerTimedOut:
            self._workers.pop(ref, None)
            raise StageFailed("timeout", f"{cls.name} took longer than {timeout_s:g} s to load and run the model; "
                                         "it was stopped (raise --timeout if it needs longer)") from None
        except WorkerLost as e:
            self._workers.pop(ref, None)
            raise StageFailed("runtime_failed", f"the {cls.name} runtime's process crashed loading or running "
                                                f"the model ({e.how})") from None

    def paired(self, cls: type, options: dict[str, Any], artifact: Artifact, inputs: Any, ref_cls: type,
               ref_options: dict[str, Any], ref_artifact: Artifact, ref_inputs: Any, reference: str) -> PairedLatency:
        """`cls` on `artifact` timed against `ref_cls` on `ref_artifact` (see `_paired`) in one worker per
        reference runtime: the reference's framework imported once, its model loaded once for a run's rows.
        That worker is not the row's measuring worker, so the row's memory figure is untouched."""
        ref, key, timeout_s = _ref(ref_cls), "paired:" + _ref(ref_cls), options.get("timeout_s")
        self.warm_pairing(ref_cls, [])
        try:
            return self._workers[key].call(_paired, _ref(cls), dict(options), artifact, inputs, ref,
                                           dict(ref_options), ref_artifact, ref_inputs, reference, timeout=timeout_s)
        except (WorkerTimedOut, WorkerLost):
            self._workers.pop(key, None)
            raise

    def call(self, cls: type[Runtime], fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in `cls`'s worker (started if need be): work that needs the runtime's framework, done where
        that framework is imported anyway (a user's .keras read for its signature where its baseline then runs)."""
        ref = _ref(cls)
        try:
            return self._worker(ref).call(fn, *args)
        except WorkerLost as e:
            self._workers.pop(ref, None)
            raise StageFailed("runtime_failed", f"the {cls.name} runtime's process crashed ({e.how})") from None

    def close(self) -> None:
        for ref in list(self._workers):
            self._workers.pop(ref).close()
        self._on_disk.clear()
        if self._scratch is not None:
            remove_scratch(self._scratch)
            self._scratch = None


_open: RuntimeWorkers | None = None


def log_runtime_workers(log_path: Path) -> None:
    """The open workers' output to `log_path` from now on (RuntimeWorkers.relog); nothing without open workers."""
    if _open is not None:
        _open.relog(log_path)


@contextmanager
def runtime_workers() -> Iterator[RuntimeWorkers]:
    """The workers a run's rows share, stopped when it ends. Re-entrant: inside an open one, that one."""
    global _open
    if _open is not None:
        yield _open
        return
    _open = workers = RuntimeWorkers()
    try:
        yield workers
    finally:
        _open = None
        workers.close()


def open_workers() -> RuntimeWorkers | None:
    """The open run's workers (see runtime_workers), None outside a run."""
    return _open


def warm_workers(classes: list[type[Runtime]]) -> None:
    """Start the open run's worker of each in-process runtime class in `classes` (see RuntimeWorkers.warm)."""
    if _open is not None:
        for cls in classes:
            if cls.in_process:
                _open.warm(cls)


def warm_pairing(ref_cls: type[Runtime], targets: list[type[Runtime]]) -> None:
    """Start the open run's pairing worker for `ref_cls` (see RuntimeWorkers.warm_pairing)."""
    if _open is not None and ref_cls.in_process:
        _open.warm_pairing(ref_cls, [c for c in targets if c.in_process])


def measure_in_own_process(cls: type[Runtime], options: dict[str, Any], artifact: Artifact,
                           inputs: Feed) -> Outputs:
    """Load and run `artifact` on runtime `cls` in its worker: the open run's, else one started for this call."""
    with runtime_workers() as workers:
        return workers.measure(cls, options, artifact, inputs)


def paired_latency(cls: type, options: dict[str, Any], artifact: Artifact, inputs: Feed,
                   ref_cls: type, ref_options: dict[str, Any], ref_artifact: Artifact, ref_inputs: Feed,
                   reference: str) -> PairedLatency:
    """A row's latency paired with its reference (RuntimeWorkers.paired) on the first PAIR_SAMPLES samples."""

    with runtime_workers() as workers:  # each side's samples as its runtime takes them (Runtime.feed_of) there
        return workers.paired(cls, options, artifact, inputs[:PAIR_SAMPLES], ref_cls, ref_options, ref_artifact,
                              ref_inputs[:PAIR_SAMPLES], reference)


def load_and_run(target: str, fmt: str, runtime: str, artifact: Artifact, inputs: Feed | np.ndarray,
                 **options: Any) -> Outputs:
    """One row's (or the baseline's) load + run: an in-process runtime in its own worker; a browser or a phone,
    which measure their own process, here."""

    cls = runtimes.runtime_class(target, fmt, runtime)
    if cls.in_process:
        return measure_in_own_process(cls, options, artifact, as_feed(inputs))
    with runtimes.make_runtime(target, fmt, runtime, **options) as rt:
        rt.load(artifact)
        return rt.run(inputs)
