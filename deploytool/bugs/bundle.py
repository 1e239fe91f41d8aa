"""The upstream bug bundle: for each failing combination, a folder a
maintainer of the converter or runtime can act on — the model that misbehaves
(or the source that would not convert), a few inputs (the flipped samples
first), the source model's outputs on them, what the target produced, every
version involved, and `reproduce.py`, which needs only numpy and the runtime.
The shape follows ONNX's backend test cases: a model plus its test data; an
ONNX model also gets that very layout (`backend_test/`: model.onnx and
test_data_set_0/input_0.pb, output_0.pb) with the few samples that show the
fault. It writes files; it never measures or judges.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert import KEPT_STEP_INPUT
from deploytool.convert._common import calibration_subset
from deploytool.convert.registry import STEPS, Step
from deploytool.data.feed import Feed, OutputLayout, save_samples, split
from deploytool.modelfiles.onnx_external import copy_with_external
from deploytool.devices.web_harness import harness_dir, library_versions
from deploytool.modelfiles import onnx_proto
from deploytool.modelfiles.signature import match_names
from deploytool.modelfiles.tflite_io import tflite_tensors
from deploytool.provenance import host_facts, package_version
from deploytool.report.markdown import code, fence
from deploytool.errors import DeploytoolError, StageFailed
from deploytool.result import Result, Status
from deploytool.runtimes import runtime_class
from deploytool.runtimes.base import Runtime
from deploytool.run.runner import artifact_dir
from deploytool.targets import Position, get_target
from deploytool.value import value
from deploytool.workspace import share_large_files

if TYPE_CHECKING:
    from deploytool.result import Combo
    from deploytool.run.context import RunContext

SAMPLES = 16
BACKEND_TEST_SAMPLES = 4  # the backend-test folder keeps only the samples that show the fault
HOST_RUNTIME = {"tflite": ("litert", "ai-edge-litert"), "onnx": ("onnxruntime", "onnxruntime")}
# a host runtime chosen with --runtime that reproduce.py also has a runner for
HOST_RUNTIME_BY_NAME = {"tensorflow-lite": ("tensorflow-lite", "tensorflow")}
# what reproduce.py needs beyond numpy, by the runtime it uses (the backend-test folder's .pb files need onnx)
PACKAGES = {"litert": ("ai-edge-litert",), "onnxruntime": ("onnxruntime", "onnx"), "tensorflow-lite": ("tensorflow",)}
REPRODUCER = Path(__file__).with_name("files") / "reproduce.py"
RECIPE_TEMPLATE = Path(__file__).with_name("files") / "reproduce_convert.py"
WEB_DRIVER = Path(__file__).with_name("files") / "reproduce_web.py"
RECIPE_MARK = "    raise NotImplementedError  # RECIPE: deploytool writes the converter step's call here"
# A browser row on a backend other than wasm (webgpu) is reproduced in a browser, on that backend and on wasm
WEB_REPRODUCER = Path(__file__).with_name("files") / "reproduce_web.html"


FALLBACK_KEY = "-fallback"  # the key suffix of a row's conversion fallback, seen as a failing row of its own


def slug(result: Result) -> str:
    """The bundle's folder name: the model and the combination (a lab night's cells of several models share
    one run's bugs/ folder, and the same failing combination of two models must not overwrite each other)."""
    c = result.combo
    parts = [result.model, c.framework, c.format, c.quantize, c.target, c.backend, c.device, c.runtime,
             "conversion" if result.combo_key.endswith(FALLBACK_KEY) else ""]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(p for p in parts if p)).lstrip(".") or "row"


def _pick(result: Result, n_samples: int) -> np.ndarray:
    flipped = [f.index for f in result.comparison.flipped] if result.comparison is not None else []
    rest = [i for i in range(n_samples) if i not in set(flipped[:SAMPLES])]
    return np.asarray((flipped[:SAMPLES] + rest)[:SAMPLES], dtype=np.int64)


