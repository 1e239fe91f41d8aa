"""The web runtime: run one artifact on the whole test set in headless Chromium
(TF.js graph models on the wasm, cpu, webgl or webgpu backend; ONNX on
onnxruntime-web's wasm or its WebGPU execution provider; TFLite on
tfjs-tflite) and return the same `Outputs` as every other runtime. A WebGPU
row runs in the session's WebGPU browser, records the adapter it got (a
software one is said to be), the TF.js flags that set how the backend
computes, and which ONNX nodes fell back from WebGPU to wasm; without an
adapter it is `unsupported`, with the browser's reason.

Each `load()`/`close()` is one fresh page (a renderer process of its own) in
the browser of a `WebSession`: the run's shared one (option `session`, given
by the web target while a run is open) or one of its own. The browser's
profile is shared by its pages, so a row after the first takes the libraries
from its HTTP cache and their compiled code from V8's code cache; the row's
model and inputs are never cached. Tensors move as raw bytes over
the loopback HTTP server (inputs served from memory and fetched by the page,
outputs and latencies POSTed back); `page.evaluate` carries only small JSON.
Full-int8 TFLite I/O is quantized and dequantized here with `deploytool.modelfiles.tflite_io`, as
on every other TFLite target. A fault in the page (an error, a crashed
renderer, a model the browser cannot load, a run past `timeout_s`) becomes
`StageFailed` with the browser's own message and ends the row's page; a
crash or a hang also discards the browser (the session relaunches one for
the next row), and a runtime with a browser of its own closes it. This
module must not compare outputs or touch the store.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Self
from urllib.parse import quote, unquote

import numpy as np

from deploytool.artifact import Artifact
from deploytool.data.feed import Feed
from deploytool.devices.browser import find_chromium
from deploytool.devices.web_harness import check_harness, library_versions
from deploytool.errors import BadModelFile, StageFailed, UnknownOption
from deploytool.modelfiles.onnx_external import external_locations
from deploytool.modelfiles.signature import match_names
from deploytool.modelfiles.tflite_io import NamedTensors, quantization_notes, tflite_tensors
from deploytool.runtimes.base import MIN_TIMED_SAMPLES, Outputs, Runtime, RuntimeOptions, check_file_inputs
from deploytool.runtimes.measure import LATENCY_BUDGET_S, MIN_READINGS, cpu_busy_fraction, load_environment
from deploytool.runtimes.web_backends import BACKENDS, FORMAT_BACKENDS
from deploytool.runtimes.web_gpu import adapter_label, is_software_adapter, ort_placement
from deploytool.runtimes.web_session import WebSession
from deploytool.value import value

NO_ADAPTER = "no WebGPU adapter: "  # the page's words when the browser offers none
# A WebGPU row times this many samples at batch 1 unless told how many: on a software adapter one sample takes
# 60-280 ms (LeNet-5 on SwiftShader, Chromium 156), so timing a whole test set would take many minutes per row.
# Every sample's outputs still come from the whole-set pass.
WEBGPU_LATENCY_SAMPLES = 100
# The page's words when a run's pace shows it cannot finish by the row's deadline (harness.js: OVER_TIME): it stops
# there, after a second of inference, rather than running on to timeout_s
OVER_TIME = "the run cannot finish within its time limit:"
ORT_LOG_LINE = re.compile(r"\[[VI]:onnxruntime")  # onnxruntime-web's own verbose/info log, not an error
DEFAULT_THREADS = 1
# A WebOptions' chunk_bytes: 16 MiB of inputs (27 images of 224x224x3 float32, 5,000 of 28x28x1). Measured
# (bench/bench_web_chunks.py, onnxruntime-web wasm): the renderer's peak RSS from 200 to 1,600 images of 224x224x3
# grows 4.60x sent in one piece, 2.22x in chunks of 256 MiB, 1.20x of 32 MiB, 1.06x of 16 MiB.
CHUNK_BYTES = 16 * 2**20


@value
class WebOptions(RuntimeOptions):
    """What one row asks of the browser. Checked: an unknown key or a value out of range is a typed one-line
    error naming it; a key given as None takes its default (as from the CLI)."""

    backend: str = "wasm"  # one of BACKENDS
    threads: int = DEFAULT_THREADS
    warmup_runs: int = 10
    latency_samples: int | None = None  # None: one per test sample
    timeout_s: float = 600.0
    batch_size: int = 64  # of the whole-set pass in the page
    # the test set goes to the page in chunks of at most this many bytes of inputs (at least one sample each), so
    # the renderer's memory does not grow with the number of samples; the first chunk is also the one timed
    chunk_bytes: int = CHUNK_BYTES
    # with latency_samples None, the page's batch-1 timing stops after this many seconds (MIN_READINGS kept)
    latency_budget_s: float = LATENCY_BUDGET_S
    session: WebSession | None = None  # the run's shared browser and server; None: this row's own

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> Self:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise UnknownOption(f"web runtime has no option {', '.join(unknown)}; "
                                f"options are {', '.join(OPTIONS)}")
        return cls(**{k: v for k, v in options.items() if v is not None})

    def __post_init__(self) -> None:
        def set_(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        set_("backend", str(self.backend))
        if self.backend not in BACKENDS:
            raise UnknownOption(f"unknown web backend {self.backend!r}; backends are {', '.join(BACKENDS)}")
        set_("threads", int(self.threads))
        set_("warmup_runs", int(self.warmup_runs))
        set_("latency_samples", None if self.latency_samples is None else int(self.latency_samples))
        set_("batch_size", int(self.batch_size))
        set_("timeout_s", float(self.timeout_s))
        set_("chunk_bytes", int(self.chunk_bytes))
        set_("latency_budget_s", float(self.latency_budget_s))
        if self.threads < 1 or self.warmup_runs < 0 or self.batch_size < 1 or self.timeout_s <= 0 \
                or (self.latency_samples is not None and self.latency_samples < 1) or self.chunk_bytes < 1 \
                or not self.latency_budget_s > 0:
            raise UnknownOption("web runtime options out of range: threads>=1, warmup_runs>=0, "
                                "batch_size>=1, latency_samples>=1 or None, timeout_s>0, chunk_bytes>=1, "
                                "latency_budget_s>0")
        if self.session is not None and not isinstance(self.session, WebSession):
            raise UnknownOption("web runtime option session must be a WebSession")


OPTIONS = tuple(f.name for f in fields(WebOptions))  # the names a caller may pass

def _tfjs_signature(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """A TF.js graph model's signature (model.json): input and output keys, each with its tensor's name."""
    folder = path.parent if path.is_file() else path
    meta = json.loads((folder / "model.json").read_text())
    sig = meta.get("signature") or (meta.get("userDefinedMetadata") or {}).get("signature") or {}
    return ({k: v.get("name", k) for k, v in (sig.get("inputs") or {}).items()},
            {k: v.get("name", k) for k, v in (sig.get("outputs") or {}).items()})


def _one_line(text: object, limit: int = 600) -> str:
    text = str(text).split("Call log:")[0]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class WebRuntime(Runtime):
    """Runs an artifact in headless Chromium, with its `WebOptions`: the backend ("wasm", "cpu", "webgl" or
    "webgpu" for TF.js graph models; "wasm" or "webgpu" — the WebGPU execution provider — for ONNX; TFLite runs on
    tfjs-tflite's wasm), wasm threads (always set explicitly in the page), warm-up runs, batch-1 latency samples
    (a WebGPU row times WEBGPU_LATENCY_SAMPLES unless told), the whole-set batch (1 for a fixed batch), a time limit
    for loading and for running, each, and a `WebSession` whose browser and server it shares (a run's rows do;
    without one it launches its own).

    Memory figures, each named for what it measured: renderer_peak_rss_bytes
    (VmHWM of the Chromium renderer), js_heap_used_bytes (performance.memory:
    JS objects and ArrayBuffers, not wasm memory), wasm_memory_bytes (the
    runtime's wasm heap, where the library exposes it), tfjs_tensor_bytes
    (tf.memory()), gpu_process_peak_rss_bytes (webgl, webgpu: the GPU process,
    SwiftShader's here).
    """

    name = "web"
    npm = {"tfjs_graph": ("@tensorflow/tfjs", ("@tensorflow/tfjs", "@tensorflow/tfjs-backend-wasm",
                                               "@tensorflow/tfjs-backend-webgpu")),
           "onnx": ("onnxruntime-web", ("onnxruntime-web",)),
           "tflite": ("@tensorflow/tfjs-tflite", ("@tensorflow/tfjs", "@tensorflow/tfjs-tflite"))}
    # tfjs-tflite lives in the tfjs repository; onnxruntime-web in onnxruntime's
    OWNERS = {"tfjs_graph": "tensorflow/tfjs", "tflite": "tensorflow/tfjs", "onnx": "microsoft/onnxruntime"}

    @classmethod
    def owner_for(cls, fmt: str) -> str:
        return cls.OWNERS.get(fmt, "")
    formats = ("tfjs_graph", "onnx", "tflite")
    in_process = False
    Options = WebOptions
    options: WebOptions

    def __init__(self, **options: Any):
        super().__init__(**options)
        session = self.options.session
        # a WebGPU row times a sample of the test set unless told how many (see WEBGPU_LATENCY_SAMPLES)
        self.latency_capped = self.options.latency_samples is None and self.options.backend == "webgpu"
        if self.latency_capped:
            self.options = replace(self.options, latency_samples=WEBGPU_LATENCY_SAMPLES)
        self._session: WebSession | None = session
        self._own_session = session is None
        self._browser: Any = None
        self._server: Any = None
        self._page: Any = None
        self._row = secrets.token_hex(6)  # this row's URL prefix in the shared server
        self._mounted: list[str] = []
        self._earlier_renderers: set[int] = set()  # a fresh page gets a renderer of its own
        self._root: Path | None = None
        self._facts: dict[str, Any] = {}
        self._timings_ms: dict[str, float] = {}
        # a TFLite file's tensors by the source's names (their quantization), and the page's names for the
        # artifact's named inputs and outputs (Artifact.signature)
        self._tensors: NamedTensors | None = None
        self._in_names: dict[str, str] = {}
        self._out_names: list[str] = []
        self._external_data: list[dict[str, str]] = []  # ONNX weights kept beside the model
        self._console_errors: list[str] = []
        self._crashed = False
        self._paced_out = False  # the page stopped a run its pace showed could not finish in time (OVER_TIME)
        # Every Chromium process of the last browser, kept after close so a
        # caller can check that none outlived it.
        self.last_process_ids: set[int] = set()

    # ---- load
    def _load(self, artifact: Artifact) -> None:
        t_start = time.perf_counter()
        if artifact.size_bytes > BROWSER_MAX_MODEL_BYTES:  # before a browser or a page is started for it
            raise StageFailed("unsupported", f"the model is {artifact.size_bytes / 2**30:.3g} GiB; a browser runtime "
                                             "holds it in a WebAssembly heap of at most 4 GiB, once as the file and "
                                             "again as tensors, so models over 2 GiB are not run in the browser")
        offered = FORMAT_BACKENDS.get(artifact.format, ("wasm",))
        if self.options.backend not in offered:
            raise StageFailed("unsupported", f"backend={self.options.backend} does not run {artifact.format} models "
                                             f"in the browser; they run on {', '.join(offered)}")
        if self._own_session:
            self._session = WebSession(find_chromium(), check_harness())
        session = self._session
        assert session is not None  # the one given, or this row's own
        model_route, model_url = self._model_route(artifact)
        if artifact.format == "tflite":
            self._tensors = self._tflite_tensors(artifact)
        with self._faults_end_the_row():
            self._server = session.server()
            self._root = session.harness_root
            self._server.mount(model_route)
            self._mounted = list(model_route)
            self._browser = session.browser(webgpu=self.options.backend == "webgpu")
            self._timings_ms["browser_launch"] = session.take_launch_ms()
            t0 = time.perf_counter()
            # Peaks from here on are this row's (a GPU process outlives rows; a fresh page's
            # renderer starts fresh anyway).
            self._browser.reset_peak_rss("gpu-process")
            self._earlier_renderers = set(self._browser.live_process_ids("renderer"))
            self._page = self._browser.new_page()
            self._watch(self._page)
            self._page.goto(f"{self._server.origin}/index.html", wait_until="load",
                            timeout=self.options.timeout_s * 1e3)
            self._timings_ms["page_open"] = (time.perf_counter() - t0) * 1e3
            self._facts = self._browser.describe(self._page)
            cfg = {"format": artifact.format, "backend": self.options.backend, "threads": self.options.threads,
                   "modelUrl": model_url, "externalData": self._external_data}
            facts = self._job("load", cfg)
        self._facts.update(facts)
        self._bind(artifact, facts)
        for k in ("library_load_ms", "backend_init_ms", "model_load_ms"):
            self._timings_ms[k[:-3]] = float(facts.get(k) or 0.0)
        self._timings_ms["load_total"] = (time.perf_counter() - t_start) * 1e3

    @contextmanager
    def _faults_end_the_row(self) -> Iterator[None]:
        """Any fault ends this row's page; a browser's own error becomes this combination's result.
        Only an error the page itself reported leaves the browser to the next row: after a crash, a
        hang or anything else it is discarded (or closed, when it is this runtime's own)."""
        try:
            yield
        except BaseException as e:
            healthy = (isinstance(e, StageFailed) and (e.status != "timeout" or self._paced_out) and not self._crashed
                       and self._browser is not None and self._browser.connected)
            self._teardown(keep_browser=healthy)
            if isinstance(e, StageFailed):
                raise
            if _is_playwright_error(e):
                raise StageFailed(*self._classify(e)) from e
            raise

    def _model_route(self, artifact: Artifact) -> tuple[dict[str, Path], str]:
        """The routes that serve this row's model, under a prefix of its own in the shared server."""
        prefix = f"/model/{self._row}/"
        path = Path(artifact.path)
        if artifact.format == "tfjs_graph":
            folder = path.parent if path.is_file() else path
            if not (folder / "model.json").is_file():
                raise StageFailed("load_failed", f"no model.json in {folder}: not a TF.js graph model")
            return {f"{prefix}": folder}, f"{prefix}model.json"
        if not path.is_file():
            raise StageFailed("load_failed", f"model file {path} does not exist")
        name = "model." + ("onnx" if artifact.format == "onnx" else "tflite")
        routes = {f"{prefix}{name}": path}
        self._external_data = []
        if artifact.format == "onnx":
            for location in _onnx_external_data(path):
                # Served under its own relative name: the page tells
                # onnxruntime-web where each external file is.
                url = prefix + quote(location)
                routes[unquote(url)] = path.parent / location
                self._external_data.append({"path": location, "data": url})
        return routes, f"{prefix}{name}"

    def _bind(self, artifact: Artifact, facts: dict[str, Any]) -> None:
        """The page's input and output names for the artifact's named ones (Artifact.signature; match_names pairs a
        model's one input and output whatever they are called): a TFLite file's own tensor names, read with LiteRT
        (its inputs checked against the signature's, check_file_inputs); a TF.js model's by its model.json
        signature; otherwise the names the page's library gives. The one load path, whatever the model."""
        sig = artifact.signature
        tfjs_sig = _tfjs_signature(Path(artifact.path)) if artifact.format == "tfjs_graph" else ({}, {})
        try:
            if self._tensors is not None:
                ins = match_names(sig.input_names, list(self._tensors.inputs))
                outs = match_names(sig.output_names, list(self._tensors.outputs))
                check_file_inputs(sig, ins, {m: t.spec() for m, t in self._tensors.inputs.items()})
                self._tensors = NamedTensors({src: self._tensors.inputs[m] for src, m in ins.items()},
                                             {src: self._tensors.outputs[m] for src, m in outs.items()})
                self._in_names = {src: q.name for src, q in self._tensors.inputs.items()}
                self._out_names = [self._tensors.outputs[n].name for n in sig.output_names]
            elif all(tfjs_sig):  # a TF.js model.json's signature: its keys, each with its node's name
                ins, outs = tfjs_sig
                self._in_names = {s: ins[k] for s, k in match_names(sig.input_names, list(ins)).items()}
                self._out_names = [outs[k] for k in (match_names(sig.output_names, list(outs))[n]
                                                     for n in sig.output_names)]
            else:
                self._in_names = match_names(sig.input_names, list(facts.get("input_names") or []))
                outs = match_names(sig.output_names, list(facts.get("output_names") or []))
                self._out_names = [outs[n] for n in sig.output_names]
        except KeyError as e:
            raise StageFailed("load_failed", f"browser: {e.args[0]}") from None

    def _tflite_tensors(self, artifact: Artifact) -> NamedTensors:
        """A TFLite file's tensors, read with LiteRT (a file it cannot read will not load in the page either)."""
        try:
            return tflite_tensors(str(artifact.path))
        except Exception as e:
            raise StageFailed("load_failed", f"cannot read TFLite model: {_one_line(e)}") from e

    # ---- run
    def _blobs(self, inputs: Feed) -> tuple[list[str], dict[str, Any]]:
        """Each named input's bytes served to the page (quantized where the TFLite tensor is int8): their URLs and
        the part of the run's config that describes them."""
        specs, urls = [], []
        for k, (src, a) in enumerate(inputs.items()):
            url = f"/data/{self._row}/input_{k}.bin"
            q = self._tensors.inputs[src] if self._tensors is not None else None
            data = np.ascontiguousarray(q.quantize(a) if q is not None and q.quantized else a)
            self._server.put_blob(url, data)  # served from this array's memory: no file
            urls.append(url)
            specs.append({"url": url, "dtype": data.dtype.name, "shape": list(a.shape[1:]),
                          "model": self._in_names[src]})
        return urls, {"inputs": specs, "outputs": self._out_names}

    def _run(self, inputs: Feed) -> Outputs:
        if self._page is None:
            raise StageFailed("runtime_failed", "the browser is closed after an earlier failure")
        self._paced_out = False  # this run's own
        n = len(inputs)
        per_sample = max(1, inputs.nbytes // max(n, 1))
        step = max(1, int(self.options.chunk_bytes) // per_sample)
        head = max(step, min(self.options.latency_samples or 0, n))  # the first chunk holds the samples timed
        # timeout_s holds for the whole set, however many chunks it takes (it had held for each chunk: a slow
        # real-size row in 3 chunks ran 3 times its limit)
        deadline = time.monotonic() + self.options.timeout_s
        parts = [self._run_chunk(inputs[:head], True, deadline)]
        for i in range(head, n, step):
            self._pace(parts, n - i, deadline)
            parts.append(self._run_chunk(inputs[i:i + step], False, deadline))
        res, given, latency, timings, memory, busy = parts[0]
        if len(parts) > 1:  # one result for the whole set: outputs in order, the costs summed, memory's peak
            given = Feed.concat([p[1] for p in parts])
            for p in parts[1:]:
                for k, v in p[3].items():
                    timings[k] = timings.get(k, 0.0) + v
                for k, v in p[4].items():
                    memory[k] = max(memory.get(k, 0.0), v)
            res = {**res, "n": n, "whole_set_ms": sum(p[0]["whole_set_ms"] for p in parts)}
        outputs, layout = self._as_row(given)
        env, notes = self._environment(res, timings)
        env.update(load_environment(busy))
        if len(parts) > 1:
            env["chunks"] = len(parts)
            notes.append(f"the test set went to the page in {len(parts)} chunks of {step} samples "
                         f"({self.options.chunk_bytes / 2**20:g} MiB of inputs; the first {head}, the samples it "
                         "timed); latency was timed in the first")
        whole_s = res["whole_set_ms"] / 1e3
        return Outputs(
            outputs=outputs,
            latency_ms=latency,
            memory_bytes=memory,
            load_ms=float(self._facts.get("load_ms", 0.0)),
            first_inference_ms=float(res["first_inference_ms"]),
            throughput_sps=(n / whole_s) if whole_s > 0 else None,
            environment=env,
            notes=notes,
            output_layout=layout,
        )

    def _pace(self, parts: list[Any], left: int, deadline: float) -> None:
        """Between chunks: stop when the pace of the chunks run so far shows the `left` samples cannot finish by
        the deadline (within a chunk, the page itself stops so: OVER_TIME). The pace is the whole-set pass's time a
        sample, the first chunk's only where it ran at batch 1 as the others do (its batch-1 timed pass is slower
        than a batched one)."""
        paces = [p[0]["whole_set_ms"] / len(p[1]) for k, p in enumerate(parts)
                 if len(p[1]) and (k or int(p[0].get("batch_size") or 1) == 1)]
        if not paces:
            return
        per_s = min(paces) / 1e3
        need_s = per_s * left
        if time.monotonic() + need_s > deadline:
            self._teardown(keep_browser=True)
            raise self._stopped_early(f"{OVER_TIME} at {per_s * 1e3:.1f} ms a sample, the {left} samples left need "
                                      f"about {need_s:.0f} s and {max(0.0, deadline - time.monotonic()):.0f} s are left")

    def _stopped_early(self, pace: str) -> StageFailed:
        """The timeout of a run stopped by its pace (`pace`: what the page or the chunks' pace said, from OVER_TIME
        on); the browser is healthy, so a shared one serves the next row."""
        self._paced_out = True
        return StageFailed("timeout", _one_line(
            f"the browser stopped the run early: {pace} of timeout_s={self.options.timeout_s:g} (the whole test set's "
            "chunks together); run fewer --test-samples or give it a longer --timeout"))

    def _run_chunk(self, inputs: Feed, first: bool, deadline: float) -> tuple[dict[str, Any], Feed, np.ndarray,
                                                                             dict[str, float], dict[str, float], Any]:
        """One job of the page on `inputs`: the first chunk warms up and is timed at batch 1; the others only give
        their outputs. (the page's result, the named outputs, latencies, timings, memory figures, the CPU-load
        reading before the timing)."""
        n = len(inputs)
        with self._faults_end_the_row():
            t0 = time.perf_counter()
            urls, described = self._blobs(inputs)
            write_ms = (time.perf_counter() - t0) * 1e3
            self._server.clear_results()
            cfg = {"n": n, "warmupRuns": self.options.warmup_runs if first else 0,
                   "latencySamples": self.options.latency_samples if first else 0,
                   # no count asked: the page stops timing after a host row's budget (its minimum of readings kept)
                   "latencyBudgetMs": self.options.latency_budget_s * 1e3, "minReadings": MIN_READINGS,
                   "batchSize": self.options.batch_size,
                   "deadlineMs": max(1.0, (deadline - time.monotonic()) * 1e3), **described}
            # what other processes took of this machine's CPUs just before the page's timing (the lab judges
            # latency against it); Chromium's renderer is not running a job meanwhile
            timed = first and (self.options.latency_samples is None
                               or self.options.latency_samples >= MIN_TIMED_SAMPLES)
            busy = cpu_busy_fraction() if timed else None  # as a host row's check
            t_run = time.perf_counter()
            try:
                res = self._job("run", cfg, deadline)
            finally:
                for url in urls:
                    self._server.drop_blob(url)
            run_ms = (time.perf_counter() - t_run) * 1e3
            t1 = time.perf_counter()
            outputs, latency = self._collect(res, n)
            collect_ms = (time.perf_counter() - t1) * 1e3
            memory = self._memory(res)
        timings = dict(self._timings_ms) if first else {}
        timings.update(inputs_write=write_ms, inputs_fetch=res["inputs_fetch_ms"],
                       inference=res["inference_ms"], results_post=res["results_post_ms"],
                       results_collect=collect_ms, page_run=res["page_run_ms"], run_total=run_ms)
        return res, outputs, latency, timings, memory, busy

    def _collect(self, res: dict[str, Any], n: int) -> tuple[Feed, np.ndarray]:
        """Every output the page posted, dequantized where the TFLite tensor is int8, by the source's names."""
        assert self.artifact is not None
        sig = self.artifact.signature
        out = {}
        for k, name in enumerate(sig.output_names):
            raw = self._server.take_result(f"output_{k}")
            if raw is None:
                raise StageFailed("runtime_failed", "the page finished without posting its results")
            values = np.frombuffer(raw, dtype=np.float32)
            size = int(res["output_sizes"][k])
            if values.size != n * size:
                raise StageFailed("runtime_failed", f"the page posted {values.size} values of output {name}, "
                                                    f"expected {n} x {size}")
            q = self._tensors.outputs[name] if self._tensors is not None else None
            values = q.dequantize(values) if q is not None and q.quantized else values
            dims = sig.outputs[k].sample_shape
            fixed = tuple(d for d in dims if d is not None)
            if len(fixed) == len(dims) and int(np.prod(fixed or (1,))) != size:
                raise StageFailed("runtime_failed", f"the model gives {size} outputs per sample in the browser, "
                                                    f"the artifact says {int(np.prod(fixed or (1,)))}")
            shape = fixed if len(fixed) == len(dims) and int(np.prod(fixed or (1,))) == size else (size,)
            out[name] = np.ascontiguousarray(values, dtype=np.float32).reshape(n, *shape)
        raw_lat = self._server.take_result("latency")
        if raw_lat is None:
            raise StageFailed("runtime_failed", "the page finished without posting its latencies")
        return Feed(out), np.frombuffer(raw_lat, dtype=np.float64).copy()

    def _memory(self, res: dict[str, Any]) -> dict[str, float]:
        mem: dict[str, float] = {}
        rss = self._browser.renderer_peak_rss_bytes(exclude=self._earlier_renderers)
        if rss is not None:
            mem["renderer_peak_rss_bytes"] = float(rss)
        if self._facts.get("backend") in ("webgl", "webgpu"):
            gpu = self._browser.gpu_process_peak_rss_bytes()
            if gpu is not None:
                mem["gpu_process_peak_rss_bytes"] = float(gpu)
        if res.get("js_heap_used_bytes"):
            mem["js_heap_used_bytes"] = float(res["js_heap_used_bytes"])
        if res.get("wasm_memory_bytes"):
            mem["wasm_memory_bytes"] = float(res["wasm_memory_bytes"])
        if res.get("tfjs_tensor_bytes") is not None:
            mem["tfjs_tensor_bytes"] = float(res["tfjs_tensor_bytes"])
        return mem

    def _environment(self, res: dict[str, Any], timings: dict[str, float]) -> tuple[dict[str, Any], list[str]]:
        f = self._facts
        versions = library_versions(self._root) if self._root else {}
        library = f.get("library", "")
        env: dict[str, Any] = {
            "target": "web",
            "browser": "chromium",
            "browser_version": f.get("browser_version", ""),
            "user_agent": f.get("user_agent", ""),
            "headless": True,
            # the registry's name (`--runtime tfjs`): the npm package's name without its scope
            "runtime": library.rsplit("/", 1)[-1],
            "library": library,
            "runtime_version": f.get("library_version") or versions.get(library, ""),
            "backend": f.get("backend", ""),
            "threads": f.get("threads"),
            "threads_requested": self.options.threads,
            "wasm_simd_available": f.get("wasm_simd"),
            "wasm_threads_available": f.get("wasm_threads"),
            "cross_origin_isolated": f.get("cross_origin_isolated"),
            "hardware_concurrency": f.get("hardware_concurrency"),
            "warmup_runs": self.options.warmup_runs,
            "latency_samples": res.get("latency_samples"),
            "whole_set_batch_size": res.get("batch_size"),
            # at batch 1 the timed pass's outputs are kept: these samples ran once, not twice
            "outputs_from_timed_pass": res.get("outputs_from_timed_pass", 0),
            "npm_versions": versions,
            "timings_ms": {k: round(float(v), 3) for k, v in timings.items()},
        }
        for k in ("wasm_simd_used", "wasm_threaded_build", "input_type", "output_type"):
            if k in f:
                env[k] = f[k]
        notes: list[str] = []
        threads = f.get("threads")
        if f.get("backend") == "wasm" and threads is not None and threads != self.options.threads:
            # tfjs-backend-wasm 4.22 ignores setThreadsCount (tensorflow/tfjs#8513):
            # say what ran, not what was asked.
            notes.append(f"{library} ran {threads} wasm thread(s) although {self.options.threads} were requested")
        if f.get("backend") == "webgl":
            renderer = f.get("webgl_renderer") or "unknown"
            env["webgl_renderer"] = renderer
            if "swiftshader" in renderer.lower():
                env["gpu"] = "none: SwiftShader (software WebGL on the CPU)"
                notes.append(f"webgl ran on SwiftShader, a software renderer on the CPU ({renderer}); "
                             "its latency is not a GPU's")
            else:
                env["gpu"] = renderer
        notes += self._gpu_environment(env)
        if res.get("execution") == "executeAsync":
            env["tfjs_execution"] = "executeAsync"
        return env, notes + self._run_notes(res)

    def _run_notes(self, res: dict[str, Any]) -> list[str]:
        """What a reader of the row needs to know about how the page ran it: which samples were timed, TF.js's
        executeAsync, the quantization of a TFLite file's tensors."""
        notes: list[str] = []
        timed, whole = res.get("latency_samples") or 0, res.get("n") or 0
        if self.options.latency_samples is None and not self.latency_capped and 0 < timed < whole:
            notes.append(f"latency timed on the first {timed} of {whole} samples: at this model's speed in the page "
                         f"the batch-1 timing reached its {self.options.latency_budget_s:g} s budget; outputs are "
                         "from every sample")
        if self.latency_capped and (res.get("latency_samples") or 0) < (res.get("n") or 0):
            notes.append(f"latency timed on the first {res['latency_samples']} of {res['n']} samples (a WebGPU row's "
                         "default: a software adapter takes tens to hundreds of ms per sample); outputs are "
                         "from every sample")
        if res.get("execution") == "executeAsync":
            refused = _one_line(res.get("execute_refused") or "", 200)
            notes.append("TF.js runs this model with executeAsync (it has control flow, such as a recurrent layer's "
                         "loop): its latency includes the promise scheduling of each step"
                         + (f"; model.execute() refused it: {refused}" if refused else ""))
        if self._tensors is not None:
            notes += quantization_notes(self._tensors.inputs.values(), self._tensors.outputs.values())
        return notes

    def _gpu_environment(self, env: dict[str, Any]) -> list[str]:
        """A WebGPU row's adapter, TF.js flags and ONNX node placement into its environment; what a reader of
        its numbers must know into notes."""
        f = self._facts
        notes: list[str] = []
        if f.get("backend_flags"):
            env["backend_flags"] = dict(f["backend_flags"])
        if f.get("backend") != "webgpu":
            return notes
        adapter = dict(f.get("webgpu_adapter") or {})
        env["webgpu_adapter"] = adapter
        env["gpu"] = adapter_label(adapter)
        if f.get("webgpu_adapter_tfjs"):
            env["webgpu_adapter_tfjs"] = dict(f["webgpu_adapter_tfjs"])
        if f.get("readback"):
            env["tfjs_readback"] = f["readback"]
        if is_software_adapter(adapter):
            notes.append(f"webgpu ran on {adapter_label(adapter)}: a software adapter on the CPU, so its latency "
                         "is not a GPU's")
        if f.get("library") == "onnxruntime-web":
            placed = ort_placement(f.get("ort_placement_log") or [])
            env["ort_placement"] = placed.to_json()
            notes.append(placed.sentence())
        return notes

    # ---- the page
    def _watch(self, page: Any) -> None:
        def note(text: str) -> None:
            text = str(text).strip()
            if text and len(self._console_errors) < 5 and not ORT_LOG_LINE.search(text):  # the first: the causes
                self._console_errors.append(_one_line(text, 300))

        def on_console(msg: Any) -> None:
            # TFLite's wasm runtime prints its real reasons ("Didn't find op
            # for builtin opcode ...") as warnings that start with ERROR.
            if msg.type == "error" or (msg.type == "warning" and msg.text.lstrip().startswith("ERROR")):
                note(msg.text)

        def on_crash(_: Any) -> None:
            self._crashed = True

        page.on("console", on_console)
        page.on("pageerror", note)
        page.on("crash", on_crash)

    def _job(self, kind: str, cfg: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """One job of the page, waited for until timeout_s, or until `deadline` (time.monotonic()) when given."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        page = self._page
        limit_s = self.options.timeout_s if deadline is None else max(0.001, deadline - time.monotonic())
        page.evaluate("([k, c]) => window.harness.start(k, c)", [kind, cfg])
        try:
            page.wait_for_function("() => window.harness.job && window.harness.job.done",
                                   timeout=limit_s * 1e3, polling=20)
        except PlaywrightTimeout as e:
            raise StageFailed("timeout", f"the browser did not finish the {kind} within "
                                         f"timeout_s={self.options.timeout_s:g}"
                                         + (" (the whole test set's chunks together)" if deadline else "")) from e
        job = page.evaluate("() => window.harness.job")
        if not job.get("ok"):
            reason = f"browser: {_one_line(job.get('error') or 'unknown error')}"
            extra = [m for m in self._console_errors if m and m not in reason]
            if extra:
                reason += f" (console: {'; '.join(extra[:2])})"
            if NO_ADAPTER in reason:  # this browser offers WebGPU rows nothing to run on: said, not failed
                raise StageFailed("unsupported", _one_line(reason[reason.index(NO_ADAPTER):]))
            if OVER_TIME in reason:  # stopped early by its pace: a time-out the page saw coming
                raise self._stopped_early(reason[reason.index(OVER_TIME):])
            # The page itself refusing the model is deterministic (final); a crash or time-out is not.
            raise StageFailed("load_failed" if kind == "load" else "runtime_failed", _one_line(reason))
        return job["result"]

    def _classify(self, e: BaseException) -> tuple[str, str]:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        msg = _one_line(e)
        if isinstance(e, PlaywrightTimeout):
            return "timeout", f"browser: {msg}"
        if self._crashed or "crash" in msg.lower():
            return "runtime_failed", f"the browser's renderer crashed: {msg}"
        return "runtime_failed", f"browser: {msg}"

    # ---- close
    def _teardown(self, keep_browser: bool = True) -> None:
        """End this row: its page, its routes; the browser too unless it is shared and healthy."""
        browser, server, page, session = self._browser, self._server, self._page, self._session
        self._browser = self._server = self._page = None
        try:
            if browser is not None:
                self.last_process_ids = browser.process_ids
                shared = not self._own_session and browser.connected and not self._crashed
                if keep_browser and shared and page is not None:
                    try:
                        page.close()  # before the next row's page opens: its renderer is not reused
                    except Exception:  # a page that will not close: the browser goes instead
                        if session is not None:  # always, when shared
                            session.discard_browser(browser)
                elif session is not None:
                    session.discard_browser(browser)
        finally:
            if server is not None:
                server.unmount(self._mounted)
            self._mounted = []
            if self._own_session and session is not None:
                session.close()
                self._session = None

    def _close(self) -> None:
        self._teardown()

    @property
    def browser_process_ids(self) -> set[int]:
        """Chromium processes of the current browser (empty when closed)."""
        return self._browser.process_ids if self._browser is not None else set()


# A model file (with its external data or weight shards) larger than this is not run in the browser (issue 38):
# wasm32 addresses 4 GiB, and the page holds the fetched bytes beside the tensors made from them.
BROWSER_MAX_MODEL_BYTES = 2**31


def _onnx_external_data(path: Path) -> list[str]:
    """Relative names of the files an ONNX model keeps its weights in
    (torch.onnx.export's default for dynamo=True writes `<name>.data`)."""

    try:
        return external_locations(path)
    except BadModelFile as e:
        raise StageFailed("load_failed", str(e)) from e


def _is_playwright_error(e: BaseException) -> bool:
    try:
        from playwright.sync_api import Error as PlaywrightError
    except ImportError:
        return False
    return isinstance(e, PlaywrightError)
