"""The runtime protocol and the `Outputs` value object every runtime returns.

A runtime loads one `Artifact`, runs the whole (already preprocessed) test set
and returns `Outputs`. It never compares, stores or reports: that is the job of
later stages. Measurement is part of the contract: every runtime reports
per-sample latency at batch 1 after warm-up, and memory figures named for what
they measured.
"""

from __future__ import annotations

import time
from dataclasses import field, fields
from typing import Any, ClassVar, Mapping, Self

import numpy as np

from deploytool.artifact import Artifact
from deploytool.errors import StageFailed
from deploytool.data.ondisk import OnDisk
from deploytool.modelfiles.signature import Signature, TensorSpec, match_names
from deploytool.data.feed import (CHANNELS_LAST_OUTPUTS, Feed, OutputLayout, as_feed, layout_of, pad_batch,
                                  restore_channels_first, split)
from deploytool.runtimes.measure import (
    LOAD_CHECK_S,
    PeakRss,
    busy_note,
    cpu_busy_fraction,
    load_environment,
    run_batched,
    whole_set_batch,
    time_batch1,
)
from deploytool.value import value

# Fewer latency samples than this are a quick untimed run (localize's cuts): no CPU-load check.
MIN_TIMED_SAMPLES = 10


def _fitted(t: TensorSpec, a: Any) -> Any:
    """One input's samples checked against its tensor's fixed sample dimensions, float data as its float dtype
    (float32 for a quantized tensor) and C-contiguous; an OnDisk set (a large test set in a file) in float32 as it is."""
    want = t.sample_shape
    given = tuple(a.shape[1:])
    if len(given) != len(want) or any(d is not None and d != g for d, g in zip(want, given)):
        expected = tuple("?" if d is None else d for d in want)
        raise ValueError(f"inputs {t.name} have shape {given}, the model expects {expected}")
    if not t.is_float or a.dtype.kind not in "fiub":
        return a if isinstance(a, OnDisk) else np.ascontiguousarray(a)
    try:
        dtype = np.dtype(t.dtype if t.quantization is None else np.float32)
    except TypeError:  # a float type numpy does not name (bfloat16): float32, which the runtime casts
        dtype = np.dtype(np.float32)
    if isinstance(a, OnDisk) and a.dtype == dtype:
        return a
    return np.ascontiguousarray(a, dtype=dtype)


def check_file_inputs(sig: Signature, pairs: dict[str, str], file_inputs: dict[str, TensorSpec]) -> None:
    """A model file's inputs (`file_inputs`: every one, by the file's names) against the artifact's signature, before
    anything runs (`pairs`: each signature input's name -> the file's, as the runtime bound them): the file takes
    no input the signature does not name, float data needs a float or quantized tensor, and every dimension both
    fix must agree. StageFailed naming the first difference: unsupported, load_failed."""
    if len(file_inputs) != len(sig.inputs):
        raise StageFailed("unsupported", f"the model file takes {len(file_inputs)} inputs ({', '.join(file_inputs)}); "
                                         f"its signature names {len(sig.inputs)} ({', '.join(sig.input_names)})")
    for t in sig.inputs:
        f = file_inputs[pairs[t.name]]
        if t.is_float and not f.is_float:
            raise StageFailed("unsupported", f"tensor {f.name} is {f.dtype} without quantization parameters; "
                                             f"input {t.name} is float data")
        want, got = t.sample_shape, f.sample_shape
        if len(got) != len(want) or any(a is not None and b is not None and a != b for a, b in zip(got, want)):
            raise StageFailed("load_failed", f"the model's input {f.name} is {_dims(f.shape)} but the artifact "
                                             f"says one sample is {_dims(want)}")


def _dims(shape: tuple[int | None, ...]) -> list[int | str]:
    return ["?" if d is None else d for d in shape]


def per_sample(name: str, value: Any) -> np.ndarray:
    """An output as an array of one entry per sample, or StageFailed naming it: a rank-0 output (one value for the
    whole batch) cannot be compared sample by sample."""
    a = np.asarray(value)
    if a.ndim == 0:
        raise StageFailed("unsupported", f"output {name!r} is one value for the whole batch (rank 0), not one per "
                                         "sample; deploytool compares outputs sample by sample: export it with the "
                                         "batch dimension first (keepdims, or shape [N, 1])")
    return a


