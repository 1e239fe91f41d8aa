"""Triage: one pure function over a failing row — the exception it stands for (class, words, frames), its
messages, and what was installed — giving exactly one class:

- `internal_error`: raised in deploytool's own code (or a plugin's), or deploytool contradicting itself (an
  output called mismatched whose shape equals the baseline's up to the samples or the layout). A deploytool bug:
  never an upstream finding.
- `unsupported`: the converter or runtime says it has no conversion or kernel for an op, or needs an option the
  user did not ask for (TensorFlow ops through Flex / SELECT_TF_OPS). A coverage gap, named with its ops and
  what would make it work; not a bug.
- `environment`: a package involved runs outside its own declared requirements (its `Requires-Dist` against
  what is installed). Unconfirmed until reproduced with its pins.
- `expected`: a quantized row of a model whose weights are random (`--random-weights`: an untrained export, an
  atlas architecture) whose outputs drift from the baseline's. Untrained features hardly vary across samples, so
  quantization noise decides the class: what quantizing such a model does, not evidence of a bug. Noted, not filed
  — unless its route rounds far worse than the other routes quantizing the same weights with the same calibration
  in the same mode (`peer_outliers`): random weights do not explain a gap between routes, so it is `upstream`.
- `upstream`: everything else — a candidate until its bare reproducer, run in a process that cannot import
  deploytool, shows the fault (deploytool.bugs.confirm).

The order is that list's: a deploytool frame outranks every message, and a coverage gap is one whatever the
pins. `triage` reads nothing; `installed_environment` reads the installed distributions (importlib.metadata) for
it. Nothing here runs a model, a converter or a reproducer."""

from __future__ import annotations

import functools
import re
from dataclasses import field
from typing import Iterable, Mapping, NamedTuple

import numpy as np

from deploytool.errors import OUT_OF_MEMORY, PHONE_STORAGE_FULL, Frame, Raised, first_line_of
from deploytool.result import TRIAGE_CLASSES, Result, Status, Triage
from deploytool.value import value

INTERNAL, UNSUPPORTED, ENVIRONMENT, UPSTREAM, EXPECTED = TRIAGE_CLASSES
QUANTIZED_RANDOM_WEIGHTS = ("what quantizing random weights does, not a bug: an untrained network's features hardly "
                            "vary across samples, so quantization noise decides its outputs")
# the browser could not be started at all (its profile, its sockets, the machine): no library was reached
BROWSER_DID_NOT_START = ("launch_persistent_context", "BrowserType.launch")
TOOL_WORDS = ("NoConversion", "ToolFailed", "Onnx2tfError")  # deploytool's classes for a failure a tool printed

FLEX_REMEDY = ("convert with converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, "
               "tf.lite.OpsSet.SELECT_TF_OPS] (and converter._experimental_lower_tensor_list_ops = False for "
               "TensorList loops); the file then needs the Flex delegate, which TensorFlow's own tf.lite.Interpreter "
               "has (--runtime tensorflow-lite) and LiteRT's wheel, tfjs-tflite and benchmark_model builds without "
               "Flex lack")


@value
class _Gap:
    """A message that says "no conversion or kernel for this op" (or "needs this option"): its pattern, where the
    op names are in it, and what would make it work."""

    pattern: re.Pattern[str]
    ops: re.Pattern[str] | None
    remedy: str


def _gap(pattern: str, ops: str | None, remedy: str) -> _Gap:
    return _Gap(re.compile(pattern, re.I | re.S), re.compile(ops) if ops else None, remedy)