def _title(result: Result, art: dict[str, Any] | None, env: dict[str, Any], step: Step | None = None) -> str:
    c = result.combo
    where = get_target(c.target).runs_on(env, Position(c.device, c.backend))
    made_by = f"{art['converter']} {art['converter_version']}" if art else "the converter"
    if result.status is Status.CONVERSION_FAILED or step is not None and result.status is Status.MEASURED:
        tool = f"{step.converter} {package_version(step.dist) or ''}".strip() if step is not None else made_by
        what = result.reason.split(": ", 1)[-1] if result.reason else ""
        return f"{tool} cannot convert {result.model} ({c.framework}) to {c.format}/{c.quantize}" + \
            (f": {what}" if what else "")
    cmp = result.comparison
    if cmp is None:
        return f"{where}: {c.format}/{c.quantize} model made by {made_by} fails ({result.status})"
    if cmp.accuracy != cmp.accuracy:  # no labels: the source model's outputs are the reference
        return (f"{where}: {c.format}/{c.quantize} model made by {made_by} agrees with the source model on "
                f"{cmp.agreement:.1%} of samples (max |difference| {cmp.max_abs_error:.3g})")
    return (f"{where}: {c.format}/{c.quantize} model made by {made_by} gives {cmp.accuracy:.1%} accuracy "
            f"vs {cmp.baseline_accuracy:.1%} for the source model ({len(cmp.flipped)} predictions change)")


@value
class StepInput:
    """The conversion step a bundle reproduces (it failed, or fell back to a documented alternative): the file it
    was given (the source model, or the step before's output), what that file is, and the calibration samples it
    took (int8 modes)."""

    step: Step
    artifact: Artifact
    calibration: Feed | None = None


def _copy_model(path: Path, dest: Path) -> Path:
    """The model into dest/ (an .onnx with its external weights; a folder whole; a .pt2 re-saved from the program
    deploytool read safely, so torch.export.load on the copy unpickles nothing but what torch itself wrote)."""
    dest.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        shutil.copytree(path, dest / path.name)
        return dest / path.name
    if path.suffix == ".pt2":
        import torch

        from deploytool.modelfiles.pt2 import load_program

        torch.export.save(load_program(path), str(dest / path.name))
        return dest / path.name
    return copy_with_external(path, dest)


