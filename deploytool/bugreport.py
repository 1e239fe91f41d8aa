"""The upstream bug bundle: for each failing combination, a folder a
maintainer of the converter or runtime can act on — the model that misbehaves
(or the source that would not convert), a few inputs (the flipped samples
first), the source model's outputs on them, what the target produced, every
version involved, and `reproduce.py`, which needs only numpy and the runtime.
The shape follows ONNX's backend test cases: a model plus its test data.
It writes files; it never measures or judges.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import Artifact
from deploytool.result import Result

SAMPLES = 16
HOST_RUNTIME = {"tflite": ("litert", "ai-edge-litert"), "onnx": ("onnxruntime", "onnxruntime")}
REPRODUCER = Path(__file__).with_name("bugreport_reproduce.py")


def slug(result: Result) -> str:
    c = result.combo
    parts = [c.framework, c.format, c.quantize, c.target, c.backend, c.device]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(p for p in parts if p))


def _pick(result: Result, n_samples: int) -> np.ndarray:
    flipped = [f["index"] for f in (result.details.get("comparison") or {}).get("flipped", [])]
    rest = [i for i in range(n_samples) if i not in set(flipped[:SAMPLES])]
    return np.asarray((flipped[:SAMPLES] + rest)[:SAMPLES], dtype=np.int64)


def _title(result: Result, art: dict[str, Any] | None, env: dict[str, Any]) -> str:
    c = result.combo
    runtime = " ".join(str(env[k]) for k in ("runtime", "runtime_version", "version") if env.get(k))
    where = {"web": f"{runtime or 'the browser'} ({env.get('backend') or c.backend}) in Chromium "
                    f"{env.get('browser_version', '')}".rstrip(),
             "android": f"benchmark_model on {env.get('model') or c.device}"}.get(c.target, runtime or c.target)
    made_by = f"{art['converter']} {art['converter_version']}" if art else "the converter"
    if result.status == "conversion_failed":
        return f"{made_by.split(' ')[0]} cannot convert {result.model} ({c.framework}) to {c.format}/{c.quantize}"
    if result.status != "measured":
        return f"{where}: {c.format}/{c.quantize} model made by {made_by} fails ({result.status})"
    m = result.metrics
    return (f"{where}: {c.format}/{c.quantize} model made by {made_by} gives {m['accuracy']:.1%} accuracy "
            f"vs {m['baseline_accuracy']:.1%} for the source model ({m['flipped_count']} predictions change)")


def write_bundle(result: Result, out_dir: Path, *, x_test: np.ndarray, baseline_outputs: np.ndarray,
                 source: Artifact, versions: dict[str, str], command: str) -> Path:
    """Write the bundle for one failing row into out_dir/<slug>/ and return that folder."""
    c = result.combo
    art = result.details.get("artifact")
    env = result.details.get("environment") or {}
    bundle = out_dir / slug(result)
    if bundle.exists():
        shutil.rmtree(bundle)
    (bundle / "model").mkdir(parents=True)
    model_path = Path(art["path"]) if art and result.status != "conversion_failed" else Path(source.path)
    copy = shutil.copytree if model_path.is_dir() else shutil.copy2
    copy(model_path, bundle / "model" / model_path.name)
    for extra in (model_path.parent.glob(model_path.name + ".data") if model_path.is_file() else []):
        shutil.copy2(extra, bundle / "model" / extra.name)  # ONNX external weights
    idx = _pick(result, len(x_test))
    np.save(bundle / "inputs.npy", x_test[idx])
    np.save(bundle / "expected.npy", baseline_outputs[idx])
    if result.outputs_path and Path(result.outputs_path).exists():
        np.save(bundle / "observed.npy", np.load(result.outputs_path)[idx])
    fmt = art["format"] if art else ""
    host_runtime = HOST_RUNTIME.get(fmt, (None, None))[0] if result.status != "conversion_failed" else None
    limits = {k: v[0] for k, v in (result.details.get("tolerances") or {}).items()
              if k in ("agreement", "max_abs_error")}
    where = c.target + (f":{c.backend}" if c.backend else "") + (f"@{c.device}" if c.device else "")
    title = _title(result, art, env)
    meta = {"title": title, "model": result.model, "dataset": result.dataset, "combo": c.__dict__,
            "status": result.status, "verdict": result.verdict, "reason": result.reason, "target": c.target,
            "where": where, "model_file": model_path.name, "host_runtime": host_runtime, "pass_limits": limits,
            "sample_indices": idx.tolist(), "layout": (art or {}).get("layout") or source.layout,
            "metrics": result.metrics, "artifact": art, "environment": env, "versions": versions}
    (bundle / "bundle.json").write_text(json.dumps(meta, indent=2, default=str))
    shutil.copy2(REPRODUCER, bundle / "reproduce.py")
    (bundle / "README.md").write_text(_readme(meta, command))
    return bundle


def _readme(meta: dict[str, Any], command: str) -> str:
    m, art = meta["metrics"], meta["artifact"] or {}
    lines = [f"# {meta['title']}", ""]
    if meta["status"] == "measured":
        lines += [f"On `{meta['where']}` the model agrees with the source model on {m['agreement']:.2%} of "
                  f"{meta['dataset']} test samples (max |output difference| {m['max_abs_error']:.3g}); "
                  f"the tolerance's pass limits are {json.dumps(meta['pass_limits'])}.", ""]
    else:
        lines += [f"Status `{meta['status']}` on `{meta['where']}`:", "", "```", meta["reason"], "```", ""]
    lines += ["## Files", "",
              f"- `model/{meta['model_file']}`: " + ("the source model that did not convert" if meta["status"] ==
                                                     "conversion_failed" else "the converted model that misbehaves"),
              f"- `inputs.npy`: {len(meta['sample_indices'])} test samples, float32, preprocessed, "
              f"layout {meta['layout']} (the samples whose prediction changed come first)",
              "- `expected.npy`: the source model's outputs on them (the PC baseline)",
              "- `observed.npy`: what the target produced (when it produced anything)",
              "- `bundle.json`: everything below, machine-readable", "",
              "## Reproduce", ""]
    if meta["host_runtime"]:
        pkg = HOST_RUNTIME[art["format"]][1]
        ver = meta["versions"].get(pkg, "")
        lines += [f"`pip install numpy {pkg}=={ver}` then `python reproduce.py`"
                  + (" (exit code 1 when the problem reproduces)." if meta["target"] == "host" else
                     f": it runs the model in {meta['host_runtime']} on this PC, where it is right, and shows what "
                     f"{meta['where']} produced on the same inputs."), ""]
    lines += ["With deploytool, the same combination again:", "", "```", command, "```", "",
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