# What each tool says when it has no conversion or kernel for an op. Version skew (a runtime that knows an op but
# not the version a converter wrote: "Didn't find op for builtin opcode 'X' version 'N'") is not here: that is a
# compatibility bug between two of their releases, reported upstream.
GAPS: tuple[_Gap, ...] = (
    # TFLite's converter: TensorFlow ops with no TFLite builtin (a while loop over TensorLists, a string op)
    _gap(r"SELECT_TF_OPS|select tf ops|flex runtime|TF Select|emit-select-tf-ops|FLEX_OPS|"
         r"TensorList\w* .*(?:not supported|legalize)|failed to legalize operation 'tf\.",
         r"\btf\.(\w+)|\b(TensorList\w+)", FLEX_REMEDY),
    _gap(r"is neither a custom op nor a flex op", r"'tfl?\.(\w+)'",
         "the op has no TFLite builtin kernel: register a custom op, or convert with SELECT_TF_OPS"),
    # LiteRT / TFLite interpreters and benchmark_model
    _gap(r"(?:Select TensorFlow op\(s\)|Regular TensorFlow ops).*not supported by this interpreter",
         r"\b(Flex\w+)", "run it where the Flex delegate is linked (TensorFlow's tf.lite.Interpreter, "
         "--runtime tensorflow-lite), or convert without SELECT_TF_OPS"),
    # tfjs-tflite's WebAssembly build loading a file with TensorFlow ops: it would dlopen the Flex delegate it lacks
    # (the atlas: onnx2tf int8-io files LiteRT on the host refuses for their Select TensorFlow ops)
    _gap(r"To use dlopen, you need enable dynamic linking", None,
         "tfjs-tflite's WebAssembly build cannot load the Flex delegate the file's TensorFlow ops need: convert "
         "without SELECT_TF_OPS, or run it where Flex is linked (TensorFlow's tf.lite.Interpreter on the host)"),
    _gap(r"Encountered unresolved custom op", r"custom op:? '?(\w+)", "register the custom op with the interpreter"),
    # onnxruntime (and onnxruntime-web): no kernel for an op in this build or execution provider
    _gap(r"Could not find an implementation for", r"implementation for (\w+)\(\d+\)",
         "another opset or execution provider that implements it, or a build of onnxruntime with it"),
    _gap(r"Can't access output tensor data", None,
         "onnxruntime-web reads tensor outputs only; a sequence of maps (scikit-learn's ZipMap) is none: export "
         "the model without ZipMap (skl2onnx: options={id(model): {'zipmap': False}})"),
    _gap(r"Failed to find proper ai\.onnx domain", None,
         "nothing to quantize: the graph imports no ai.onnx opset (only ai.onnx.ml ops, e.g. a tree ensemble); "
         "run it unquantized"),
    # tf2onnx, the TF.js converter and runtime
    _gap(r"Unsupported ops?: Counter", r"'(\w+)': \d+", "try a higher --opset, or a custom op mapping"),
    _gap(r"Unsupported Ops in the model", r"\n\s*([A-Z]\w+)", "the TF.js converter has no mapping for these ops"),
    _gap(r"Tensorflow Op is not supported|Op is not supported:|not registered for backend|is not yet implemented",
         r"(?:supported: |Kernel ')(\w+)", "another TF.js backend that registers the kernel"),
)


@value
class Environment:
    """What was installed, for the distributions a row involved: each one's version and its declared
    requirements (`Requires-Dist`, markers already evaluated for this interpreter)."""

    versions: Mapping[str, str] = field(default_factory=dict)  # distribution -> installed version
    requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # distribution -> its requirements
    distributions: Mapping[str, str] = field(default_factory=dict)  # import name -> distribution ("google" ...)


# -- the rules ---------------------------------------------------------------------------------------------
def raising_frame(raised: Raised) -> Frame | None:
    """The frame that raised: the innermost one past the standard library and code generated at run time."""
    return raised.innermost


def _internal(result: Result) -> Triage | None:
    r = result.raised
    if r is not None and r.name not in ("NoConversion", "OutputMismatch", "WrongConversion") and r.in_own_code:
        at = raising_frame(r)
        if at is not None:
            whose = "deploytool's own code" if at.package == "deploytool" else "code outside any installed package"
            return Triage(INTERNAL, f"{r.name} raised in {whose} at {at.describe()}" +
                          (f": {r.first_line}" if r.first_line else ""), at)
    if r is not None and r.name == "OutputMismatch" and _same_values(r.message):
        return Triage(INTERNAL, "deploytool contradicts itself: " + r.first_line + " (the same values per sample, "
                      "so the samples or the layout were handled wrongly, not the model)", raising_frame(r))
    return None


_SHAPES = re.compile(r"shape \(([\d, ]*)\).*?baseline's \(([\d, ]*)\)")


def _same_values(message: str) -> bool:
    """An output mismatch between two shapes holding as many values per sample (equal, or transposed)."""
    m = _SHAPES.search(message)
    if not m:
        return False

    def per_sample(dims: str) -> int:
        values = [int(d) for d in dims.replace(" ", "").split(",") if d]
        out = 1
        for v in values[1:]:
            out *= v
        return out

    return per_sample(m.group(1)) == per_sample(m.group(2))


def _texts(result: Result) -> str:
    r = result.raised
    return "\n".join(t for t in (result.reason, r.message if r is not None else "") if t)


def _ops(gap: _Gap, text: str) -> tuple[str, ...]:
    if gap.ops is None:
        return ()
    found = [next((g for g in m.groups() if g), "") for m in gap.ops.finditer(text)]
    return tuple(dict.fromkeys(o for o in found if o))[:8]