def write_bundle(result: Result, out_dir: Path, *, x_test: Feed, baseline_outputs: np.ndarray,
                 source: Artifact, versions: dict[str, str], command: str,
                 step_input: StepInput | None = None, pass_limits: dict[str, float] | None = None) -> Path:
    """Write the bundle for one failing row into out_dir/<slug>/ and return that folder. `step_input`: the
    conversion step to reproduce (a conversion failure, or a step that fell back): its input goes into model/,
    and reproduce_convert.py calls the converter as deploytool did. `pass_limits`: what its reproducer holds the
    outputs to, when not the row's own tolerance (a route far off its peers: their mean error)."""
    c = result.combo
    art = result.artifact.to_json() if result.artifact is not None else None
    env = result.environment
    bundle = out_dir / slug(result)
    if bundle.exists():
        shutil.rmtree(bundle)
    failed_conversion = result.status is Status.CONVERSION_FAILED
    model_path = (Path(step_input.artifact.path) if step_input is not None else Path(source.path)) \
        if failed_conversion else Path(art["path"]) if art else Path(source.path)
    _copy_model(model_path, bundle / "model")
    idx = _pick(result, len(x_test))
    inputs_file = save_samples(bundle, x_test[idx])
    np.save(bundle / "expected.npy", baseline_outputs[idx])
    converting = failed_conversion or step_input is not None  # the bundle reproduces a conversion, not a row
    if result.outputs_path and Path(result.outputs_path).exists() and not converting:
        np.save(bundle / "observed.npy", np.load(result.outputs_path)[idx])
    fmt = art["format"] if art else ""
    by = HOST_RUNTIME_BY_NAME.get(c.runtime) or HOST_RUNTIME.get(fmt)
    host_runtime = by[0] if by is not None and not converting else None
    backend_test = None
    if host_runtime == "onnxruntime":
        observed = np.load(bundle / "observed.npy") if (bundle / "observed.npy").exists() else None
        backend_test = write_backend_test(bundle / "backend_test", model_path, x_test[idx],
                                          np.load(bundle / "expected.npy"), observed, result.output_layout)
    packages = {p: versions.get(p, "") for p in ("numpy", *PACKAGES.get(host_runtime or "", ()))}
    limits = pass_limits or {k: v[0] for k, v in result.tolerances.items() if k in ("agreement", "max_abs_error")}
    meta = {"title": _title(result, art, env, step_input.step if step_input else None), "model": result.model,
            "dataset": result.dataset, "combo": c.__dict__,
            "status": str(result.status), "verdict": result.verdict and str(result.verdict), "reason": result.reason,
            "target": c.target, "judges_itself": get_target(c.target).judges_itself,
            "where": c.where, "model_file": model_path.name, "host_runtime": host_runtime, "pass_limits": limits,
            "packages": packages, "backend_test": backend_test, "stage": _stage(result),
            "error": result.raised.name if result.raised is not None else "",
            "sample_indices": idx.tolist(), "layout": (art or {}).get("layout") or source.layout,
            "metrics": result.metrics, "artifact": art, "environment": env, "versions": versions,
            "inputs_file": inputs_file, "inputs": {n: {"dtype": a.dtype.name, "shape": [int(d) for d in a.shape]}
                                                   for n, a in x_test[idx].items()},
            "output_layout": [[n, list(s)] for n, s in result.output_layout] if result.output_layout else None}
    meta["has_observed"] = (bundle / "observed.npy").exists()
    meta["web_reproducer"] = None if converting else \
        _web_reproducer(bundle, result, x_test[idx], np.load(bundle / "expected.npy"), limits)
    if step_input is not None:
        meta["convert"] = _conversion_reproducer(bundle, result, step_input, versions)
        meta["packages"] = meta["convert"]["packages"]
    (bundle / "bundle.json").write_text(json.dumps(meta, indent=2, default=str))
    if host_runtime is not None:
        shutil.copy2(REPRODUCER, bundle / "reproduce.py")
    (bundle / "README.md").write_text(_readme(meta, command))
    return bundle


def _stage(result: Result) -> str:
    """What went wrong, in a reproducer's words: convert, load, invoke or accuracy."""
    s, reason = result.status, (result.reason or "").lower()
    if s is Status.CONVERSION_FAILED:
        return "convert"
    if s is Status.MEASURED:
        return "accuracy"
    return "load" if s is Status.LOAD_FAILED or any(w in reason for w in LOADING_WORDS) else "invoke"


# words a runtime's message uses when a model did not load (a load fault may arrive as runtime_failed)
LOADING_WORDS = ("load", "cannot read", "invalid model", "parse", "initialize", "initialise", "failed to create",
                 "registration failed", "didn't find op", "no op for", "could not find an implementation")


def _conversion_reproducer(bundle: Path, result: Result, step_input: StepInput,
                           versions: dict[str, str]) -> dict[str, Any]:
    """reproduce_convert.py (the step's recipe inside the template), calibration.npz for int8, and what
    bundle.json says of the conversion: the step, its input, the model's inputs, the error and the pins."""
    step, src = step_input.step, step_input.artifact
    if step.recipe is None:
        raise ValueError(f"the converter step {step.name} has no recipe to reproduce it with")
    recipe = step.recipe(src, result.combo.quantize)
    inputs = _recipe_inputs(src, step_input.calibration)
    if step_input.calibration is not None and result.combo.quantize in ("int8", "int8-io"):
        np.savez(bundle / "calibration.npz", **dict(step_input.calibration.items()))
    body = "\n".join("    " + line if line else "" for line in recipe.code.splitlines())
    text = RECIPE_TEMPLATE.read_text().replace(RECIPE_MARK, body)
    (bundle / "reproduce_convert.py").write_text(text)
    pins = {p: versions.get(p) or package_version(p) or "" for p in ("numpy", *recipe.imports)}
    raised = result.raised
    return {"step": step.name, "converter": step.converter, "source": f"model/{Path(src.path).name}",
            "output": recipe.output, "quantize": result.combo.quantize, "inputs": inputs,
            "error": raised.name if raised is not None else "", "any_error_classes": list(TOOL_ERRORS),
            "packages": pins}


