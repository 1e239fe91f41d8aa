#!/usr/bin/env python3
"""benchmark_model TEST DOUBLE: stands in for TFLite's official benchmark_model
binary on the simulated phone (tests/android_sim). It takes the real binary's
flags (`--graph=...`, `--input_layer_shape=...`, ...) and prints its exact
output lines (tflite/tools/benchmark/benchmark_model.cc and
benchmark_tflite_model.cc), but runs the model with the LiteRT interpreter on
the host, so every number it prints and every output it writes comes from a
real inference. Delegates other than the CPU/XNNPACK ones are refused unless
the simulator lists them in DEPLOYTOOL_SIM_DELEGATES (it has no GPU or NPU).
It must never be used outside tests.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time

import numpy as np


def log(level: str, msg: str) -> None:
    # The real tool: INFO/WARN to stdout, ERROR/FATAL to stderr, each prefixed.
    stream = sys.stdout if level in ("INFO", "WARN", "VERBOSE") else sys.stderr
    stream.write(f"{level}: {msg}\n")
    stream.flush()


def g(x: float) -> str:
    """A double the way C++'s `operator<<` prints it (6 significant digits)."""
    return "%g" % x


def fail(msg: str | None = None) -> None:
    if msg:
        log("ERROR", msg)
    log("ERROR", "Benchmarking failed.")
    sys.exit(1)


def fatal(msg: str) -> None:
    log("FATAL", msg)
    sys.stderr.flush()
    os.abort()  # TFLITE_LOG(FATAL) aborts: the shell sees 134


Flag = bool | int | float | str  # a flag's value, of its default's type

DEFAULTS: dict[str, Flag] = {
    "num_runs": 50, "min_secs": 1.0, "max_secs": 150.0, "run_delay": -1.0, "num_threads": -1,
    "warmup_runs": 1, "warmup_min_secs": 0.5, "verbose": False, "dry_run": False,
    "report_peak_memory_footprint": False, "memory_footprint_check_interval_ms": 50,
    "graph": "", "input_layer": "", "input_layer_shape": "", "input_layer_value_range": "",
    "input_layer_value_files": "", "output_filepath": "", "enable_op_profiling": False,
    "use_xnnpack": False, "use_gpu": False, "use_nnapi": False, "allow_fp16": False,
    "require_full_delegation": False, "signature_to_run_for": "", "use_caching": False,
}

LABELS = [  # (flag, label printed by LogParams)
    ("num_runs", "Min num runs"), ("min_secs", "Min runs duration (seconds)"),
    ("max_secs", "Max runs duration (seconds)"), ("num_threads", "Num threads"),
    ("warmup_runs", "Min warmup runs"), ("warmup_min_secs", "Min warmup runs duration (seconds)"),
    ("report_peak_memory_footprint", "Report the peak memory footprint"),
    ("memory_footprint_check_interval_ms", "Memory footprint check interval (ms)"),
    ("graph", "Graph"), ("input_layer", "Input layers"), ("input_layer_shape", "Input shapes"),
    ("input_layer_value_files", "Input value files"),
    ("output_filepath", "File path to export outputs layer to"),
    ("use_xnnpack", "Use xnnpack"), ("use_gpu", "Use gpu"), ("use_nnapi", "Use NNAPI"),
]


def parse_flags(argv: list[str]) -> tuple[dict[str, Flag], set[str]]:
    params = dict(DEFAULTS)
    given: set[str] = set()
    unconsumed = []
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            unconsumed.append(arg)
            continue
        name, value = arg[2:].split("=", 1)
        if name not in DEFAULTS:
            unconsumed.append(arg)
            continue
        kind = type(DEFAULTS[name])
        try:
            if kind is bool:
                if value not in ("true", "false", "1", "0"):
                    raise ValueError(value)
                params[name] = value in ("true", "1")
            else:
                params[name] = kind(value)
        except ValueError:
            log("ERROR", f"Failed to parse flag '{name}' against argv '{arg}'")
            fail()
        given.add(name)
    if unconsumed:
        log("WARN", "Unconsumed cmdline flags: " + " ".join(unconsumed))
    return params, given


