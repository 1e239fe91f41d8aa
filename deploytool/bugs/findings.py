"""Findings: one record per distinct conversion or runtime bug, across runs and
models. Every failing row gets a `Signature` that leaves out versions, names,
numbers, shapes and paths (converter and direction, quantization, failure
stage, error class, op types, the normalised message, runtime and backend for
runtime faults), so the same bug over two nights or in two models is one
finding. The store keeps first/last seen, occurrences, runs and the versions
affected; a finding not seen since a package changed says so. Each finding
writes an `issue.md` addressed to the project that owns the faulty part
(deploytool.bugs.upstream). Nothing here measures or changes a row."""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from deploytool.errors import UnknownOption, WorkspaceError
from deploytool.report.pairs import backend_pairs, converter_pairs, row_of
from deploytool.result import Result, Status
from deploytool.runtimes import default_runtime
from deploytool.store import Finding, ResultStore
from deploytool.targets import get_target
from deploytool.workspace import stable_hash

# The project that owns a converter or runtime, by the name deploytool records for it.
CONVERTER_OWNERS = (
    ("onnx2tf", "PINTO0309/onnx2tf"),  # first: a route through ONNX names the exporter too ("torch.onnx + onnx2tf")
    ("tflite_torch", "google-ai-edge/litert-torch"), ("litert-torch", "google-ai-edge/litert-torch"),
    ("litert_torch", "google-ai-edge/litert-torch"), ("tensorflowjs", "tensorflow/tfjs"), ("tfjs", "tensorflow/tfjs"),
    ("tf2onnx", "onnx/tensorflow-onnx"), ("torch.onnx", "pytorch/pytorch"), ("torch", "pytorch/pytorch"),
    ("onnxruntime", "microsoft/onnxruntime"), ("tf.lite", "tensorflow/tensorflow"), ("tflite", "tensorflow/tensorflow"),
    ("tensorflow", "tensorflow/tensorflow"), ("onnx2tf", "PINTO0309/onnx2tf"),
)
RUNTIME_OWNERS = (
    ("onnxruntime", "microsoft/onnxruntime"), ("tfjs", "tensorflow/tfjs"), ("litert", "google-ai-edge/LiteRT"),
    ("tensorflow-lite", "tensorflow/tensorflow"), ("benchmark_model", "tensorflow/tensorflow"),
)
_OP = re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+|[A-Z][a-z]+[A-Z][A-Za-z0-9]*|Conv\w*|MatMul|Gemm|Reshape|Gather\w*|"
                 r"Dense|Softmax|BatchNorm\w*|MaxPool\w*|AveragePool\w*|DepthwiseConv\w*|FULLY_CONNECTED)\b")
_NOT_OPS = {"KeyError", "ValueError", "TypeError", "RuntimeError", "ConverterError", "OSError", "StageFailed",
            "AttributeError", "NotImplementedError", "IndexError", "AssertionError", "ImportError", "TimeoutError"}


def normalise(message: str, limit: int = 240) -> str:
    """The message with what varies between runs removed: hex, paths, shapes, numbers, versions, quotes' contents
    that look like generated names."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", message or "")
    text = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    text = re.sub(r"0x[0-9a-fA-F]+", "<hex>", text)
    text = re.sub(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?", "<path>", text)
    text = re.sub(r"[\w.-]+\.(?:tflite|onnx|keras|pt2|json|bin|npy|npz|h5|pb)\b", "<file>", text)
    text = re.sub(r"[\[(]\s*-?\d+(?:\s*[,x]\s*-?\d+)+\s*[\])]", "<shape>", text)
    text = re.sub(r"\b[0-9a-f]{12,}\b", "<hex>", text)
    text = re.sub(r"\d+(?:\.\d+)*(?:[-.]?(?:alpha|beta|rc|dev|post)\.?\d*)?(?:e[-+]?\d+)?", "<n>", text)
    text = re.sub(r"\s+", " ", text)
    return text[:limit]


def error_class(reason: str) -> str:
    """`tf2onnx 1.17.0: KeyError: 'x'` -> `KeyError`; a TFLite converter error code when there is one."""
    code = re.search(r"\b(FLEX_OPS|CUSTOM_OPS|UNSUPPORTED_\w+|ERROR_\w+)\b", reason or "")
    if code:
        return code.group(1)
    m = re.search(r"\b([A-Z]\w*(?:Error|Exception|Failure|Fault))\b", reason or "")
    return m.group(1) if m else ""


def ops_in(text: str) -> tuple[str, ...]:
    return tuple(sorted({m for m in _OP.findall(text or "") if m not in _NOT_OPS}))[:6]


def stage_of(result: Result) -> str:
    s, reason = result.status, (result.reason or "").lower()
    if s is Status.CONVERSION_FAILED:
        return "export" if "export" in reason else "convert"
    if s is Status.LOAD_FAILED:
        return "load"
    if s in (Status.RUNTIME_FAILED, Status.WRONG_ABI, Status.ERROR):
        loading = any(w in reason for w in ("load", "cannot read", "invalid model", "parse", "unsupported",
                                            "not supported", "initialize", "initialise", "failed to create",
                                            "registration failed", "didn't find op", "no op for"))
        return "load" if loading else "invoke"
    if s is Status.TIMEOUT or s is Status.DEVICE_LOST:
        return "invoke"
    c = result.comparison
    if c is not None and any(ch.metric.startswith("latency") for ch in c.broken):
        return "latency"
    return "accuracy"


def _owner(name: str, table: tuple[tuple[str, str], ...]) -> str:
    low = (name or "").lower()
    return next((owner for key, owner in table if key in low), "")


@dataclass(frozen=True)
class Signature:
    converter: str  # the converter, without its version
    direction: str  # source framework -> format
    quantize: str
    stage: str  # export / convert / load / invoke / accuracy / latency
    error: str  # exception class or error code ("" for an accuracy fault)
    ops: tuple[str, ...]  # op types named in the message (or the first diverging layer's op type)
    message: str  # normalised
    runtime: str  # runtime and backend, for faults of a runtime ("" for converter faults)

    @property
    def key(self) -> str:
        return stable_hash(asdict(self), 16)

    def to_json(self) -> dict[str, Any]:
        """As a finding's row keeps it (records.Finding.signature)."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Signature":
        """A stored finding's signature; a field an odd row lacks reads as empty."""
        return cls(converter=d.get("converter") or "", direction=d.get("direction") or "",
                   quantize=d.get("quantize") or "", stage=d.get("stage") or "", error=d.get("error") or "",
                   ops=tuple(d.get("ops") or ()), message=d.get("message") or "", runtime=d.get("runtime") or "")