# deploytool's words for a tool's failure (the tool itself raised something else: SystemExit, its own error)
TOOL_ERRORS = ("Onnx2tfError", "NoConversion", "ToolFailed", "StageFailed")


def _recipe_inputs(src: Artifact, calibration: Feed | None) -> list[dict[str, Any]]:
    """The step input's model inputs (name, dtype, one sample's shape; Artifact.signature) as the recipe's INPUTS:
    a dimension the model leaves open takes the calibration data's (or 1)."""
    out = []
    for t in src.signature.inputs:
        data = calibration[t.name] if calibration is not None and t.name in calibration else None
        dims = [d if d is not None else (int(data.shape[i + 1]) if data is not None else 1)
                for i, d in enumerate(t.sample_shape)]
        out.append({"name": t.name, "dtype": t.dtype, "shape": dims})
    return out


def _web_io(art: Artifact, feed: Feed) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[np.ndarray]]:
    """(inputs, outputs, input arrays) as a browser reproducer feeds and reads the file: each input under the
    model's own name (None: by position) in the dtype the page gives it (a quantized TFLite input quantized with
    its scale and zero point), each output with its quantization (scale 0: none)."""
    sig, path = art.signature, Path(art.path)
    model_in: dict[str, str | None] = {n: None for n in feed.names}
    quant: dict[str, Any] = {}
    if art.format == "tflite":
        tensors = tflite_tensors(str(path))
        pairs = match_names(list(feed.names), list(tensors.inputs))
        model_in = {src: tensors.inputs[m].name for src, m in pairs.items()}
        quant = {src: tensors.inputs[m] for src, m in pairs.items()}
        outs = [tensors.outputs[m] for m in match_names(list(sig.output_names), list(tensors.outputs)).values()]
        outputs = [{"name": q.name, "scale": q.scale if q.quantized else 0.0, "zero_point": q.zero_point}
                   for q in outs]
    else:
        ins, outs_avail = _page_names(art)
        if ins:
            model_in = dict(match_names(list(feed.names), ins))
        named = match_names(list(sig.output_names), outs_avail) if outs_avail else {}
        outputs = [{"name": named.get(n), "scale": 0.0, "zero_point": 0} for n in sig.output_names]
    inputs, arrays = [], []
    for k, (src, a) in enumerate(feed.items()):
        q = quant.get(src)
        data = np.ascontiguousarray(q.quantize(a) if q is not None and q.quantized else a)
        inputs.append({"name": model_in.get(src), "file": f"input_{k}.bin", "dtype": data.dtype.name,
                       "shape": [int(d) for d in a.shape[1:]]})
        arrays.append(data)
    return inputs, outputs, arrays


def _one_input(meta: dict[str, Any]) -> str:
    """`float32 [16, 28, 28, 1], layout NHWC`: what a bundle's inputs.npy holds (an older bundle.json, which does not
    list its inputs, held float32 images)."""
    given = next(iter((meta.get("inputs") or {}).values()), None)
    if given is None:
        return f"float32, layout {meta['layout']}"
    what = f"{given['dtype']} {given['shape']}"
    return what + (f", layout {meta['layout']}" if len(given["shape"]) == 4 else "")


