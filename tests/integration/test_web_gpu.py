"""WebGPU rows for real: Debian's Chromium 156 launched with the WebGPU flags (SwiftShader's adapter on this
GPU-less machine) runs the contract tier's tiny models (sklearn digits, cached in ~/.cache/deploytool/tests) on
TF.js's webgpu backend and onnxruntime-web's WebGPU execution provider, each beside its wasm twin in the same
session. Also: the WebGPU browser is the only one with the flags, and a browser with no adapter makes a webgpu
row `unsupported` with the browser's reason, not a failure.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import psutil
import pytest

from deploytool.bugs.bundle import WEB_REPRODUCER
from deploytool.devices.harness_server import HarnessServer
from deploytool.devices.web_harness import check_harness
from deploytool.errors import StageFailed
from deploytool.runtimes.web import WebRuntime
from deploytool.runtimes.web_gpu import is_software_adapter
from deploytool.runtimes.web_session import WebSession

pytestmark = pytest.mark.browser

N = 16
TIMED = 4  # a software adapter takes tens to hundreds of ms per sample: a few timed samples are enough here


@pytest.fixture(scope="module")
def models():
    from tests.contract.model_cache import ModelCache

    cache = ModelCache()
    yield cache
    cache.close()


def _run(session, artifact, x, backend):
    rt = WebRuntime(backend=backend, session=session, latency_samples=TIMED, warmup_runs=1)
    try:
        rt.load(artifact)
        return rt.run(x)
    finally:
        rt.close()


def _flags_of(pids) -> list[list[str]]:
    out = []
    for pid in pids:
        try:
            cmd = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        if cmd and not any(a.startswith("--type=") for a in cmd):
            out.append(cmd)
    return out


def _check_adapter(out):
    env = out.environment
    adapter = env["webgpu_adapter"]
    assert env["backend"] == "webgpu" and adapter["vendor"] and adapter["architecture"], adapter
    assert env["gpu"].startswith(f"{adapter['vendor']} {adapter['architecture']}")
    if is_software_adapter(adapter):  # SwiftShader here: its latency is labelled as a software adapter's
        assert any("software adapter" in n and env["gpu"] in n for n in out.notes), out.notes
    assert out.latency_ms.shape == (TIMED,) and np.all(out.latency_ms > 0)
    assert out.memory_bytes["renderer_peak_rss_bytes"] > 20e6


def test_tfjs_on_webgpu_agrees_with_its_wasm_twin_and_says_where_it_ran(models):
    art = models.for_format("tfjs_graph")
    x = models.inputs(art, N)
    with WebSession() as session:
        wasm = _run(session, art, x, "wasm")
        gpu = _run(session, art, x, "webgpu")
        browsers = _flags_of(session.process_ids)
        assert session.launches == 2  # one browser for the wasm row, one launched for the WebGPU row
    # only the WebGPU rows' browser has the WebGPU flags
    assert sorted("--enable-unsafe-webgpu" in cmd for cmd in browsers) == [False, True], browsers
    _check_adapter(gpu)
    flags = gpu.environment["backend_flags"]  # read from TF.js's live env: how the backend computes
    assert "WEBGPU_CPU_FORWARD" in flags and all(k.startswith("WEBGPU_") for k in flags)
    assert gpu.environment["tfjs_readback"] == "data()"
    assert gpu.outputs.shape == wasm.outputs.shape == (N, 10)
    diff = float(np.abs(gpu.outputs - wasm.outputs).max())
    assert diff < 1e-4, f"TF.js webgpu departs from wasm on the same file by {diff:g}"
    assert (gpu.outputs.argmax(1) == wasm.outputs.argmax(1)).all()


def _reproduce(session, folder):
    """A bundle's reproduce_web.html, served with the harness's node_modules, in the WebGPU rows' browser."""
    routes = {"/": folder, "/node_modules/": check_harness() / "node_modules"}
    with HarnessServer(routes) as server:
        page = session.browser(webgpu=True).new_page()
        try:
            page.goto(f"{server.origin}/reproduce_web.html", wait_until="load")
            page.wait_for_function("() => window.reproduction", timeout=120_000, polling=50)
            return page.evaluate("() => window.reproduction")
        finally:
            page.close()