def converter_of(result: Result) -> str:
    if result.artifact is not None and result.artifact.converter:
        return re.sub(r"\s+v?\d+(?:\.\d+)+\S*", "", result.artifact.converter)[:80]  # the converter(s), no versions
    route = result.plan.converter if result.plan is not None else ""
    return route or result.combo.format


def runtime_of(result: Result) -> str:
    """The runtime that ran (or failed to run) the row: what it said of itself, else the registry's name for it."""

    env = result.environment
    fmt = result.artifact.format if result.artifact is not None else ""
    name = (str(env.get("runtime") or "").removeprefix("@tensorflow/") or result.combo.runtime
            or (default_runtime(result.combo.target, fmt) if fmt else "") or result.combo.target)
    return name + (f":{result.combo.backend}" if result.combo.backend else "")


def signature(result: Result, blame_runtime: bool) -> Signature:
    """`blame_runtime`: the same converted file is right elsewhere (e.g. passes on the host), so the fault is the
    runtime's; the signature then carries the runtime instead of being pinned on the converter."""
    stage = stage_of(result)
    runtime_fault = stage in ("load", "invoke") or blame_runtime
    reason = result.reason if result.status is not Status.MEASURED else ""
    ops = ops_in(reason)
    return Signature(converter=converter_of(result), direction=f"{result.combo.framework}->{result.combo.format}",
                     quantize=result.combo.quantize, stage=stage, error=error_class(reason), ops=ops,
                     message=normalise(reason) if reason else "",
                     runtime=runtime_of(result) if runtime_fault else "")


def owner_of(sig: Signature) -> str:
    """The project whose part is at fault: the runtime's for load/invoke faults and runtime-blamed accuracy faults,
    else the converter's."""
    if sig.runtime:
        owner = _owner(sig.runtime, RUNTIME_OWNERS)
        if owner:
            return owner
    return _owner(sig.converter, CONVERTER_OWNERS) or _owner(sig.direction, CONVERTER_OWNERS) or "unknown"


def title_of(sig: Signature, example: Result) -> str:
    what = f"{sig.direction} ({sig.quantize})"
    if sig.stage in ("export", "convert"):
        return f"{sig.converter}: converting {what} fails" + (f" with {sig.error}" if sig.error else "") + \
            (f" on {', '.join(sig.ops)}" if sig.ops else "")
    if sig.stage == "load":
        return f"{sig.runtime or sig.converter}: a {what} model from {sig.converter} fails to load" + \
            (f" ({', '.join(sig.ops)})" if sig.ops else "")
    if sig.stage == "invoke":
        return f"{sig.runtime or sig.converter}: running a {what} model from {sig.converter} fails" + \
            (f" with {sig.error}" if sig.error else "")
    c = example.comparison
    drop = f", top-1 agreement {c.agreement:.1%}" if c is not None else ""
    where = f" on {sig.runtime}" if sig.runtime else ""
    return f"wrong outputs{where} for a {what} model made by {sig.converter}{drop}"


