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
from deploytool.data.feed import Feed, OutputLayout, split
from deploytool.modelfiles.onnx_external import copy_with_external
from deploytool.modelfiles.signature import match_names
from deploytool.provenance import host_facts
from deploytool.report.markdown import code, fence
from deploytool.result import Result, Status
from deploytool.targets import Position, get_target

if TYPE_CHECKING:
    from deploytool.result import Combo
    from deploytool.run.context import RunContext

SAMPLES = 16
BACKEND_TEST_SAMPLES = 4  # the backend-test folder keeps only the samples that show the fault
HOST_RUNTIME = {"tflite": ("litert", "ai-edge-litert"), "onnx": ("onnxruntime", "onnxruntime")}
# what reproduce.py needs beyond numpy, by the runtime it uses (the backend-test folder's .pb files need onnx)
PACKAGES = {"litert": ("ai-edge-litert",), "onnxruntime": ("onnxruntime", "onnx")}
REPRODUCER = Path(__file__).with_name("files") / "reproduce.py"
# A browser row on a backend other than wasm (webgpu) is reproduced in a browser, on that backend and on wasm
WEB_REPRODUCER = Path(__file__).with_name("files") / "reproduce_web.html"
WEB_LIBRARIES = {"onnxruntime-web": ("onnxruntime-web",),
                 "@tensorflow/tfjs": ("@tensorflow/tfjs", "@tensorflow/tfjs-backend-wasm",
                                      "@tensorflow/tfjs-backend-webgpu")}


def slug(result: Result) -> str:
    """The bundle's folder name: the model and the combination (a lab night's cells of several models share
    one run's bugs/ folder, and the same failing combination of two models must not overwrite each other)."""
    c = result.combo
    parts = [result.model, c.framework, c.format, c.quantize, c.target, c.backend, c.device, c.runtime]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(p for p in parts if p)).lstrip(".") or "row"


def _pick(result: Result, n_samples: int) -> np.ndarray:
    flipped = [f.index for f in result.comparison.flipped] if result.comparison is not None else []
    rest = [i for i in range(n_samples) if i not in set(flipped[:SAMPLES])]
    return np.asarray((flipped[:SAMPLES] + rest)[:SAMPLES], dtype=np.int64)


def _title(result: Result, art: dict[str, Any] | None, env: dict[str, Any]) -> str:
    c = result.combo

    where = get_target(c.target).runs_on(env, Position(c.device, c.backend))
    made_by = f"{art['converter']} {art['converter_version']}" if art else "the converter"
    if result.status is Status.CONVERSION_FAILED:
        return f"{made_by.split(' ')[0]} cannot convert {result.model} ({c.framework}) to {c.format}/{c.quantize}"
    cmp = result.comparison
    if cmp is None:
        return f"{where}: {c.format}/{c.quantize} model made by {made_by} fails ({result.status})"
    return (f"{where}: {c.format}/{c.quantize} model made by {made_by} gives {cmp.accuracy:.1%} accuracy "
            f"vs {cmp.baseline_accuracy:.1%} for the source model ({len(cmp.flipped)} predictions change)")