@value(frozen=False)
class LatencyStats:
    n: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def from_samples(cls, samples_ms: np.ndarray) -> "LatencyStats":
        s = np.asarray(samples_ms, dtype=np.float64)
        if s.size == 0:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan, nan, nan)
        p50, p90, p99 = np.percentile(s, [50, 90, 99])
        return cls(int(s.size), float(s.mean()), float(p50), float(p90), float(p99),
                   float(s.min()), float(s.max()))


@value(frozen=False)
class Outputs:
    """What one runtime produced for one artifact over the whole test set."""

    outputs: np.ndarray  # (N, num_outputs) float32: the model's outputs, dequantized
    latency_ms: np.ndarray  # batch-1 latency per timer reading, after warm-up (a mean of K inferences each)
    # name -> bytes; each name says what was measured, e.g.
    # "process_peak_rss_delta_bytes", "renderer_peak_rss_bytes", "js_heap_bytes".
    memory_bytes: dict[str, float] = field(default_factory=dict)
    load_ms: float | None = None
    first_inference_ms: float | None = None
    throughput_sps: float | None = None  # samples/s at the larger batch
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    inferences_per_reading: int = 1  # K: batch-1 inferences timed by one timer reading
    # (name, one sample's shape) of each output when `outputs` holds several side by side (a model with a
    # signature: deploytool.data.feed.split); None: one output of class scores, as image models have
    output_layout: OutputLayout | None = None

    @property
    def latency(self) -> LatencyStats:
        return LatencyStats.from_samples(self.latency_ms)


@value
class RuntimeOptions:
    """Base of a runtime's typed options (its class's `Options`), built once by `from_dict` from the options a
    row's target gives (`Target.runtime_options`). By default a key the runtime has no field for is not its
    business (`timeout_s` is a worker's, `backend` a browser's) and is left out; a runtime that checks its
    options refuses it in its own `from_dict`."""

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> Self:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in options.items() if k in names})


@value
class HostOptions(RuntimeOptions):
    """How an in-process runtime (a host runtime, the PC baseline's) measures (`Runtime._measure`)."""

    threads: int = 1
    warmup_runs: int = 10
    latency_samples: int | None = None  # batch-1 timings; None: one per test sample, within LATENCY_BUDGET_S
    batch_size: int = 256  # of the whole-set pass, at most (measure.whole_set_batch; a fixed-batch model: its own)
    load_check_s: float = LOAD_CHECK_S  # how long the CPU load is watched before timing

    def __post_init__(self) -> None:
        # the numbers arrive as whatever the caller held (a numpy int, a TOML float): kept as this class says
        object.__setattr__(self, "threads", int(self.threads))
        object.__setattr__(self, "warmup_runs", int(self.warmup_runs))
        object.__setattr__(self, "batch_size", int(self.batch_size))
        object.__setattr__(self, "load_check_s", float(self.load_check_s))