def _unsupported(result: Result) -> Triage | None:
    r = result.raised
    if r is not None and r.name == "NoConversion":
        return Triage(UNSUPPORTED, r.first_line, raising_frame(r), r.ops, r.remedy)
    if result.status is Status.UNSUPPORTED:
        return Triage(UNSUPPORTED, first_line_of(result.reason) or "not supported")
    art = result.artifact
    if art is not None and art.options.get("needs_flex") and result.status is Status.LOAD_FAILED:
        return Triage(UNSUPPORTED, f"the file needs the Flex delegate (TensorFlow ops, SELECT_TF_OPS), which this "
                      f"runtime does not have: {tool_words(result)}", raising_frame(r) if r else None,
                      ("Flex",), "run it where Flex is linked: TensorFlow's own interpreter (--runtime "
                      "tensorflow-lite), or a model without TensorList loops (Keras layers with fixed steps unroll)")
    text = _texts(result)
    for gap in GAPS:
        if gap.pattern.search(text):
            ops = _ops(gap, text)
            what = f"no conversion or kernel for {', '.join(ops)}" if ops else "a coverage gap"
            return Triage(UNSUPPORTED, f"{what}: {tool_words(result)}", raising_frame(r) if r else None, ops,
                          gap.remedy)
    return None


def tool_words(result: Result) -> str:
    """What the failing tool said, in its own words: `AttributeError: 'NoneType' object has no attribute 'shape'`;
    an exception without words is named with the frame that raised it (`AssertionError raised at
    onnxruntime/tools/symbolic_shape_infer.py:1322 in _infer_Reshape`)."""
    r = result.raised
    if r is not None:
        at = raising_frame(r)
        if r.first_line:  # deploytool's reading of a tool's failure is in the tool's words already
            words = r.first_line if r.name in TOOL_WORDS else f"{r.name}: {r.first_line}"
            return words[:160]
        return r.name + (f" raised at {at.short} in {at.function}" if at is not None else " (no message)")
    reason = first_line_of(result.reason, 10**6)
    reason = re.sub(r"^(?:browser|device): ", "", reason)  # where deploytool heard it: the title says where
    return re.sub(r"^[\w. +-]+ v?\d[\w.+-]*: ", "", reason)[:160]  # without "<tool> <version>: "


