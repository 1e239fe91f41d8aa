"""Parser of what TFLite's `benchmark_model` prints (and of the lines the
device-side driver android_harness/run_benchmark.sh adds around it).

It turns the text of one run into a `BenchmarkReport` of numbers in the units
the tool printed them in (us, MB, KiB) and says which delegate was applied or
refused. It only reads text: it never runs anything, talks to a device or
decides what a failure means for a result.

Formats handled (tflite/tools/benchmark/benchmark_model.cc, tsl stats_calculator):
  INFO: Initialized session in 3.337ms.
  INFO: count=50 first=106022 curr=105780 min=105416 max=106528 avg=105784 std=260 p5=... median=... p95=...
  INFO: count=1 curr=1041765           (all runs the same; "(all same)" when count > 1)
  INFO: Inference timings in us: Init: 3337, First inference: 81913, Warmup (avg): 58984.7, Inference (avg): 56265.8
  INFO: Memory footprint delta from the start of the tool (MB): init=2.1 overall=3.4
  INFO: Overall peak memory footprint (MB) via periodic monitoring: 93.2383
  Max RSS (KiB): 93412                  (toybox `time -v`)
  VmHWM (KiB): 93412                    (the driver's /proc/PID/status fallback)
Older builds print without the `INFO: ` prefix; both are accepted.
"""

from __future__ import annotations

import re
from dataclasses import field

from deploytool.value import value

RUN_SEPARATOR = re.compile(r"^=== deploytool run (\d+) ===$", re.M)
_PREFIX = re.compile(r"^(?:(INFO|WARN|WARNING|ERROR|FATAL|VERBOSE|DEBUG): ?)?(.*)$")
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"


@value(frozen=False)
class RunStats:
    """One `count=... first=... avg=...` line (times in microseconds)."""

    count: int
    first_us: float | None = None
    curr_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    avg_us: float | None = None
    std_us: float | None = None
    p5_us: float | None = None
    median_us: float | None = None
    p95_us: float | None = None


@value(frozen=False)
class BenchmarkReport:
    init_us: float | None = None  # "Init" from the timings line (model load + delegate + allocate)
    first_inference_us: float | None = None
    warmup_avg_us: float | None = None
    inference_avg_us: float | None = None
    session_init_ms: float | None = None  # "Initialized session in X ms."
    model_size_mb: float | None = None
    warmup: RunStats | None = None
    inference: RunStats | None = None
    footprint_delta_init_mb: float | None = None
    footprint_delta_overall_mb: float | None = None
    peak_footprint_mb: float | None = None  # --report_peak_memory_footprint
    max_rss_kib: int | None = None  # toybox time -v: the process's peak RSS
    vmhwm_kib: int | None = None  # the driver's VmHWM fallback
    delegates_created: list[str] = field(default_factory=list)
    delegate_applied: dict[str, str] = field(default_factory=dict)  # name -> "full" | "partial" | "none"
    delegated_nodes: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (delegated, total)
    delegates_failed: list[str] = field(default_factory=list)  # "Failed to apply X delegate."
    unsupported: list[str] = field(default_factory=list)  # "... is unsupported on this platform" lines
    errors: list[str] = field(default_factory=list)  # ERROR and FATAL messages, without prefix
    failed: bool = False  # "Benchmarking failed." or a FATAL line
    allocate_failed: bool = False  # "Failed to allocate tensors!": the resize was refused
    version: str | None = None  # a runtime version line, where the build prints one

    @property
    def complete(self) -> bool:
        """The run reached its end-of-benchmark summary."""
        return self.inference_avg_us is not None

    def first_error(self) -> str:
        for e in self.errors:
            if e != "Benchmarking failed.":
                return e
        return self.errors[0] if self.errors else ""


def _f(s: str) -> float:
    return float(s)


def parse_stats(text: str) -> RunStats | None:
    m = re.match(r"count=(\d+)", text)
    if not m:
        return None
    st = RunStats(count=int(m.group(1)))
    for key, attr in (("first", "first_us"), ("curr", "curr_us"), ("min", "min_us"), ("max", "max_us"),
                      ("avg", "avg_us"), ("std", "std_us"), ("p5", "p5_us"), ("median", "median_us"),
                      ("p95", "p95_us")):
        km = re.search(rf"\b{key}=({_NUM})", text)
        if km:
            setattr(st, attr, _f(km.group(1)))
    if st.count and st.avg_us is None and st.curr_us is not None:
        # "count=N curr=X[(all same)]": every run took X.
        st.first_us = st.min_us = st.max_us = st.avg_us = st.curr_us
        st.std_us = 0.0
    return st