def write_bundle(result: Result, out_dir: Path, *, x_test: np.ndarray, baseline_outputs: np.ndarray,
                 source: Artifact, versions: dict[str, str], command: str) -> Path:
    """Write the bundle for one failing row into out_dir/<slug>/ and return that folder."""
    c = result.combo
    art = result.artifact.to_json() if result.artifact is not None else None
    env = result.environment
    bundle = out_dir / slug(result)
    if bundle.exists():
        shutil.rmtree(bundle)
    (bundle / "model").mkdir(parents=True)
    model_path = Path(art["path"]) if art and result.status is not Status.CONVERSION_FAILED else Path(source.path)
    if model_path.is_dir():
        shutil.copytree(model_path, bundle / "model" / model_path.name)
    else:
        copy_with_external(model_path, bundle / "model")  # an .onnx's external weights go with it
    idx = _pick(result, len(x_test))
    if isinstance(x_test, Feed):  # one array per named input
        np.savez(bundle / "inputs.npz", **dict(x_test[idx].items()))
    else:
        np.save(bundle / "inputs.npy", x_test[idx])
    np.save(bundle / "expected.npy", baseline_outputs[idx])
    if result.outputs_path and Path(result.outputs_path).exists():
        np.save(bundle / "observed.npy", np.load(result.outputs_path)[idx])
    fmt = art["format"] if art else ""
    host_runtime = HOST_RUNTIME.get(fmt, (None, None))[0] if result.status is not Status.CONVERSION_FAILED else None
    backend_test = None
    if host_runtime == "onnxruntime":
        observed = np.load(bundle / "observed.npy") if (bundle / "observed.npy").exists() else None
        backend_test = write_backend_test(bundle / "backend_test", model_path, x_test[idx],
                                          np.load(bundle / "expected.npy"), observed, result.output_layout)
    packages = {p: versions.get(p, "") for p in ("numpy", *PACKAGES.get(host_runtime or "", ()))}
    limits = {k: v[0] for k, v in result.tolerances.items() if k in ("agreement", "max_abs_error")}
    where = c.where
    title = _title(result, art, env)
    meta = {"title": title, "model": result.model, "dataset": result.dataset, "combo": c.__dict__,
            "status": str(result.status), "verdict": result.verdict and str(result.verdict), "reason": result.reason,
            "target": c.target, "judges_itself": get_target(c.target).judges_itself,
            "where": where, "model_file": model_path.name, "host_runtime": host_runtime, "pass_limits": limits,
            "packages": packages, "backend_test": backend_test,
            "sample_indices": idx.tolist(), "layout": (art or {}).get("layout") or source.layout,
            "metrics": result.metrics, "artifact": art, "environment": env, "versions": versions,
            "inputs_file": "inputs.npz" if isinstance(x_test, Feed) else "inputs.npy",
            "output_layout": [[n, list(s)] for n, s in result.output_layout] if result.output_layout else None}
    meta["web_reproducer"] = _web_reproducer(bundle, result, x_test[idx], np.load(bundle / "expected.npy"), limits)
    (bundle / "bundle.json").write_text(json.dumps(meta, indent=2, default=str))
    shutil.copy2(REPRODUCER, bundle / "reproduce.py")
    (bundle / "README.md").write_text(_readme(meta, command))
    return bundle


def _web_reproducer(bundle: Path, result: Result, x: Any, expected: np.ndarray,
                    limits: dict[str, float]) -> str | None:
    """A browser row off wasm (webgpu) with one float input: reproduce_web.html and what it reads (web.json,
    inputs.bin, expected.bin, package.json pinning the libraries that ran); None when it does not apply."""
    env, art = result.environment, result.artifact
    library, backend = str(env.get("library") or ""), result.combo.backend
    if library not in WEB_LIBRARIES or backend in ("", "wasm") or art is None or isinstance(x, Feed):
        return None
    versions = env.get("npm_versions") or {}
    model_path = Path(art.path)
    cfg = {"library": library, "backend": backend, "input_shape": list(x.shape[1:]),
           "model_file": model_path.parent.name if model_path.name == "model.json" else model_path.name,
           "max_abs_error_limit": float(limits.get("max_abs_error", 1e-4)), "gpu": env.get("gpu", "")}
    (bundle / "web.json").write_text(json.dumps(cfg, indent=2))
    np.ascontiguousarray(x, np.float32).tofile(bundle / "inputs.bin")
    np.ascontiguousarray(expected, np.float32).tofile(bundle / "expected.bin")
    deps = {p: versions.get(p, "") or "*" for p in WEB_LIBRARIES[library]}
    (bundle / "package.json").write_text(json.dumps({"private": True, "dependencies": deps}, indent=2))
    shutil.copy2(WEB_REPRODUCER, bundle / "reproduce_web.html")
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


