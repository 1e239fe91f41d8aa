"""Findings: one record per distinct conversion or runtime bug, across runs and
models. Every failing row gets a `Signature` that leaves out versions, names,
numbers, shapes and paths (converter and direction, quantization, failure
stage, error class, op types, the normalised message, runtime and backend for
runtime faults; the quantization only for accuracy and latency faults, since the
same crash under four quantizations is one bug), so the same bug over two
nights or in two models is one finding. Only triaged rows that are not
deploytool's own bugs become findings (deploytool.bugs.triage: a row of class
`internal_error` never does), each with its class. The store keeps first/last
seen, occurrences, runs and the versions affected; a finding not seen since a
package changed says so. The owner is what the failing converter step or runtime
declares. Each finding writes its folder (deploytool.bugs.upstream). Nothing here
measures or changes a row."""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from deploytool.bugs.bundle import (FALLBACK_KEY, bundle_row, failing_step, fallback_of, runtime_class_of, slug,
                                    steps_of)
from deploytool.bugs.triage import (EXPECTED, QUANTIZED_RANDOM_WEIGHTS, UPSTREAM, Environment, installed_environment,
                                     peer_outliers, tool_words, triage)
from deploytool.convert.registry import STEPS
from deploytool.devices.web_harness import harness_dir, library_versions
from deploytool.errors import Raised, UnknownOption, WorkspaceError, first_line_of
from deploytool.provenance import package_version
from deploytool.report.pairs import backend_pairs, converter_pairs, row_of
from deploytool.result import Result, Status, Triage
from deploytool.runtimes import default_runtime
from deploytool.store import Finding, ResultStore
from deploytool.targets import get_target
from deploytool.value import value
from deploytool.workspace import Workspace, stable_hash

if TYPE_CHECKING:
    from deploytool.run.context import RunContext

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
    text = first_line_of(text, len(text))
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


@value
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
    runtime's; the signature then carries the runtime instead of being pinned on the converter. A crash (export,
    convert, load, invoke) leaves the quantization out: the same error in the same step is one bug whatever the
    quantization (the examples say which were seen); an accuracy or latency fault keeps it."""
    stage = stage_of(result)
    runtime_fault = stage in ("load", "invoke") or blame_runtime
    reason = result.reason if result.status is not Status.MEASURED else ""
    t = result.triage
    ops = tuple(t.ops) if t is not None and t.ops else ops_in(reason)
    crash = stage in ("export", "convert", "load", "invoke")
    return Signature(converter=converter_of(result), direction=f"{result.combo.framework}->{result.combo.format}",
                     quantize="" if crash else result.combo.quantize, stage=stage, error=error_class(reason),
                     ops=ops, message=normalise(reason) if reason else "",
                     runtime=runtime_of(result) if runtime_fault else "")


# -- who is involved in a row: its conversion steps and its runtime ------------------------------------------
def tools_of(result: Result) -> tuple[str, ...]:
    """The Python distributions a failing row involved, for triage: the failing step's alone for a conversion
    failure; every step that made the file and the runtime that ran it otherwise."""
    if result.status is Status.CONVERSION_FAILED:
        step = failing_step(result)
        return (step.dist,) if step is not None else ()
    cls = runtime_class_of(result)
    return tuple(s.dist for s in steps_of(result)) + ((cls.dist,) if cls is not None and cls.dist else ())


def triage_row(result: Result, env: Environment | None = None, random_weights: bool = False) -> Triage:
    """The row's class (deploytool.bugs.triage) with what was installed here."""
    return triage(result, env if env is not None else installed_environment(), tools_of(result), random_weights)


def owner_of_row(result: Result, sig: Signature) -> str:
    """The project whose part is at fault, as the failing step or runtime declares it (`owner` on the step's
    registration and on the runtime class); a row without a plan (an old row) falls back to `owner_of`."""
    if sig.runtime:
        cls = runtime_class_of(result)
        fmt = result.artifact.format if result.artifact is not None else ""
        if cls is not None and cls.owner_for(fmt):
            return cls.owner_for(fmt)
    step = failing_step(result)
    if step is not None and step.owner:
        return step.owner
    return owner_of(sig)


def owner_of(sig: Signature) -> str:
    """The project whose part is at fault, by the names in a signature: the runtime's for load/invoke faults and
    runtime-blamed accuracy faults, else the converter's."""
    if sig.runtime:
        owner = _owner(sig.runtime, RUNTIME_OWNERS)
        if owner:
            return owner
    return _owner(sig.converter, CONVERTER_OWNERS) or _owner(sig.direction, CONVERTER_OWNERS)


