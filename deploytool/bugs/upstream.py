"""The upstream issue of a finding: `issue.md` addressed to the project that
owns the faulty part, with the fields its issue template asks for (versions,
OS and browser, standalone reproduction that downloads nothing, the minimal
model, expected versus actual; for onnxruntime whether the model is quantized,
for PyTorch `collect_env`), beside the bug bundle's files. Writes files only."""

from __future__ import annotations

import json
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

from deploytool.bugs.bundle import PACKAGES
from deploytool.bugs.findings import Signature, record_run
from deploytool.provenance import host_facts
from deploytool.report.markdown import code, fence, prose
from deploytool.store import Finding, ResultStore

BUNDLE_LIMIT_BYTES = 10 * 2**20
# what each project's issue template asks for beyond the common fields
TEMPLATE_ASKS = {
    "tensorflow/tensorflow": ["Reproduced with tf-nightly: not tried by deploytool (the versions below are what ran)",
                              "Type: conversion failure / wrong results, see the stage above"],
    "tensorflow/tfjs": ["Install method: npm (package-lock in deploytool's web_harness)",
                        "Device: desktop, headless Chromium"],
    "onnx/tensorflow-onnx": ["Model: attached (model/); retried with the highest opset: not tried by deploytool"],
    "microsoft/onnxruntime": ["Install: pip (CPU build); API: Python; execution provider: CPU (wasm in the browser)"],
    "pytorch/pytorch": ["collect_env: see below"],
    "google-ai-edge/litert-torch": [],
}
PACKAGES_OF = {
    "tensorflow/tensorflow": ("tensorflow", "ai-edge-litert"),
    "tensorflow/tfjs": ("tensorflowjs", "tfjs", "tfjs-tflite", "onnxruntime-web", "browser"),
    "onnx/tensorflow-onnx": ("tf2onnx", "tensorflow", "onnx", "onnxruntime"),
    "microsoft/onnxruntime": ("onnxruntime", "onnx", "onnxruntime-web"),
    "pytorch/pytorch": ("torch", "onnx"),
    "google-ai-edge/litert-torch": ("litert-torch", "torch", "ai-edge-litert"),
    "google-ai-edge/LiteRT": ("ai-edge-litert", "tensorflow"),
}


def write_finding(finding: Finding, out: Path) -> Path:
    """(Re)write a finding's folder: issue.md, finding.json and the latest bundle's files (under 10 MiB)."""
    out.mkdir(parents=True, exist_ok=True)
    bundle = Path(finding.bundle) if finding.bundle else None
    copied: list[str] = []
    if bundle is not None and bundle.is_dir():
        total = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
        for p in sorted(bundle.iterdir()):
            if p.name in ("README.md",):
                continue
            dest = out / p.name
            if dest.exists():
                shutil.rmtree(dest) if dest.is_dir() else dest.unlink()
            if total > BUNDLE_LIMIT_BYTES and p.is_dir() and p.name == "model" and (bundle / "minimal").is_dir():
                continue  # too big to attach whole: the minimal cut stands in for it
            (shutil.copytree if p.is_dir() else shutil.copy2)(p, dest)
            copied.append(p.name)
    meta = _bundle_meta(out)
    (out / "finding.json").write_text(json.dumps(finding.to_json(), indent=2, default=str))
    (out / "issue.md").write_text(issue_text(finding, meta, copied))
    return out


def _bundle_meta(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "bundle.json").read_text())
    except (OSError, ValueError):
        return {}


def _collect_env() -> str:
    import subprocess

    try:
        r = subprocess.run([sys.executable, "-m", "torch.utils.collect_env"], capture_output=True, text=True,
                           timeout=60)
        return r.stdout.strip() or r.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(collect_env could not run: {e})"


