"""A finding's folder: `finding.md` (its class, the evidence, what to do next) for every finding, and — only
for an upstream finding its bare reproducer confirmed — `issue.md` addressed to the project that owns the faulty
part, with the fields its issue template asks for (versions of every package involved, OS and browser, the
standalone reproduction that downloads nothing with every attached file named, the minimal model, expected
versus actual; for onnxruntime whether the model is quantized, for PyTorch `collect_env`), beside the bug
bundle's files. After a run, each upstream candidate it touched is confirmed (deploytool.bugs.confirm) unless
the same bundle was. Writes files and confirmations only."""

from __future__ import annotations

import json
import platform
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from deploytool.bugs.bundle import pip_line
from deploytool.bugs.confirm import bundle_key, confirm
from deploytool.bugs.findings import Signature, record_run
from deploytool.errors import DeploytoolError, Frame
from deploytool.provenance import host_facts, os_platform
from deploytool.report.markdown import code, fence, prose
from deploytool.store import Finding, ResultStore
from deploytool.workspace import share_large_files

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


def write_finding(finding: Finding, out: Path, blobs: Path | None = None) -> Path:
    """(Re)write a finding's folder: finding.md, finding.json, the latest bundle's files (under 10 MiB) and, for
    a confirmed upstream finding only, issue.md. `blobs`: the workspace's (share_large_files), where the bundle's
    large files are kept once."""
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
        if blobs is not None:
            share_large_files(out, blobs)
    meta = _bundle_meta(out)
    (out / "finding.json").write_text(json.dumps(finding.to_json(), indent=2, default=str))
    (out / "finding.md").write_text(finding_text(finding, meta))
    issue = out / "issue.md"
    if finding.state == "confirmed":
        issue.write_text(issue_text(finding, meta, copied))
    elif issue.exists():
        issue.unlink()  # no longer confirmed (not reproduced with what is installed now)
    return out


NEXT_STEP = {
    "coverage gap": "Not a bug: the tool has no conversion or kernel for it. What would make it work: {remedy}",
    "unconfirmed": "Not filed: a package involved runs outside its own declared requirements. Reproduce it in a "
                   "virtual environment with those pins (`pip install` them, run the bundle's reproducer) before "
                   "reporting it upstream.",
    "candidate": "Not filed yet: its bare reproducer has not shown it here ({confirmation}).",
    "not reproduced": "Not filed: its bare reproducer, run without deploytool, did not show the fault ({confirmation}); "
                      "deploytool's own handling may be at fault.",
    "confirmed": "Confirmed by its bare reproducer (`{command}` in a process that cannot import deploytool); "
                 "issue.md is ready for {owner}.",
}


def finding_text(finding: Finding, meta: dict[str, Any]) -> str:
    """finding.md: what deploytool concluded about the finding, on what evidence, and what to do next."""
    t, c = finding.triage, finding.confirmation
    lines = [f"# {prose(finding.title)}", "", f"- class: {code(finding.klass or 'untriaged')}, state: "
             f"**{finding.state}**", f"- owner: {finding.owner or 'none (a plugin of yours)'}",
             f"- why: {prose(str(t.get('why') or ''))}"]
    if t.get("raised_at"):
        lines.append(f"- raised at: {code(Frame.from_json(t['raised_at']).describe())}")
    if t.get("ops"):
        lines.append("- ops: " + ", ".join(code(str(o)) for o in t["ops"]))
    lines += [f"- involved: {', '.join(str(p) for p in t.get('packages') or []) or 'n/a'}"]
    if t.get("mismatches"):
        lines += ["", "Requirements not met:", "", *[f"- {prose(str(m))}" for m in t["mismatches"]]]
    note = NEXT_STEP.get(finding.state, "")
    lines += ["", note.format(remedy=prose(str(t.get("remedy") or "")), owner=finding.owner,
                              command=c.get("command", ""),
                              confirmation=(c.get("state") or "not run") + (f": {c.get('output', '')[-300:]}"
                                                                             if c.get("output") else ""))]
    if c.get("output"):
        lines += ["", "What the reproducer printed:", "", *fence(str(c["output"]))]
    lines += ["", "Seen in: " + ", ".join(code(e) for e in finding.examples[:8])]
    return "\n".join(lines) + "\n"


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