class Runtime:
    """Base class: `load(artifact)`, `run(inputs) -> Outputs`, `close()`.

    Usable as a context manager. Subclasses implement `_load`, `_run`, `_close`.
    `inputs` are float32 in the artifact's layout, one row per sample; quantized
    I/O is handled by the runtime (quantize in, dequantize out).
    """

    name = "base"
    formats: tuple[str, ...] = ()
    # Where its faults are reported (a GitHub project) and the Python distribution that is it ("" for none: a
    # browser library or a phone binary): triage reads the distribution's pins, findings address the owner.
    owner: ClassVar[str] = ""
    dist: ClassVar[str] = ""
    # A runtime in a browser: artifact format -> (the npm library that runs it, the npm packages a standalone
    # page needs for it); empty for every other runtime (a bug bundle's browser reproducer reads it).
    npm: ClassVar[Mapping[str, tuple[str, tuple[str, ...]]]] = {}
    Options: ClassVar[type[RuntimeOptions]] = HostOptions
    options: RuntimeOptions
    # The frameworks (proc.forkserver.PRELOADS) its measuring worker imports: such a worker is forked from a server
    # that imported them once, not spawned to import them again.
    preload: ClassVar[tuple[str, ...]] = ()
    # In-process runtimes get load time and this process's peak RSS measured by
    # the base class; out-of-process ones (browser, phone) measure their own.
    in_process = True

    @classmethod
    def owner_for(cls, fmt: str) -> str:
        """The project that owns this runtime for `fmt` files (one runtime class may run several libraries)."""
        return cls.owner

    @classmethod
    def import_framework(cls) -> None:
        """Import what `_load` needs (called once in a measuring worker, before any measured span)."""

    def __init__(self, **options: Any):
        self.options = self.Options.from_dict(options)
        self.artifact: Artifact | None = None
        self._peak: PeakRss | None = None
        self._load_ms: float | None = None

    def load(self, artifact: Artifact) -> None:
        if artifact.format not in self.formats:
            raise ValueError(f"{self.name} cannot run {artifact.format} artifacts")
        if self.artifact is not None:
            # A second load replaces the first: closed first, so a browser or a device folder is never orphaned.
            self.close()
        self.artifact = artifact
        if self.in_process:
            self._peak = PeakRss().start()
        t0 = time.perf_counter()
        self._load(artifact)
        self._load_ms = (time.perf_counter() - t0) * 1e3

    def run(self, inputs: Feed | np.ndarray) -> Outputs:
        if self.artifact is None:
            raise RuntimeError("load() an artifact before run()")
        return self._finish(self._run(self.feed_of(as_feed(inputs))))

    def feed_of(self, inputs: Feed) -> Feed:
        """The given inputs as the artifact's signature names them, each checked and contiguous: paired with the
        signature's inputs by name (match_names: the same name, the same without a converter's decorations, or by
        position when the counts agree), of the sample shape its fixed dimensions say, float data as the input's
        float dtype (a quantized input takes float32: the runtime quantizes it). A test set in a file (OnDisk) as it
        is: the runtimes only take slices of it (measure.time_batch1, run_batched), each read then, never the whole."""
        assert self.artifact is not None
        sig = self.artifact.signature
        try:
            if len(inputs.names) != len(sig.inputs):
                raise KeyError(f"given {len(inputs.names)}")
            pairs = match_names(sig.input_names, list(inputs.names))
        except KeyError:
            raise ValueError(f"the model takes {len(sig.inputs)} input(s) ({', '.join(sig.input_names)}), given "
                             f"{len(inputs.names)} ({', '.join(inputs.names)})") from None
        return Feed({t.name: _fitted(t, inputs[pairs[t.name]]) for t in sig.inputs})

    def _as_row(self, out: Feed) -> tuple[np.ndarray, OutputLayout]:
        """A run's named outputs as a row stores them: side by side as float32 (Feed.flat), with their layout."""
        return out.flat(), layout_of(out)

    def _restore_layouts(self, out: Outputs) -> Outputs:
        """Outputs a converter made channels-last (deploytool.data.feed.CHANNELS_LAST_OUTPUTS) laid out as the
        source's channels-first ones, here for every runtime."""
        art = self.artifact
        names = list((art.options.get(CHANNELS_LAST_OUTPUTS) or []) if art is not None else [])
        if not names or art is None or out.output_layout is None:
            return out
        shapes = {t.name: tuple(int(d or 0) for d in t.sample_shape) for t in art.signature.outputs}
        fixed = restore_channels_first(split(out.outputs, out.output_layout), names, shapes)
        out.outputs, out.output_layout = fixed.flat(), layout_of(fixed)
        out.notes.append(f"output(s) {', '.join(names)} come channels-last from the converter; laid out "
                         "channels-first as the source gives them before comparison")
        return out

    def _finish(self, out: Outputs) -> Outputs:
        out = self._restore_layouts(out)
        if self.in_process:
            if out.load_ms is None:
                out.load_ms = self._load_ms
            if self._peak is not None:
                out.memory_bytes.update(self._peak.stop())
        return out

    def close(self) -> None:
        self._close()

    @property
    def fixed_batch(self) -> int | None:
        """The batch a fixed-batch artifact is run at (None: any batch). Smaller batches are padded to it."""
        return getattr(self, "_fixed_batch", None)

    def _to_fixed_batch(self, x: Feed) -> Feed:
        """`x` as a fixed-batch artifact takes it: padded with zero samples after its own (the runtime's outputs are
        cut back to len(x)); more samples than the batch holds is an error. Any batch goes as it is otherwise."""
        fixed = self.fixed_batch
        if fixed is None or len(x) == fixed:
            return x
        if len(x) > fixed:
            raise ValueError(f"{len(x)} samples given to a model with a fixed batch of {fixed}")
        return pad_batch(x, fixed)

    def predict(self, x: Feed | np.ndarray) -> Feed:
        """One batch through the loaded model, untimed, for a caller that times batches itself: its named outputs.
        In-process runtimes only: the browser and the phone run whole sets (`run`)."""
        if self.artifact is None:
            raise RuntimeError("load() an artifact before predict()")
        return self._predict(self.feed_of(as_feed(x)))

    def predict_feed(self, x: Feed) -> Feed:
        """One batch of named inputs (`feed_of`) through the loaded model, as the measuring loops call it: nothing
        is converted, so a timed call times the runtime (paired timing, the sweep)."""
        return self._predict(x)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _measure(self, inputs: Feed, batch_size: int, environment: dict[str, Any],
                 notes: list[str] | None = None) -> Outputs:
        """The in-process measurement every host runtime shares, through its `_predict` (named inputs in, named
        outputs out): batch-1 latency after warm-up, then the whole set in batches for outputs and throughput.
        `inputs` come bound as the artifact takes them (`run` calls `feed_of` once, before any timed call)."""
        notes = list(notes or [])
        predict = self._predict
        opts = self.options
        assert isinstance(opts, HostOptions), f"{self.name} does not measure in this process"
        threads, samples, warmup = opts.threads, opts.latency_samples, opts.warmup_runs
        busy = None
        if samples is None or samples >= MIN_TIMED_SAMPLES:  # a single untimed run (localize) needs no check
            busy = cpu_busy_fraction(opts.load_check_s)
            note = busy_note(busy, threads)
            if note:
                notes.append(note)
        lat, first_ms, k = time_batch1(predict, inputs, warmup, samples)
        if k > 1:
            notes.append(f"latency: one inference takes under 50 µs, so each timer reading timed {k} batch-1 "
                         f"inferences and was divided by {k}; p90/p99 are of those means")
        batches: list[int] = []  # the batched pass's calls, by size (counted outside any timed call)

        def counted(x: Feed) -> Feed:
            batches.append(len(x))
            return predict(x)

        if self.fixed_batch is None:  # a fixed-batch model runs at its own batch; others by the bytes of a batch
            batch_size = whole_set_batch(inputs, batch_size)
        named, seconds = run_batched(counted, inputs, batch_size)
        outputs, layout = self._as_row(named)
        env = {**environment, "throughput_batch": batch_size, "threads": threads, "latency_inferences_per_reading": k,
               # what this row asked of the runtime: the first call, the warm-up, every timed inference; the batches
               "inference_calls": {"batch1": 1 + warmup + k * len(lat), "batched": batches}}
        env.update(load_environment(busy))
        return Outputs(outputs=outputs, latency_ms=lat, first_inference_ms=first_ms,
                       throughput_sps=len(inputs) / seconds if seconds > 0 else None,
                       environment=env, notes=notes, inferences_per_reading=k, output_layout=layout)

    # hooks
    def _load(self, artifact: Artifact) -> None:
        raise NotImplementedError

    def _run(self, inputs: Feed) -> Outputs:
        raise NotImplementedError

    def _predict(self, x: Feed) -> Feed:
        """One batch of the artifact's named inputs (Artifact.signature) to its named outputs: an in-process
        runtime's one path, whatever the model."""
        raise NotImplementedError(f"the {self.name} runtime runs whole sets only")

    def _close(self) -> None:
        pass