FORMAT_NAMES = {"tflite": "TFLite", "tfjs": "TF.js", "onnx": "ONNX", "keras": "Keras", "saved_model": "SavedModel",
                "torch": "PyTorch (.pt2)", "tflite-onnx2tf": "TFLite (through ONNX)"}


def _named(fmt: str) -> str:
    return FORMAT_NAMES.get(fmt, fmt)


def _a(name: str) -> str:
    return ("an " if name[:1] in "AEIOU" else "a ") + name


def title_of(sig: Signature, example: Result) -> str:
    """A title a maintainer would write: the package and version at fault, what was done, the error's own words."""
    c = example.combo
    what = f"{_a(_named(c.framework))} model to {_named(c.format)} ({c.quantize})"
    step = failing_step(example)
    tool = f"{step.converter} {package_version(step.dist) or ''}".strip() if step is not None else sig.converter
    if step is not None and step.copies:
        tool = "its own author (the user's file, as given)"
    if sig.stage in ("export", "convert"):
        return f"{tool}: converting {what} fails: {tool_words(example)}"
    env = example.environment
    runtime = str(env.get("runtime") or "") or sig.runtime or runtime_of(example)
    cls = runtime_class_of(example)
    name = runtime.split(":")[0]
    version = str(env.get("version") or env.get("runtime_version") or "") or \
        versions_of(example, {}).get(name.removeprefix("@tensorflow/"), "") or \
        (package_version(cls.dist) or "" if cls is not None and cls.dist else "")
    where = f"{name} {version}".strip() + (f" ({c.backend})" if c.backend else "")
    made = f"{_a(_named(c.format))} ({c.quantize}) model made by {tool}"
    if sig.stage == "load":
        return f"{where}: {made} fails to load: {tool_words(example)}"
    if sig.stage == "invoke":
        return f"{where}: {made} fails when run: {tool_words(example)}"
    cmp = example.comparison
    numbers = (f": top-1 agreement with the source {cmp.agreement:.1%}, max |difference| {cmp.max_abs_error:.3g}"
               if cmp is not None and cmp.agreement == cmp.agreement else
               (f": max |difference| {cmp.max_abs_error:.3g}" if cmp is not None else ""))
    who = where if sig.runtime else tool
    return f"{who}: wrong outputs for {made}{numbers}"


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
        if r.triage is not None and r.triage.klass in ("internal_error", "expected"):
            continue  # deploytool's own bug (its traceback is logged), or no bug: nothing goes upstream
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
    fmt = result.artifact.format if result.artifact is not None else ""
    cls = runtime_class_of(result)
    if cls is not None and fmt in cls.npm:  # the npm packages that ran (a row that did not load says nothing)
        npm = library_versions(harness_dir())
        for p in cls.npm[fmt][1]:
            if npm.get(p):
                out.setdefault(p.removeprefix("@tensorflow/"), npm[p])
    for k in ("browser_version", "library_version"):
        if env.get(k):
            out[k.removesuffix("_version")] = str(env[k])
    return out


EXAMPLE_SEP = ": "  # between a finding example's model and its row label


def example_of(r: Result) -> str:
    """How a finding names a row it was seen in: "lenet5: keras->tflite/dynamic on web". (Findings stored before
    examples named their model hold the label alone: any model's run of that label counts for them, as it did.)"""
    return f"{r.model}{EXAMPLE_SEP}{r.combo.label}"


def record_run(store: ResultStore, run_id: str, results: list[Result], host_versions: dict[str, str],
               env: Environment | None = None) -> list[Finding]:
    """Fold a run's failing rows into the store's findings; returns the findings this run touched. A row not
    triaged yet (stored before triage existed) is triaged now, with `env` (what is installed here by default)."""
    results = [*results, *(d for d in map(fallback_row, results) if d is not None)]
    for r in results:
        if r.triage is None and r.failing:
            env = env if env is not None else installed_environment()
            r.triage = triage_row(r, env)

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
        if r.triage is None:  # a backend row departing from its wasm twin: not failing, still a finding
            r.triage = triage_row(r, env if env is not None else installed_environment())
        f = store.record_finding(sig.key, sig.to_json(), owner_of_row(r, sig), title, run_id,
                                 versions_of(r, host_versions), example_of(r), r.bundle, r.triage.to_json())
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
        # the bytes, with the exporter's own permissions: a bundle's large files are read-only shared links
        shutil.copytree(folder, dest, dirs_exist_ok=True, copy_function=shutil.copyfile)
    except (OSError, shutil.Error) as e:
        why = getattr(e, "strerror", None) or type(e).__name__
        raise WorkspaceError(f"cannot export into {dest} ({why}); choose a writable folder of your own") from None
    return dest



# -- a failing row, settled before it is stored ----------------------------------------------------------------
INTERNAL_LOG = "internal-{run_id}.log"