def failing_signatures(results: list[Result]) -> list[tuple[Result, Signature]]:
    """Each failing row with its signature. A measured row that fails off the host while the same
    (framework, format, quantize) passes on a target that judges itself is the runtime's fault; so is a row of a
    backend (a browser's webgpu) whose very file passes on the same target's wasm. A backend's row that departs
    from its wasm twin (report.pairs.backend_pairs: a point less agreement, 10x the error) is a finding of that
    runtime even when its own verdict is not failing: the same file computes differently there."""

    passes_on_reference = {(r.combo.framework, r.combo.format, r.combo.quantize) for r in results
                           if r.verdict is not None and str(r.verdict) == "pass" and get_target(r.combo.target).judges_itself}
    passes_on_wasm = {(r.combo.target, r.artifact.sha256) for r in results
                      if r.artifact is not None and r.combo.backend == "wasm" and r.verdict is not None
                      and str(r.verdict) == "pass"}
    departing = {e.label for p in backend_pairs([row_of(r) for r in results]) for e in p.entries
                 if e.converter in p.departs}
    out = []
    for r in results:
        if not r.failing:
            if r.combo.label in departing and r.comparison is not None:
                out.append((r, signature(r, True)))
            continue
        same_file_right = (r.combo.framework, r.combo.format, r.combo.quantize) in passes_on_reference
        twin_right = r.artifact is not None and r.combo.backend not in ("", "wasm") and \
            (r.combo.target, r.artifact.sha256) in passes_on_wasm
        if twin_right:  # a load or run fault is the runtime's anyway; an accuracy fault is the backend's
            out.append((r, signature(r, True)))
            continue
        blame_runtime = r.comparison is not None and same_file_right and not get_target(r.combo.target).judges_itself
        out.append((r, signature(r, blame_runtime)))
    return out


def versions_of(result: Result, host_versions: dict[str, str]) -> dict[str, str]:
    """Package versions that shaped the row: the host's, the converter's and what the runtime said of itself."""
    out = dict(host_versions)
    if result.artifact is not None and result.artifact.converter_version:
        out[converter_of(result)] = result.artifact.converter_version
    env = result.environment
    if env.get("runtime") and (env.get("version") or env.get("runtime_version")):
        out[str(env["runtime"])] = str(env.get("version") or env.get("runtime_version"))
    for k in ("browser_version", "library_version"):
        if env.get(k):
            out[k.removesuffix("_version")] = str(env[k])
    return out


EXAMPLE_SEP = ": "  # between a finding example's model and its row label


def example_of(r: Result) -> str:
    """How a finding names a row it was seen in: "lenet5: keras->tflite/dynamic on web". (Findings stored before
    examples named their model hold the label alone: any model's run of that label counts for them, as it did.)"""
    return f"{r.model}{EXAMPLE_SEP}{r.combo.label}"


def record_run(store: ResultStore, run_id: str, results: list[Result], host_versions: dict[str, str]) -> list[Finding]:
    """Fold a run's failing rows into the store's findings; returns the findings this run touched."""

    # a second converter of the same source that gets it right says which converter is at fault
    pair_rows = [row_of(r) for r in results]
    second_opinion = {e.label: p.sentence for p in converter_pairs(pair_rows) for e in p.entries
                      if e.converter in p.departs}
    # a backend that departs from the same file on wasm says which runtime is at fault
    second_opinion.update({e.label: p.sentence for p in backend_pairs(pair_rows) for e in p.entries
                           if e.converter in p.departs})
    touched: dict[str, Finding] = {}
    for r, sig in failing_signatures(results):
        title = title_of(sig, r) + (f" ({second_opinion[r.combo.label]})" if r.combo.label in second_opinion else "")
        f = store.record_finding(sig.key, sig.to_json(), owner_of(sig), title, run_id,
                                 versions_of(r, host_versions), example_of(r), r.bundle)
        touched[sig.key] = f
    # a finding whose combinations ran again here without it is "not seen since" what changed: the same model's
    # combinations (one model's row passing says nothing of the bug another model's row met)
    ran = {example_of(r) for r in results}
    labels = {r.combo.label for r in results}
    for f in store.findings():
        if f.id in touched or not any(e in ran or (EXAMPLE_SEP not in e and e in labels) for e in f.examples):
            continue
        changed = {p: v for p, v in host_versions.items() if f.last_versions.get(p) not in (None, v)}
        store.mark_finding_absent(f.id, run_id, changed)
    return list(touched.values())


def export_finding(folder: Path, dest: Path) -> Path:
    """Copy a finding's folder (issue.md and its bundle's files) into `dest`, a new or empty folder; any place
    that cannot take it (a file, a read-only or virtual file system such as /proc or /sys) is one line."""
    dest = Path(dest).expanduser().absolute()
    if dest.exists() and not dest.is_dir():
        raise UnknownOption(f"{dest} is a file, not a folder; export into a new or empty folder")
    try:
        if dest.exists() and any(dest.iterdir()):
            raise UnknownOption(f"{dest} is not empty; export into a new or empty folder")
        shutil.copytree(folder, dest, dirs_exist_ok=True)
    except (OSError, shutil.Error) as e:
        why = getattr(e, "strerror", None) or type(e).__name__
        raise WorkspaceError(f"cannot export into {dest} ({why}); choose a writable folder of your own") from None
    return dest