def split_value_file(item: str) -> tuple[str, str]:
    """name:path with '::' escaping a ':' in the name (SplitInputLayerNameAndValueFile)."""
    delim = -1
    i = 0
    while i < len(item) - 1:
        if item[i] == ":":
            if item[i + 1] == ":":
                i += 1
            elif delim == -1:
                delim = i
            else:
                log("ERROR", f"{item} contains more than one delimiter.")
                fail()
        i += 1
    if delim == -1:
        log("ERROR", f"{item} doesn't contain any delimiter.")
        fail()
    return item[:delim].replace("::", ":"), item[delim + 1 :].replace("::", ":")


class PeakMonitor:
    """--report_peak_memory_footprint: sample this process's RSS periodically."""

    def __init__(self, interval_ms: int):
        self.interval_s = max(interval_ms, 1) / 1000.0
        self.peak_kib = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        with open("/proc/self/statm") as f:
            rss_pages = int(f.read().split()[1])
        self.peak_kib = max(self.peak_kib, rss_pages * os.sysconf("SC_PAGE_SIZE") // 1024)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._t.start()

    def stop(self) -> float:
        self._stop.set()
        self._t.join()
        self._sample()
        return self.peak_kib / 1024.0


def maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def stat_line(samples_us: list[int]) -> str:
    """tsl::StatWithPercentiles::OutputToStream."""
    if not samples_us:
        return "count=0 p5=0 median=0 p95=0"
    s = np.asarray(samples_us, dtype=np.int64)
    n = len(s)

    def pct(p: int) -> int:
        return int(np.partition(s, n * p // 100)[n * p // 100])

    if s.min() == s.max():
        out = f"count={n} curr={s[-1]}" + ("(all same)" if n > 1 else "")
    else:
        std = int(np.sqrt(max(0.0, float((s.astype(np.float64) ** 2).sum() / n - (s.sum() / n) ** 2))))
        out = (f"count={n} first={s[0]} curr={s[-1]} min={s.min()} max={s.max()} "
               f"avg={g(s.sum() / n)} std={std}")
    return out + f" p5={pct(5)} median={pct(50)} p95={pct(95)}"


def main(argv: list[str]) -> int:
    run_log = os.environ.get("DEPLOYTOOL_SIM_RUN_LOG")
    if run_log:  # the simulator counts processes: one line per run, appended in one write
        with open(run_log, "a") as fh:
            fh.write(" ".join(argv).replace("\n", " ") + "\n")
    log("INFO", "STARTING!")
    p, given = parse_flags(argv)
    log("INFO", f"Log parameter values verbosely: [{int(bool(p['verbose']))}]")
    for name, label in LABELS:
        if name in given:
            v = p[name]
            log("INFO", f"{label}: [{int(v) if isinstance(v, bool) else (g(v) if isinstance(v, float) else v)}]")
    if "num_threads" in given:
        log("INFO", f"#threads used for CPU inference: [{p['num_threads']}]")
    if not p["graph"]:
        fail("Please specify the name of your TF Lite input file with --graph")

    names = [n for n in str(p["input_layer"]).split(",") if n] if p["input_layer"] else []
    shapes = str(p["input_layer_shape"]).split(":") if p["input_layer_shape"] else []
    if len(names) != len(shapes):
        fail(f"The number of items in --input_layer_shape ({p['input_layer_shape']}, with {len(shapes)} items) "
             f"must match the number of items in --input_layer ({p['input_layer']}, with {len(names)} items). "
             "For example --input_layer=input1,input2 --input_layer_shape=1,224,224,4:1,20")
    parsed_shapes = []
    for s in shapes:
        try:
            dims = [int(d) for d in s.split(",")]
        except ValueError:
            fatal(f"Incorrect size string specified: {s}")
        if -1 in dims:
            fail("Any unknown sizes in the shapes (-1's) must be replaced with the size you want to benchmark with.")
        parsed_shapes.append(dims)
    value_files: dict[str, str] = {}
    for item in [i for i in str(p["input_layer_value_files"]).split(",") if i]:
        name, path = split_value_file(item)
        if name not in names:
            fatal(f"Cannot find the corresponding input_layer name({name}) in --input_layer as {p['input_layer']}")
        value_files[name] = path

    monitor = PeakMonitor(int(p["memory_footprint_check_interval_ms"])) if p["report_peak_memory_footprint"] else None
    if monitor:
        monitor.start()
    graph = str(p["graph"])
    model_size = os.path.getsize(graph) if os.path.isfile(graph) else -1
    start_rss_kib = maxrss_kib()
    t_init = time.perf_counter()

    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    try:
        with open(graph, "rb") as model_file:
            content = model_file.read()
    except OSError:
        log("ERROR", f"Could not open '{graph}'.")
        fail(f"Failed to load model {graph}")
    kwargs: dict[str, object] = {"model_content": content}
    if int(p["num_threads"]) > 0:
        kwargs["num_threads"] = int(p["num_threads"])
    if "use_xnnpack" in given and not p["use_xnnpack"]:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    try:
        it = Interpreter(**kwargs)
    except (ValueError, RuntimeError) as e:
        for line in str(e).splitlines():
            log("ERROR", line)
        fail(f"Failed to load model {graph}")
    log("INFO", f"Loaded model {graph}")

    inputs = it.get_input_details()
    if names and len(names) != len(inputs):
        fatal(f"Inputs mismatch: Model inputs #:{len(names)} expected: {len(inputs)}")
    for j, name in enumerate(names):
        if name != inputs[j]["name"]:
            log("WARN", f"Tensor # {inputs[j]['index']} is named {inputs[j]['name']} but flags call it {name}")
        if len(parsed_shapes[j]) != len(inputs[j]["shape"]):
            fail(f"Input tensor #{inputs[j]['index']} should have {len(inputs[j]['shape'])} dimensions!")
    for j in range(len(names)):
        try:
            it.resize_tensor_input(inputs[j]["index"], parsed_shapes[j], strict=False)
        except (ValueError, RuntimeError):
            pass  # the real tool ignores ResizeInputTensor's status too

    available = set(os.environ.get("DEPLOYTOOL_SIM_DELEGATES", "cpu,xnnpack").split(","))
    n_nodes = len(it._get_ops_details())
    for flag, name, created in (("use_gpu", "GPU", "Created TensorFlow Lite delegate for GPU."),
                                ("use_nnapi", "NNAPI", "Created TensorFlow Lite delegate for NNAPI."),
                                ("use_xnnpack", "XNNPACK", "Created TensorFlow Lite XNNPACK delegate for CPU.")):
        if not p[flag]:
            continue
        log("INFO", created)
        if name.lower() not in available:
            if name == "GPU":
                log("ERROR", 'TfLiteGpuDelegate Init: OpenCL library not loaded - dlopen failed: library "libOpenCL.so" not found')
            else:
                log("ERROR", "NN API returned error ANEURALNETWORKS_BAD_DATA at line 1234 while adding operation.")
            fail(f"Failed to apply {name} delegate.")
        log("VERBOSE", f"Replacing {n_nodes} out of {n_nodes} node(s) with delegate (TfLite{name}Delegate) node, "
            "yielding 1 partitions for the whole graph.")
        log("INFO", f"Explicitly applied {name} delegate, and the model graph will be completely executed by the delegate.")

    try:
        it.allocate_tensors()
    except (ValueError, RuntimeError) as e:
        for line in str(e).splitlines():
            if line.strip():
                log("ERROR", line.strip())
        fail("Failed to allocate tensors!")
    init_us = int((time.perf_counter() - t_init) * 1e6)
    init_rss_kib = maxrss_kib()
    if model_size > 0:
        log("INFO", f"The input model file size (MB): {g(model_size / 1e6)}")
    else:
        log("WARN", "Failed to get the input model file size.")
    log("INFO", f"Initialized session in {g(init_us / 1e3)}ms.")

    # PrepareInputData: value files must hold exactly the tensor's bytes.
    inputs = it.get_input_details()
    data = []
    rng = np.random.default_rng()
    for j, d in enumerate(inputs):
        dtype = np.dtype(d["dtype"])
        nbytes = int(np.prod(d["shape"])) * dtype.itemsize
        name = names[j] if j < len(names) else d["name"]
        if name in value_files:
            path = value_files[name]
            try:
                size = os.path.getsize(path)
            except OSError:
                fatal(f"Failed to read the input_layer_value_file:{path}")
            if size != nbytes:
                fatal(f"The size of {path} is {size} bytes. It should be {nbytes} bytes.")
            data.append(np.fromfile(path, dtype=dtype).reshape(d["shape"]))
        elif np.issubdtype(dtype, np.floating):
            data.append(rng.uniform(-1, 1, d["shape"]).astype(dtype))
        else:
            info = np.iinfo(dtype)
            data.append(rng.integers(max(info.min, -128), min(info.max, 127), d["shape"], endpoint=True).astype(dtype))

    def run(min_runs: int, min_secs: float, max_secs: float) -> list[int]:
        log("INFO", f"Running benchmark for at least {min_runs} iterations and at least {g(min_secs)} seconds "
            f"but terminate if exceeding {g(max_secs)} seconds.")
        samples: list[int] = []
        now = time.perf_counter()
        min_finish, max_finish = now + min_secs, now + max_secs
        while (len(samples) < min_runs or now < min_finish) and now <= max_finish:
            for d, x in zip(inputs, data):
                it.set_tensor(d["index"], x)
            t0 = time.perf_counter()
            it.invoke()
            samples.append(int((time.perf_counter() - t0) * 1e6))
            now = time.perf_counter()
        log("INFO", stat_line(samples) + "\n")
        return samples

    warmup = run(int(p["warmup_runs"]), float(p["warmup_min_secs"]), float(p["max_secs"]))
    regular = run(int(p["num_runs"]), float(p["min_secs"]), float(p["max_secs"]))
    overall_rss_kib = maxrss_kib()
    peak_mb = monitor.stop() if monitor else -1.0

    if p["output_filepath"]:
        with open(str(p["output_filepath"]), "wb") as outputs_file:
            for d in it.get_output_details():
                outputs_file.write(np.ascontiguousarray(it.get_tensor(d["index"])).tobytes())

    def avg(xs: list[int]) -> float:
        # An empty tsl::Stat averages to numeric_limits<int64_t>::quiet_NaN(), i.e. 0.
        return sum(xs) / len(xs) if xs else 0.0

    log("INFO", f"Inference timings in us: Init: {init_us}, First inference: {warmup[0] if warmup else 0}, "
        f"Warmup (avg): {g(avg(warmup))}, Inference (avg): {g(avg(regular))}")
    log("INFO", "Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE "
        "to the actual memory footprint of the model at runtime. Take the information at your discretion.")
    log("INFO", f"Memory footprint delta from the start of the tool (MB): init={g((init_rss_kib - start_rss_kib) / 1024.0)} "
        f"overall={g((overall_rss_kib - start_rss_kib) / 1024.0)}")
    if peak_mb > 0:
        log("INFO", f"Overall peak memory footprint (MB) via periodic monitoring: {g(peak_mb)}")
        with open("/proc/self/statm") as f:
            _, rss, shared = (int(v) for v in f.read().split()[:3])
        page = os.sysconf("SC_PAGE_SIZE")
        log("INFO", "Memory status at the end of exeution:")
        log("INFO", f"- VmRSS              : {rss * page >> 20} MB")
        log("INFO", f"+ RssAnnon           : {(rss - shared) * page >> 20} MB")
        log("INFO", f"+ RssFile + RssShmem : {shared * page >> 20} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