def _system_information(finding: Finding, sig: Signature, meta: dict[str, Any]) -> list[str]:
    """The issue's system information: OS, Python, the owner's packages (its template's order), every distribution
    the fault involved, the versions it was seen with, and the owner's template questions answered."""
    owner = finding.owner
    lines = [f"- OS: {os_platform()}", f"- Python: {platform.python_version()}"]
    relevant = PACKAGES_OF.get(owner, ())
    versions = finding.last_versions
    for p in sorted(versions, key=lambda k: (k not in relevant, k)):
        if p in relevant or p in ("numpy",):
            lines.append(f"- {p}: {versions[p]}")
    shown = {p for p in versions if p in relevant or p == "numpy"}
    for pkg in (finding.triage.get("packages") or []):  # every distribution the fault involved
        name = str(pkg).split(" ")[0]
        if name not in shown:
            lines.append(f"- {pkg.replace(' ', ': ', 1)}")
            shown.add(name)
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
    return lines


def issue_text(finding: Finding, meta: dict[str, Any], files: list[str]) -> str:
    sig, owner = Signature.from_json(finding.signature), finding.owner
    m = meta.get("metrics") or {}
    lines = [f"<!-- for https://github.com/{owner}/issues/new -->", f"# {prose(finding.title)}", "",
             f"Seen {finding.occurrences} time(s) in {len(finding.runs)} run(s), first {finding.first_seen}, "
             f"last {finding.last_seen}; in: " + ", ".join(code(e) for e in finding.examples[:6]) + ".", ""]
    if finding.not_seen_since:
        lines += [f"**Not seen since {finding.not_seen_since}.**", ""]
    quantize = str((meta.get("combo") or {}).get("quantize") or sig.quantize or "none")
    lines += ["## What happens", "", f"- stage: {sig.stage}; conversion: {sig.direction} with {sig.converter}, "
              f"quantization `{quantize}`" + (f"; runtime: {sig.runtime}" if sig.runtime else "")]
    if sig.error:
        lines.append(f"- error: {code(sig.error)}" + (f" on {', '.join(code(op) for op in sig.ops)}" if sig.ops else ""))
    if meta.get("reason"):
        lines += ["", *fence(str(meta["reason"])[:2000])]
    if m.get("agreement") is not None and sig.stage in ("accuracy", "latency"):
        observed = "`observed.npy` (attached); " if "observed.npy" in files else ""
        lines += ["", "## Expected versus actual", "",
                  f"- expected: the source model's outputs (`expected.npy`, attached; top-1 accuracy "
                  f"{_pct(m.get('baseline_accuracy'))} on the test set)",
                  f"- actual: {observed}top-1 agreement with the source {_pct(m.get('agreement'))}, accuracy "
                  f"{_pct(m.get('accuracy'))}, max |output difference| {m.get('max_abs_error')}"]
    c = finding.confirmation
    if c.get("state") == "confirmed":
        lines += ["", f"Reproduced on the versions below by `{c.get('command')}` alone (deploytool not importable in "
                  "that process):", "", *fence(str(c.get("output") or "")[-1500:])]
    if owner == "microsoft/onnxruntime":
        lines += ["", f"Is this a quantized model? {'yes (' + quantize + ')' if quantize != 'none' else 'no'}"]
    lines += ["", "## System information", "", *_system_information(finding, sig, meta)]
    if owner == "pytorch/pytorch":
        lines += ["", "<details><summary>collect_env</summary>", "", *fence(_collect_env()), "</details>"]
    lines += ["", "## Standalone reproduction (downloads nothing)", "", *_reproduction(meta, files)]
    if "backend_test" in files:
        lines += ["", "`backend_test/` is the same fault in ONNX's backend-test layout (`model.onnx`, "
                  "`test_data_set_0/input_0.pb` and `output_0.pb`, the expected outputs), ready for onnx's "
                  "test runner."]
    if "minimal" in files:
        lines += ["", "## Minimal model", "", "`minimal/` is the smallest cut of the model that already goes wrong "
                  "(`source/`, `converted/`, and its inputs/expected/observed)."]
    return "\n".join(lines) + "\n"