def issue_text(finding: Finding, meta: dict[str, Any], files: list[str]) -> str:
    sig, owner = Signature.from_json(finding.signature), finding.owner
    m = meta.get("metrics") or {}
    lines = [f"<!-- for https://github.com/{owner}/issues/new -->", f"# {prose(finding.title)}", "",
             f"Seen {finding.occurrences} time(s) in {len(finding.runs)} run(s), first {finding.first_seen}, "
             f"last {finding.last_seen}; in: " + ", ".join(code(e) for e in finding.examples[:6]) + ".", ""]
    if finding.not_seen_since:
        lines += [f"**Not seen since {finding.not_seen_since}.**", ""]
    lines += ["## What happens", "", f"- stage: {sig.stage}; conversion: {sig.direction} with {sig.converter}, "
              f"quantization `{sig.quantize}`" + (f"; runtime: {sig.runtime}" if sig.runtime else "")]
    if sig.error:
        lines.append(f"- error: {code(sig.error)}" + (f" on {', '.join(code(op) for op in sig.ops)}" if sig.ops else ""))
    if meta.get("reason"):
        lines += ["", *fence(str(meta["reason"])[:2000])]
    if m.get("agreement") is not None:
        lines += ["", "## Expected versus actual", "",
                  f"- expected: the source model's outputs (`expected.npy`; top-1 accuracy "
                  f"{_pct(m.get('baseline_accuracy'))} on the test set)",
                  f"- actual: `observed.npy`; top-1 agreement with the source {_pct(m.get('agreement'))}, accuracy "
                  f"{_pct(m.get('accuracy'))}, max |output difference| {m.get('max_abs_error')}"]
    if owner == "microsoft/onnxruntime":
        lines += ["", f"Is this a quantized model? {'yes (' + sig.quantize + ')' if sig.quantize != 'none' else 'no'}"]
    lines += ["", "## System information", "", f"- OS: {platform.platform()}", f"- Python: {platform.python_version()}"]
    relevant = PACKAGES_OF.get(owner, ())
    versions = finding.last_versions
    for p in sorted(versions, key=lambda k: (k not in relevant, k)):
        if p in relevant or p in ("numpy",):
            lines.append(f"- {p}: {versions[p]}")
    affected = {p: v for p, v in finding.versions.items() if p in relevant and len(v) > 1}
    if affected:
        lines += [f"- seen with {p} " + ", ".join(v) for p, v in sorted(affected.items())]
    asks = TEMPLATE_ASKS.get(owner, [])
    if sig.runtime.endswith(":webgpu"):  # the template's default answer names the CPU; this one ran on WebGPU
        gpu = (meta.get("environment") or {}).get("gpu") or "unknown adapter"
        asks = [a.replace("Install: pip (CPU build); API: Python; execution provider: CPU (wasm in the browser)",
                          "Install: npm (onnxruntime-web); API: JavaScript; execution provider: WebGPU")
                for a in asks] + [f"Backend: WebGPU on {gpu}; the same file on wasm is right"]
    lines += [f"- {ask}" for ask in asks]
    if owner == "pytorch/pytorch":
        lines += ["", "<details><summary>collect_env</summary>", "", *fence(_collect_env()), "</details>"]
    lines += ["", "## Standalone reproduction (downloads nothing)", ""]
    if "reproduce.py" in files:
        ran = meta.get("versions") or {}
        packages = meta.get("packages") or {  # a bundle written before bundle.json named its packages
            p: ran.get(p, "") for p in ("numpy", *PACKAGES.get(meta.get("host_runtime") or "", ()))}
        pins = " ".join(f"{p}=={v}" if v else p for p, v in packages.items())
        lines += [f"Attached: {', '.join(f'`{f}`' for f in files)}.", "",
                  "```sh", f"pip install {pins}", "python reproduce.py", "```", "",
                  "`inputs.npy` holds the few samples that show it (the ones whose prediction changes come first), "
                  "`expected.npy` the source model's outputs, `observed.npy` what the faulty part produced."]
    else:
        lines.append("No bundle was written for this finding; run the deploytool command in finding.json.")
    if "reproduce_web.html" in files:
        lines += ["", "`reproduce_web.html` runs the same samples in the browser on the backend at fault and on wasm, "
                  "with only the npm packages of `package.json` (`npm install`, serve the folder on 127.0.0.1, open "
                  "it in Chromium with `--enable-unsafe-webgpu`)."]
    if "backend_test" in files:
        lines += ["", "`backend_test/` is the same fault in ONNX's backend-test layout (`model.onnx`, "
                  "`test_data_set_0/input_0.pb` and `output_0.pb`, the expected outputs), ready for onnx's "
                  "test runner."]
    if "minimal" in files:
        lines += ["", "## Minimal model", "", "`minimal/` is the smallest cut of the model that already goes wrong "
                  "(`source/`, `converted/`, and its inputs/expected/observed)."]
    return "\n".join(lines) + "\n"


def _pct(v: Any) -> str:
    return f"{100 * float(v):.2f}%" if isinstance(v, (int, float)) else "n/a"


def record_and_write(store: ResultStore, ws: Any, run_id: str, results: list[Any]) -> list[Finding]:
    """Fold a run into the findings and (re)write the folder of every finding it touched."""

    touched = record_run(store, run_id, results, host_facts()["versions"])
    for f in touched:
        write_finding(f, ws.finding_dir(f.id))
    return touched