def _page_names(art: Artifact) -> tuple[list[str], list[str]]:
    """A TF.js graph model's or an ONNX file's own input and output names."""
    path = Path(art.path)
    if art.format == "onnx":
        m = onnx_proto.read(path)
        return [v.name for v in m.inputs], [v.name for v in m.outputs]
    folder = path.parent if path.is_file() else path
    meta = json.loads((folder / "model.json").read_text())
    sig = meta.get("signature") or (meta.get("userDefinedMetadata") or {}).get("signature") or {}
    return ([v.get("name", k) for k, v in (sig.get("inputs") or {}).items()],
            [v.get("name", k) for k, v in (sig.get("outputs") or {}).items()])


def _web_reproducer(bundle: Path, result: Result, x: Feed, expected: np.ndarray,
                    limits: dict[str, float]) -> str | None:
    """A browser row's reproducer: reproduce_web.html (the library alone, every input of the model), its driver
    reproduce_web.py, what they read (web.json, input_<k>.bin, expected.bin) and package.json pinning the npm
    packages that ran; None for a row of another target or without a converted file."""
    art, cls = result.artifact, runtime_class_of(result)
    if art is None or cls is None or art.format not in cls.npm:
        return None
    library, packages = cls.npm[art.format]
    inputs, outputs, arrays = _web_io(art, x)
    sizes = [int(np.prod(s)) for _, s in result.output_layout] if result.output_layout else [expected.shape[1]]
    for o, size in zip(outputs, sizes):
        o["size"] = size
    model_path = Path(art.path)
    cfg = {"library": library, "backend": result.combo.backend or "wasm", "samples": len(expected),
           "model_file": model_path.parent.name if model_path.name == "model.json" else model_path.name,
           "inputs": inputs, "outputs": outputs, "fault": {"stage": _stage(result), "reason": result.reason},
           "limits": {"agreement": float(limits.get("agreement", 0.0)),
                      "max_abs_error": float(limits.get("max_abs_error", 1e30))},
           "gpu": result.environment.get("gpu", "")}
    (bundle / "web.json").write_text(json.dumps(cfg, indent=2))
    for spec, a in zip(inputs, arrays):
        a.tofile(bundle / spec["file"])
    np.ascontiguousarray(expected, np.float32).tofile(bundle / "expected.bin")
    versions = {**library_versions(harness_dir()), **(result.environment.get("npm_versions") or {})}
    deps = {p: versions.get(p) or "*" for p in packages}
    (bundle / "package.json").write_text(json.dumps({"private": True, "dependencies": deps}, indent=2))
    shutil.copy2(WEB_REPRODUCER, bundle / "reproduce_web.html")
    shutil.copy2(WEB_DRIVER, bundle / "reproduce_web.py")
    return "reproduce_web.html"


def fault_samples(expected: np.ndarray, observed: np.ndarray | None, most: int) -> np.ndarray:
    """Positions of the few samples that show the fault: those whose prediction changed, else those with the
    largest difference (the first ones when nothing was observed)."""
    if observed is None:
        return np.arange(min(most, len(expected)))
    flipped = expected.argmax(1) != observed.argmax(1)
    err = np.abs(observed.astype(np.float64) - expected).max(1)
    order = np.lexsort((-err, ~flipped))
    return order[: min(most, int(flipped.sum()) or most)]