def internal_log(ws: Workspace, run_id: str) -> Path:
    """Where a run's deploytool bugs are logged with their tracebacks."""
    return ws.root / "logs" / INTERNAL_LOG.format(run_id=run_id)


def fallback_row(result: Result) -> Result | None:
    """A measured row whose conversion fell back to a documented alternative, as the failing row its first call
    would have made (what findings triage, bundle and confirm: the failure is an upstream candidate); None for
    any other row."""
    fb = fallback_of(result)
    step = STEPS.get(str((fb or {}).get("step") or ""))
    if fb is None or step is None:
        return None
    raised = Raised.from_json(fb.get("raised"))
    words = f"{raised.name}: {raised.first_line}" if raised is not None and raised.first_line else \
        (raised.name if raised is not None else "failed")
    derived = replace(result, status=Status.CONVERSION_FAILED, combo_key=f"{result.combo_key}{FALLBACK_KEY}",
                      reason=f"{step.converter} {package_version(step.dist) or ''}: {fb.get('failed')}: {words}",
                      comparison=None, measurement=None, raised=raised, triage=None)
    # the conversion's bundle: the row's own when it passed, else the sibling folder written beside it
    sibling = Path(result.bundle).parent / slug(derived) if result.bundle else None
    derived.bundle = str(sibling) if sibling is not None and sibling.is_dir() else result.bundle
    return derived


def settle_row(ctx: "RunContext", result: Result, run_id: str, env: Environment | None = None) -> None:
    """Triage a failing (or departing) row before it is stored. deploytool's own bug is logged with its traceback
    and its reason says so, with no bundle (nothing in it is for upstream); any other row gets its bug bundle. A
    measured row whose conversion fell back gets the bundle of the call that failed (its `bundle`)."""
    derived = fallback_row(result)
    if derived is not None:
        derived.bundle = ""
        bundle_row(ctx, derived, run_id)
        result.bundle, result.bundle_error = derived.bundle, derived.bundle_error
        if not result.failing:
            return  # a failing row also gets its own bundle, beside the conversion's (fallback_row finds it)
    result.triage = t = triage_row(result, env, ctx.req.random_weights)
    if t.klass == "expected":
        result.notes.append(f"{t.why} (--random-weights)")
        return  # no bundle: nothing in it is for upstream
    if t.klass == "unsupported":
        result.notes.append(f"coverage gap, not a bug: {t.why}" + (f"; what would make it work: {t.remedy}"
                                                                   if t.remedy else ""))
    elif t.klass == "environment":
        result.notes.append(f"{t.why.split(': ')[0]}: " + "; ".join(t.mismatches[:4])
                            + (f"; and {len(t.mismatches) - 4} more" if len(t.mismatches) > 4 else ""))
    if t.klass != "internal_error":
        bundle_row(ctx, result, run_id)
        return
    log = internal_log(ctx.ws, run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(f"=== {result.model}: {result.combo.label} ({result.status})\n{result.triage.why}\n"
                f"{result.traceback or result.reason}\n")
    result.reason = (f"deploytool bug, not the model's nor a converter's: {result.triage.why}; its traceback is in "
                     f"{log} (please report it to deploytool's maintainers)")


def mark_peer_outliers(results: list[Result], context_of: Callable[[Result], "RunContext | None"],
                       run_id: str) -> list[Result]:
    """A random-weight run's quantized rows triaged `expected` whose route rounds far worse than the other routes
    in its mode (triage.peer_outliers) become upstream candidates, each with its bug bundle, whose reproducer holds
    the file to its peers' bound. Returns the rows changed, for the caller to store again. `context_of(row)`: the
    RunContext that measured it (a migrate's one, a lab cell's), or None to leave the row as it was measured."""
    outliers = peer_outliers(results)
    changed = []
    for r in results:
        outlier, t = outliers.get(r.combo_key), r.triage
        if outlier is None or t is None or t.klass != EXPECTED:
            continue
        try:
            ctx = context_of(r)
            if ctx is not None:
                ctx.source(r.combo.framework)  # the baseline its bundle carries (loaded here on a resumed run)
        except Exception:  # a context or baseline that cannot be had now: the row stays as it was measured
            ctx = None
        if ctx is None:
            continue
        r.triage = Triage(UPSTREAM, f"candidate: {outlier.why}", packages=t.packages)
        r.notes = [n for n in r.notes if QUANTIZED_RANDOM_WEIGHTS not in n]
        r.notes.append(f"not what quantizing random weights does: {outlier.why}")
        r.reason = r.reason or f"the model's weights are random, but {outlier.why}"  # what its issue.md says happens
        bundle_row(ctx, r, run_id, pass_limits={"mean_abs_error": outlier.bound})  # the gap, reproduced
        changed.append(r)
    return changed