def test_onnxruntime_web_on_webgpu_names_the_nodes_that_fell_back_to_wasm(models, tmp_path):
    art = models.for_format("onnx")
    x = models.inputs(art, N)
    with WebSession() as session:
        gpu = _run(session, art, x, "webgpu")
        wasm = _run(session, art, x, "wasm")
        # the bundle's browser reproducer on the same file and samples: both backends against wasm's outputs
        (tmp_path / "model").mkdir()
        shutil.copy2(art.path, tmp_path / "model" / "model.onnx")
        shutil.copy2(WEB_REPRODUCER, tmp_path / "reproduce_web.html")
        (tmp_path / "web.json").write_text(json.dumps({
            "library": "onnxruntime-web", "backend": "webgpu", "samples": 8, "model_file": "model.onnx",
            "inputs": [{"name": None, "file": "input_0.bin", "dtype": "float32", "shape": list(x.shape[1:])}],
            "outputs": [{"name": None, "size": 10, "scale": 0.0, "zero_point": 0}],
            "fault": {"stage": "accuracy", "reason": ""}, "limits": {"agreement": 1.0, "max_abs_error": 1e-4}}))
        x[:8].astype(np.float32).tofile(tmp_path / "input_0.bin")
        wasm.outputs[:8].astype(np.float32).tofile(tmp_path / "expected.bin")
        shown = _reproduce(session, tmp_path)
    assert shown["backends"]["wasm"]["max_abs_error"] < 1e-5, shown  # wasm against its own outputs
    on_gpu = shown["backends"]["webgpu"]
    departs = float(np.abs(gpu.outputs[:8] - wasm.outputs[:8]).max())
    assert on_gpu["max_abs_error"] == pytest.approx(departs, rel=1e-3, abs=1e-6), (shown, departs)
    assert shown["reproduced"] == (departs > 1e-4), shown
    _check_adapter(gpu)
    placed = gpu.environment["ort_placement"]
    assert placed["known"] and placed["webgpu_nodes"] > 0, placed
    # every fallen-back node is named with its op type, and the note says the same
    assert sum(placed["fallback_ops"].values()) == len(placed["fallback_nodes"])
    sentence = next(n for n in gpu.notes if n.startswith("onnxruntime-web ran"))
    assert ("fell back" in sentence) == bool(placed["fallback_nodes"])
    assert gpu.outputs.shape == (N, 10) and np.isfinite(gpu.outputs).all()


def test_without_an_adapter_a_webgpu_row_is_unsupported_with_the_reason(models):
    art = models.for_format("tfjs_graph")
    with WebSession(webgpu_flags=()) as session:  # Chromium as the other rows get it: no WebGPU adapter here
        with pytest.raises(StageFailed) as e:
            _run(session, art, models.inputs(art, 4), "webgpu")
    assert e.value.status == "unsupported" and e.value.reason.startswith("no WebGPU adapter: "), e.value.reason


def test_the_preflight_puts_the_adapter_in_webgpu_rows_keys_only():
    from deploytool.targets import Position, get_target

    web = get_target("web")
    found = web.preflight(web.options({"backends": ("wasm", "ort:webgpu")}))
    adapter = found.identity["webgpu_adapter"]
    assert adapter and not adapter.startswith("none:"), adapter  # this machine offers SwiftShader's
    assert web.row_identity(found.identity, Position(backend="webgpu"))["webgpu_adapter"] == adapter
    assert "webgpu_adapter" not in web.row_identity(found.identity, Position(backend="wasm"))
    assert "webgpu_adapter" not in web.preflight(web.options({"backends": ("wasm",)})).identity