def write_backend_test(folder: Path, model_path: Path, x: Feed, expected: np.ndarray,
                       observed: np.ndarray | None, layout: OutputLayout | None = None) -> dict[str, Any]:
    """ONNX's backend-test layout: model.onnx (weights inside) and test_data_set_0/input_<k>.pb (every graph
    input, by its name), output_<k>.pb (the source model's outputs: what a correct backend gives) for the few
    samples that show the fault."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_path))  # external weights read in: the folder stands alone
    batch = model.graph.input[0].type.tensor_type.shape.dim[0] if model.graph.input else None
    fixed_one = batch is not None and batch.HasField("dim_value") and batch.dim_value == 1
    keep = fault_samples(expected, observed, 1 if fixed_one else BACKEND_TEST_SAMPLES)
    data = folder / "test_data_set_0"
    data.mkdir(parents=True)
    onnx.save(model, str(folder / "model.onnx"))
    graph_inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    graph_outputs = [o.name for o in model.graph.output]
    feeds = {graph: x[src][keep] for src, graph in match_names(x.names, graph_inputs).items()}
    named = split(expected[keep], layout) if layout else Feed.one(graph_outputs[0], expected[keep])
    outs = {graph: named[src] for src, graph in match_names(named.names, graph_outputs).items()}
    for k, (tensor, arr) in enumerate(feeds.items()):
        (data / f"input_{k}.pb").write_bytes(numpy_helper.from_array(np.ascontiguousarray(arr), tensor)
                                             .SerializeToString())
    for k, (tensor, arr) in enumerate(outs.items()):
        (data / f"output_{k}.pb").write_bytes(numpy_helper.from_array(np.ascontiguousarray(arr, np.float32), tensor)
                                              .SerializeToString())
    return {"folder": folder.name, "samples": len(keep), "sample_positions": keep.tolist()}


def _readme(meta: dict[str, Any], command: str) -> str:
    m, art = meta["metrics"], meta["artifact"] or {}
    lines = [f"# {meta['title']}", ""]
    if meta["status"] == "measured" and meta.get("convert") is None:
        lines += [f"On `{meta['where']}` the model agrees with the source model on {m['agreement']:.2%} of "
                  f"{meta['dataset']} test samples (max |output difference| {m['max_abs_error']:.3g}); "
                  f"the tolerance's pass limits are {json.dumps(meta['pass_limits'])}.", ""]
    else:
        lines += [f"Status {code(meta['status'])} on {code(meta['where'])}:", "", *fence(meta["reason"]), ""]
    failed_conversion = meta["status"] == "conversion_failed" or meta.get("convert") is not None
    lines += ["## Files (attached)", "",
              f"- `model/{meta['model_file']}`: " + ("the model given to the converter step that failed"
                                                     if failed_conversion else "the converted model that misbehaves"),
              (f"- `inputs.npy`: {len(meta['sample_indices'])} test samples of the model's one input, "
               f"{_one_input(meta)}, preprocessed (the samples whose prediction changed come first)"
               if meta.get("inputs_file", "inputs.npy") == "inputs.npy" else
               f"- `inputs.npz`: {len(meta['sample_indices'])} test samples, one array per model input named "
               "after it, each in its own dtype (the samples whose prediction changed come first)"),
              "- `expected.npy`: the source model's outputs on them (the PC baseline)"
              + ("; several outputs side by side, as `output_layout` in bundle.json lists them"
                 if meta.get("output_layout") and len(meta["output_layout"]) > 1 else "")]
    if meta.get("has_observed"):
        lines.append("- `observed.npy`: what the target produced")
    lines += ["- `bundle.json`: everything below, machine-readable", "", "## Reproduce", "",
              *_reproduce_lines(meta), "With deploytool, the same combination again:", "", *fence(command), "",
              "## How the model was made", ""]
    if art:
        lines += [f"- converter: {art.get('converter')} {art.get('converter_version')}",
                  f"- options: `{json.dumps(art.get('options'), default=str)}`",
                  f"- sha256: `{art.get('sha256')}`, {art.get('size_bytes')} bytes"]
        lines += [f"- note: {n}" for n in art.get("notes") or []]
    lines += ["", "## Environment", ""]
    for k, v in sorted(meta["environment"].items()):
        if isinstance(v, dict) and k != "timings_ms":
            lines += [f"- {k}.{sk}: {sv}" for sk, sv in sorted(v.items()) if not isinstance(sv, (dict, list))]
        elif not isinstance(v, (dict, list)):
            lines.append(f"- {k}: {v}")
    lines += [f"- {k} {v}" for k, v in sorted(meta["versions"].items())]
    return "\n".join(lines) + "\n"


def pip_line(packages: dict[str, str]) -> str:
    """`pip install a==1 b==2`: every package a reproducer imports, pinned to what ran."""
    return "pip install " + " ".join(f"{p}=={v}" if v else p for p, v in packages.items())


def _reproduce_lines(meta: dict[str, Any]) -> list[str]:
    """How to run each reproducer the bundle holds (each exits 1 when the fault reproduces)."""
    lines: list[str] = []
    conv = meta.get("convert")
    if conv is not None:
        lines += [f"`{pip_line(conv['packages'])}` then `python reproduce_convert.py`: it calls "
                  f"{conv['converter']} on `{conv['source']}` exactly as deploytool did (`convert()` in the file; "
                  + ("the calibration samples are `calibration.npz`; " if conv["quantize"] in ("int8", "int8-io")
                     else "") + "exit code 1 when the conversion fails as reported).", ""]
    if meta["host_runtime"]:
        lines += [f"`{pip_line(meta['packages'])}` then `python reproduce.py`"
                  + (" (exit code 1 when the problem reproduces)." if meta["judges_itself"] else
                     f": it runs the model in {meta['host_runtime']} on this PC, where it is right, and shows what "
                     f"{meta['where']} produced on the same inputs."), ""]
    if meta.get("web_reproducer"):
        lines += ["In a browser, with the library alone (`package.json` pins it): `npm install`, `pip install "
                  "playwright`, then `python reproduce_web.py` (it serves this folder on 127.0.0.1, opens "
                  "`reproduce_web.html` in headless Chromium and exits 1 when the fault reproduces); or serve the "
                  "folder yourself and open `reproduce_web.html` (WebGPU: Chromium with `--enable-unsafe-webgpu`).",
                  ""]
    if meta.get("backend_test"):
        lines += ["`backend_test/` is ONNX's backend-test layout: `model.onnx` and `test_data_set_0/input_0.pb`, "
                  f"`output_0.pb` (the source model's outputs) for the {meta['backend_test']['samples']} sample(s) "
                  "that show the fault; reproduce.py replays it too.", ""]
    return lines


def reproduce_command(ctx: "RunContext", c: "Combo") -> list[str]:
    """`deploytool migrate` for this one combination with every option that shaped its row, as argv:
    quoted with shlex.join wherever it is shown, it runs as written from any directory."""
    req = ctx.req
    args = ["deploytool", "migrate", "--model"]
    if ctx.user_artifact is not None:
        # the workspace's content-addressed copy: the very bytes that were measured
        args += [str(Path(ctx.user_artifact.path).absolute()), "--data", str(req.test_npz),
                 "--layout", ctx.user_artifact.layout, "--scale", repr(req.scale),
                 "--mean", ",".join(map(repr, req.mean)), "--std", ",".join(map(repr, req.std))]
        if req.labels:
            args += ["--labels", ",".join(req.labels)]
        if req.data_layout:
            args += ["--data-layout", req.data_layout]
    else:
        args += [req.model, "--framework", c.framework]
        if req.data_dir:
            args += ["--data-dir", str(req.data_dir)]
        if req.test_npz:
            args += ["--data", str(req.test_npz)]
        if req.epochs:
            args += ["--epochs", str(req.epochs)]
    args += ["--format", c.format, "--quantize", c.quantize, "--target", c.target]
    if c.runtime:
        args += ["--runtime", c.runtime]
    args += get_target(c.target).reproduce_args(ctx.target_options[c.target], ctx.position(c))
    args += ["--threads", str(req.threads), "--warmup", str(req.warmup_runs), "--timeout", repr(req.timeout_s)]
    if req.latency_samples is not None:
        args += ["--latency-samples", str(req.latency_samples)]
    if req.limit_test is not None:
        args += ["--test-samples", str(req.limit_test)]
    for metric, (pass_limit, fail_limit) in sorted(ctx.tolerance_for(c).items()):
        args += ["--tolerance", f"{metric}={pass_limit!r},{fail_limit!r}"]
    return args + ["--workspace", str(ctx.ws.root), "--fresh"]


def runtime_class_of(result: Result) -> type[Runtime] | None:
    """The runtime class that ran (or would run) the row's file, None where there is none (a refused row)."""
    fmt = (result.artifact.format if result.artifact is not None else
           result.plan.artifact_format if result.plan is not None else "")
    if not fmt:
        return None
    try:
        return runtime_class(result.combo.target, fmt, result.combo.runtime)
    except (StageFailed, DeploytoolError):
        return None