def _reproduction(meta: dict[str, Any], files: list[str]) -> list[str]:
    """How to run each attached reproducer, with the pip line pinning every package it imports."""
    lines = [f"Attached: {', '.join(f'`{f}`' for f in files)}." if files else "Nothing attached.", ""]
    conv = meta.get("convert")
    if conv and "reproduce_convert.py" in files:
        lines += ["The conversion (`convert()` in `reproduce_convert.py` is the exact call, on `" + conv["source"]
                  + "`" + (", calibrated on `calibration.npz`" if "calibration.npz" in files else "") + "):", "",
                  "```sh", pip_line(conv["packages"]), "python reproduce_convert.py   # exit code 1: it fails", "```", ""]
    if "reproduce.py" in files and meta.get("host_runtime"):
        what = ("# exit code 1: it reproduces" if meta.get("judges_itself") else
                f"# the same file in {meta['host_runtime']} on a PC, for comparison (it is right there)")
        lines += ["```sh", pip_line(meta.get("packages") or {}), f"python reproduce.py   {what}",
                  "```", "", f"`{meta.get('inputs_file', 'inputs.npy')}` holds the few samples that show it (the ones "
                  "whose prediction changes come first), `expected.npy` the source model's outputs"
                  + (", `observed.npy` what the faulty part produced." if "observed.npy" in files else "."), ""]
    if "reproduce_web.html" in files:
        lines += ["In the browser, with only the npm packages of `package.json`:", "", "```sh",
                  "npm install && pip install playwright", "python reproduce_web.py   # exit code 1: it reproduces",
                  "```", "", "(`reproduce_web.py` serves the folder on 127.0.0.1 and opens `reproduce_web.html` in "
                  "headless Chromium; the page alone works too, served from 127.0.0.1.)", ""]
    return lines


def _pct(v: Any) -> str:
    return f"{100 * float(v):.2f}%" if isinstance(v, (int, float)) else "n/a"


def fold_findings(store: ResultStore, ws: Any, run_id: str, results: list[Any], log: Callable[[str], None],
                  where: str = "in this run") -> None:
    """The end of a migrate or a lab night: its rows folded into the findings (`record_and_write`). A fault here is
    logged, not raised: the rows are stored already (a user's mistake, a DeploytoolError, still ends the command)."""
    if not results:  # nothing measured now on a run folded before: no sighting, and nothing ran without one
        return
    try:
        touched = record_and_write(store, ws, run_id, results)
    except DeploytoolError:
        raise
    except Exception as e:
        log(f"findings: not updated ({type(e).__name__}: {e})")
        return
    if touched:
        log(f"findings: {len(touched)} distinct bug(s) {where}; `deploytool findings` lists them")


def record_and_write(store: ResultStore, ws: Any, run_id: str, results: list[Any],
                     confirm_upstream: bool = True) -> list[Finding]:
    """Fold a run into the findings, confirm each upstream candidate it touched by its bare reproducer (unless
    the same bundle was confirmed before), and (re)write the folder of every finding it touched."""

    touched = record_run(store, run_id, results, host_facts()["versions"])
    out = []
    for f in touched:
        if confirm_upstream and f.klass == "upstream" and f.bundle and Path(f.bundle).is_dir():
            key = bundle_key(Path(f.bundle))
            if f.confirmation.get("key") != key:
                done = confirm(Path(f.bundle)).to_json()
                store.confirm_finding(f.id, done)
                f = replace(f, confirmation=done)
        write_finding(f, ws.finding_dir(f.id), ws.blob_dir())
        out.append(f)
    return out