def mismatches(dists: Iterable[str], env: Environment) -> tuple[str, ...]:
    """Each involved distribution's declared requirements that what is installed does not meet."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: list[str] = []
    for dist in dict.fromkeys(dists):
        mine = env.versions.get(dist)
        for text in env.requires.get(dist, ()):
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            have = env.versions.get(_canon(req.name))
            if have is None:
                out.append(f"{dist} {mine} requires {req.name}{req.specifier}, which is not installed")
            elif req.specifier and not req.specifier.contains(have, prereleases=True):
                out.append(f"{dist} {mine} requires {req.name}{req.specifier}, {have} is installed")
    return tuple(out)


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def involved(result: Result, env: Environment, tools: Iterable[str] = ()) -> tuple[str, ...]:
    """The distributions a failing row involved: the tools it names (converter steps, runtime) and every
    installed package whose frames the exception passed through."""
    out = [_canon(t) for t in tools if t]
    if result.raised is not None:
        for f in result.raised.frames:
            if f.package not in ("", "python", "deploytool"):
                out.append(_canon(env.distributions.get(f.package, f.package)))
    return tuple(d for d in dict.fromkeys(out) if d in env.versions)


def triage(result: Result, env: Environment, tools: Iterable[str] = (), random_weights: bool = False) -> Triage:
    """The one class of a failing row (see the module's docstring). `tools`: the distributions of the steps and
    runtime the row ran (a conversion's failing step, the runtime that ran the file); `random_weights`: the run's
    model is untrained (MigrateRequest.random_weights)."""
    dists = involved(result, env, tools)
    packages = tuple(f"{d} {env.versions[d]}" for d in dists)
    for rule in (_internal, _unsupported):
        found = rule(result)
        if found is not None:
            return _with_packages(found, packages)
    if random_weights and result.status is Status.MEASURED and result.combo.quantize != "none":
        return Triage(EXPECTED, QUANTIZED_RANDOM_WEIGHTS, packages=packages)
    if OUT_OF_MEMORY in (result.reason or ""):
        return Triage(ENVIRONMENT, "this machine ran out of memory (the kernel killed the process; not a bug "
                      f"shown): {first_line_of(result.reason)[:160]}", packages=packages)
    if result.status is Status.TIMEOUT:  # slow here, or hung: nothing a maintainer could act on is shown
        return Triage(ENVIRONMENT, "unconfirmed: did not finish within the row's time limit on this machine (slow "
                      f"or hung; --timeout gives it longer): {first_line_of(result.reason)[:160]}", packages=packages)
    if PHONE_STORAGE_FULL in (result.reason or ""):
        return Triage(ENVIRONMENT, "the phone had no room for the run (not the model's nor a library's fault): "
                      f"{first_line_of(result.reason)[:160]}", packages=packages)
    if any(w in (result.reason or "") for w in BROWSER_DID_NOT_START):
        return Triage(ENVIRONMENT, "this machine's browser did not start (not the model's nor a library's fault): "
                      f"{tool_words(result)[:120]}", packages=packages)
    bad = mismatches(dists, env)
    r = result.raised
    at = raising_frame(r) if r is not None else None
    if bad:
        owners = sorted({b.split(" ")[0] for b in bad})
        return Triage(ENVIRONMENT, f"unconfirmed: {', '.join(owners)} runs outside its pins "
                      f"({len(bad)} requirement(s) not met): {tool_words(result)}", at, mismatches=bad,
                      packages=packages)
    what = tool_words(result)
    if result.status is Status.MEASURED:
        what = "outputs outside the tolerance"
    return Triage(UPSTREAM, f"candidate: {what}", at, packages=packages)


# A quantized route of a random-weight model is expected to miss its float baseline, but not by far more than the
# routes quantizing the same weights with the same calibration in the same mode. On the atlas' torchvision models
# the routes of one mode stay within 2.3x of their peers' median mean error; litert-torch's int8 MobileNetV2 was 10x.
PEER_FACTOR = 4.0  # a route's mean absolute error over the median of its peers'
MIN_PEERS = 2  # other files measured in its mode: a median that one odd route cannot set
_MODE = {"int8-io": "int8"}  # full integer either way: the I/O tensors' type does not change what is rounded


class Outlier(NamedTuple):
    why: str
    bound: float  # PEER_FACTOR x its peers' median mean error: what its bare reproducer holds its outputs to


def peer_outliers(results: Iterable[Result]) -> dict[str, Outlier]:
    """combo_key -> why and bound, for each measured quantized row whose file's mean absolute error (the median
    over its rows: one file run by several runtimes is one route) is more than PEER_FACTOR times the median of the
    other files' in its quantization mode, on the same model and target, with at least MIN_PEERS such files."""
    groups: dict[tuple[str, str, str], dict[str, list[tuple[Result, float]]]] = {}
    for r in results:
        c = r.comparison
        if (r.status is not Status.MEASURED or c is None or r.artifact is None or r.combo.quantize == "none"
                or not c.mean_abs_error >= 0):  # NaN and a missing error take no part
            continue
        mode = _MODE.get(r.combo.quantize, r.combo.quantize)
        groups.setdefault((r.model, r.combo.target, mode), {}).setdefault(r.artifact.sha256, []).append(
            (r, c.mean_abs_error))
    out: dict[str, Outlier] = {}
    for (_, _, mode), measured in groups.items():
        error = {sha: float(np.median([e for _, e in rows])) for sha, rows in measured.items()}
        files = {sha: [r for r, _ in rows] for sha, rows in measured.items()}
        for sha, rows in files.items():
            peers = [e for other, e in error.items() if other != sha]
            med = float(np.median(peers)) if len(peers) >= MIN_PEERS else 0.0
            if med <= 0 or error[sha] <= PEER_FACTOR * med:
                continue
            others = ", ".join(f"{_route(f[0])} {error[o]:.3g}" for o, f in files.items() if o != sha)
            why = (f"{_route(rows[0])}: mean error {error[sha]:.3g}, {error[sha] / med:.1f}x the median of the "
                   f"{len(peers)} other {mode} routes given the same weights and calibration ({others}); random "
                   "weights do not explain a gap between routes")
            out.update({r.combo_key: Outlier(why, PEER_FACTOR * med) for r in rows})
    return out


def _route(r: Result) -> str:
    """`litert-torch to tflite/int8`: the tools that made a row's file, and what they made."""
    made_by = f"{r.artifact.converter} to " if r.artifact is not None and r.artifact.converter else ""
    return f"{made_by}{r.combo.format}/{r.combo.quantize}"


def _with_packages(t: Triage, packages: tuple[str, ...]) -> Triage:
    from dataclasses import replace

    return replace(t, packages=packages)


@functools.lru_cache(maxsize=1)
def installed_environment() -> Environment:
    """The installed versions and declared requirements of every distribution, read once per process with
    importlib.metadata (~0.1 s)."""
    from importlib import metadata

    from packaging.markers import default_environment

    versions: dict[str, str] = {}
    requires: dict[str, tuple[str, ...]] = {}
    marker_env = {**default_environment(), "extra": ""}
    for d in metadata.distributions():
        name = _canon(d.metadata["Name"] or "")
        if not name:
            continue
        versions.setdefault(name, d.version)
        reqs = []
        for text in d.requires or ():
            try:
                from packaging.requirements import Requirement

                req = Requirement(text)
            except Exception:
                continue
            if req.marker is None or req.marker.evaluate(marker_env):
                reqs.append(f"{req.name}{req.specifier}")
        requires.setdefault(name, tuple(reqs))
    tops = {top: _canon(names[0]) for top, names in metadata.packages_distributions().items() if names}
    return Environment(versions, requires, tops)