def steps_of(result: Result) -> list[Step]:
    """The conversion steps of the row's route, in the order they ran (registered ones only)."""
    names = result.plan.steps if result.plan is not None else ()
    return [STEPS[n] for n in names if n in STEPS]


def failing_step(result: Result) -> Step | None:
    """The step whose fault the row is: for a conversion failure the step its reason names (each step's failure
    reads "<converter> <version>: ..."), the step that fell back for a row measured through an alternative, else
    the last step (the one that made the file)."""
    steps = steps_of(result)
    fallback = fallback_of(result)
    if fallback is not None:
        return STEPS.get(fallback.get("step", "")) or (steps[-1] if steps else None)
    if result.status is Status.CONVERSION_FAILED:
        named = [s for s in steps if (result.reason or "").startswith(s.converter + " ")]
        if named:
            return named[0]
    return steps[-1] if steps else None


def fallback_of(result: Result) -> dict[str, Any] | None:
    """What a row's conversion tried first and what it fell back to (Artifact.options["fallback"]: the step, the
    call that failed, its error, the documented alternative used), or None."""
    if result.status is Status.CONVERSION_FAILED or result.artifact is None:
        return None
    fb = result.artifact.options.get("fallback")
    return dict(fb) if isinstance(fb, dict) else None


def step_input_of(ctx: "RunContext", result: Result) -> StepInput | None:
    """The input of the step a conversion bundle reproduces: the step's own input when it was not the first (kept
    by deploytool.convert in the artifact folder's failed-step-input/), else the source model; None when the row
    is not a conversion failure or fallback, or its step has no recipe."""
    if result.status is not Status.CONVERSION_FAILED:
        return None  # (a fallback's bundle is written for its derived row, a conversion failure of its own)
    step = failing_step(result)
    src = ctx.sources.get(result.combo.framework)
    if step is None or step.recipe is None or src is None:
        return None
    kept = artifact_dir(ctx, src.artifact, result.combo) / KEPT_STEP_INPUT / "artifact.json"
    given = Artifact.load(kept) if kept.is_file() and step is not steps_of(result)[0] else src.artifact
    calibration = None
    if result.combo.quantize in ("int8", "int8-io"):
        calibration = calibration_subset(ctx.dataset.feed_for(ctx.calibration_set, given), step.converter)
    return StepInput(step, given, calibration)