def write_backend_test(folder: Path, model_path: Path, x: np.ndarray | Feed, expected: np.ndarray,
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
    if isinstance(x, Feed):
        feeds = {graph: x[src][keep] for src, graph in match_names(x.names, graph_inputs).items()}
    else:
        feeds = {graph_inputs[0]: np.ascontiguousarray(x[keep], np.float32)}
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
    if meta["status"] == "measured":
        lines += [f"On `{meta['where']}` the model agrees with the source model on {m['agreement']:.2%} of "
                  f"{meta['dataset']} test samples (max |output difference| {m['max_abs_error']:.3g}); "
                  f"the tolerance's pass limits are {json.dumps(meta['pass_limits'])}.", ""]
    else:
        lines += [f"Status {code(meta['status'])} on {code(meta['where'])}:", "", *fence(meta["reason"]), ""]
    lines += ["## Files", "",
              f"- `model/{meta['model_file']}`: " + ("the source model that did not convert" if meta["status"] ==
                                                     "conversion_failed" else "the converted model that misbehaves"),
              (f"- `inputs.npy`: {len(meta['sample_indices'])} test samples, float32, preprocessed, "
               f"layout {meta['layout']} (the samples whose prediction changed come first)"
               if meta.get("inputs_file", "inputs.npy") == "inputs.npy" else
               f"- `inputs.npz`: {len(meta['sample_indices'])} test samples, one array per model input named "
               "after it, each in its own dtype (the samples whose prediction changed come first)"),
              "- `expected.npy`: the source model's outputs on them (the PC baseline)"
              + ("; several outputs side by side, as `output_layout` in bundle.json lists them"
                 if meta.get("output_layout") and len(meta["output_layout"]) > 1 else ""),
              "- `observed.npy`: what the target produced (when it produced anything)",
              "- `bundle.json`: everything below, machine-readable", "",
              "## Reproduce", ""]
    if meta["host_runtime"]:
        pins = " ".join(f"{p}=={v}" if v else p for p, v in meta["packages"].items())
        lines += [f"`pip install {pins}` then `python reproduce.py`"
                  + (" (exit code 1 when the problem reproduces)." if meta["judges_itself"] else
                     f": it runs the model in {meta['host_runtime']} on this PC, where it is right, and shows what "
                     f"{meta['where']} produced on the same inputs."), ""]
    if meta.get("web_reproducer"):
        lines += [f"In a browser, on `{meta['combo'].get('backend')}` and on wasm side by side: `npm install`, "
                  "`python3 -m http.server --bind 127.0.0.1 8000`, then open "
                  "http://127.0.0.1:8000/reproduce_web.html in Chromium started with `--enable-unsafe-webgpu` "
                  "(it shows each backend's max |difference| from `expected.bin` and its top-1 agreement).", ""]
    if meta.get("backend_test"):
        lines += ["`backend_test/` is ONNX's backend-test layout: `model.onnx` and `test_data_set_0/input_0.pb`, "
                  f"`output_0.pb` (the source model's outputs) for the {meta['backend_test']['samples']} sample(s) "
                  "that show the fault; reproduce.py replays it too.", ""]
    lines += ["With deploytool, the same combination again:", "", *fence(command), "",
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


def bundle_row(ctx: "RunContext", result: Result, run_id: str) -> None:
    """Write the bundle of a failing row and note it on the row; a fault here never costs the row."""
    src = ctx.sources.get(result.combo.framework)
    if src is None:
        return
    layout = result.artifact.layout if result.artifact is not None else src.artifact.layout

    try:
        path = write_bundle(result, ctx.ws.report_dir(run_id) / "bugs",
                            x_test=ctx.dataset.in_layout(ctx.dataset.x_test, layout),
                            baseline_outputs=src.baseline.outputs(), source=src.artifact,
                            versions=host_facts()["versions"], command=shlex.join(reproduce_command(ctx, result.combo)))
        result.bundle, result.bundle_error = str(path), ""
    except Exception as e:
        result.bundle_error = f"{type(e).__name__}: {e}"