def parse(text: str) -> BenchmarkReport:
    """Parse the output of one benchmark_model run.

    Long: one pass over the lines, each pattern of benchmark_model's output a branch beside the others (the
    state between lines is the run-stats block being read)."""
    r = BenchmarkReport()
    stats_seen: list[RunStats] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = _PREFIX.match(line)
        assert m is not None  # it matches any line
        level, msg = m.groups()
        msg = msg.strip()
        if level in ("ERROR", "FATAL"):
            r.errors.append(msg)
            if level == "FATAL" or msg == "Benchmarking failed.":
                r.failed = True
        if msg.startswith("count="):
            st = parse_stats(msg)
            if st is not None:
                stats_seen.append(st)
            continue
        if "timings in us:" in msg:
            fields = dict(re.findall(rf"([A-Za-z][A-Za-z ()]*?):\s*({_NUM})", msg.split("timings in us:", 1)[1]))
            fields = {k.strip(): _f(v) for k, v in fields.items()}
            r.init_us = fields.get("Init", r.init_us)
            r.first_inference_us = fields.get("First inference", fields.get("Warmup", r.first_inference_us))
            r.warmup_avg_us = fields.get("Warmup (avg)", r.warmup_avg_us)
            r.inference_avg_us = fields.get("Inference (avg)", fields.get("Inference", r.inference_avg_us))
            continue
        m = re.search(rf"Initialized session in ({_NUM})\s*ms", msg)
        if m:
            r.session_init_ms = _f(m.group(1))
            continue
        m = re.search(rf"input model file size \(MB\): ({_NUM})", msg)
        if m:
            r.model_size_mb = _f(m.group(1))
            continue
        m = re.search(rf"Memory footprint delta from the start of the tool \(MB\): init=({_NUM}) overall=({_NUM})", msg)
        if m:
            r.footprint_delta_init_mb, r.footprint_delta_overall_mb = _f(m.group(1)), _f(m.group(2))
            continue
        m = re.search(rf"Overall peak memory footprint \(MB\) via periodic monitoring: ({_NUM})", msg)
        if m:
            r.peak_footprint_mb = _f(m.group(1))
            continue
        m = re.match(r"Max RSS \(KiB\): (\d+)", msg)
        if m:
            r.max_rss_kib = int(m.group(1))
            continue
        m = re.match(r"VmHWM \(KiB\): (\d+)", msg)
        if m:
            r.vmhwm_kib = int(m.group(1))
            continue
        m = re.search(r"Created TensorFlow Lite (?:(\w+) )?delegate for (\w+)", msg)
        if m:
            r.delegates_created.append((m.group(1) or m.group(2)).upper())
            continue
        m = re.search(r"Replacing (\d+) out of (\d+) node\(s\) with delegate \((\w+)\)", msg)
        if m:
            r.delegated_nodes[m.group(3)] = (int(m.group(1)), int(m.group(2)))
            continue
        m = re.search(r"Explicitly applied (\w+) delegate, and the model graph will be (completely|partially)", msg)
        if m:
            r.delegate_applied[m.group(1).upper()] = "full" if m.group(2) == "completely" else "partial"
            continue
        m = re.search(r"Though (\w+) delegate is explicitly applied, the model graph will not be", msg)
        if m:
            r.delegate_applied[m.group(1).upper()] = "none"
            continue
        m = re.search(r"Failed to apply (\w+) delegate", msg)
        if m:
            r.delegates_failed.append(m.group(1).upper())
            continue
        if "unsupported on this platform" in msg or "Disallowed CPU fallback" in msg:
            r.unsupported.append(msg)
            continue
        if "Failed to allocate tensors" in msg:
            r.allocate_failed = True
            continue
        m = re.search(r"\b(?:TfLite|TFLite|LiteRT|TensorFlow Lite)\b.*\bversion\b[:\s]+([0-9][\w.\-]*)", msg, re.I)
        if m and r.version is None:
            r.version = m.group(1)
    # The tool prints the warm-up stats first and the timed runs' stats second.
    if len(stats_seen) >= 2:
        r.warmup, r.inference = stats_seen[-2], stats_seen[-1]
    elif stats_seen:
        r.inference = stats_seen[-1]
    return r


def split_runs(text: str) -> list[str]:
    """The outputs of the driver's `repeat` mode, one per run, in order."""
    parts = RUN_SEPARATOR.split(text)
    # parts = [before, idx0, text0, idx1, text1, ...]
    return [parts[i + 1] for i in range(1, len(parts) - 1, 2)]


_DELEGATE_NAMES = {"gpu": "GPU", "nnapi": "NNAPI", "xnnpack": "XNNPACK"}


def delegate_refusal(report: BenchmarkReport, delegate: str) -> str | None:
    """Why the device refused `delegate` (cpu|xnnpack|gpu|nnapi), or None.

    A refused delegate either fails to apply (the run stops) or is applied to
    no node (the run silently falls back to the CPU): both are refusals, since
    numbers measured on the CPU must not be reported under the delegate's name.
    """
    name = _DELEGATE_NAMES.get(delegate)
    if name is None:
        return None
    if name in report.delegates_failed:
        detail = next((e for e in report.errors if name.lower() in e.lower() and "Failed to apply" not in e), "")
        if not detail:
            detail = next((e for e in report.errors if e not in ("Benchmarking failed.",)
                           and "Failed to apply" not in e), "")
        return f"the device refused the {name} delegate" + (f": {detail}" if detail else "")
    if report.delegate_applied.get(name) == "none":
        return f"the {name} delegate was applied to no node of the model: it would run on the CPU"
    for line in report.unsupported:
        if name.lower() in line.lower() or "fallback" in line.lower():
            return f"the device refused the {name} delegate: {line}"
    return None