def bundle_row(ctx: "RunContext", result: Result, run_id: str, pass_limits: dict[str, float] | None = None) -> None:
    """Write the bundle of a failing row (or of a row whose conversion fell back to an alternative) and note it on
    the row; a fault here never costs the row. `pass_limits`: write_bundle's."""
    src = ctx.sources.get(result.combo.framework)
    if src is None:
        return
    given = result.artifact if result.artifact is not None else src.artifact

    try:
        path = write_bundle(result, ctx.ws.report_dir(run_id) / "bugs",
                            x_test=ctx.dataset.feed_for(ctx.dataset.x_test, given),
                            baseline_outputs=src.baseline.outputs(), source=src.artifact,
                            versions=host_facts()["versions"], command=shlex.join(reproduce_command(ctx, result.combo)),
                            step_input=step_input_of(ctx, result), pass_limits=pass_limits)
        result.bundle, result.bundle_error = str(path), ""
        # a real-size model is one file on disk however many rows' bundles and kept step inputs hold it
        kept = artifact_dir(ctx, src.artifact, result.combo) / KEPT_STEP_INPUT
        for folder in (path, kept):
            if folder.is_dir():
                share_large_files(folder, ctx.ws.blob_dir())
    except Exception as e:
        result.bundle_error = f"{type(e).__name__}: {e}"
