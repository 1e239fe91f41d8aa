"""The web target for real: Debian's Chromium driven by Playwright runs tiny
models converted with the real converters (tensorflowjs, tf2onnx,
TFLiteConverter) in every in-browser runtime and backend, and the outputs are
checked against the Keras model's own. Also: the harness server's roots and
loopback binding (its defences against a hostile client are unit tests, in
tests/unit/test_harness_server.py), and faults (a corrupt model, a timeout, a
crashed renderer) becoming StageFailed with the browser closed.
"""

from __future__ import annotations

import dataclasses
import http.client
import shutil
import socket
import time

import numpy as np
import psutil
import pytest

from deploytool.data.feed import Feed
from deploytool.devices.harness_server import HarnessServer
from deploytool.errors import HarnessMissing, StageFailed, UnknownOption
from deploytool.runtimes.measure import MIN_READINGS
from deploytool.runtimes.web import WebRuntime
from deploytool.runtimes.web_session import WebSession
from tests.integration import web_models

pytestmark = pytest.mark.browser

FP32_MAX_ABS_DIFF = 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return web_models.build(tmp_path_factory.mktemp("web_models"))


def _assert_all_gone(pids: set[int]) -> None:
    assert pids, "the runtime should have recorded its browser's processes"
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"Chromium processes outlived close(): {alive}"


def _run(artifact, inputs, session=None, **options):
    """One row: in the module's shared browser (`session`: a fresh page of its own, as a row of a run gets), or in
    a browser of its own that must be gone, every process of it, once the runtime is closed."""
    rt = WebRuntime(session=session, **options)
    try:
        rt.load(artifact)
        out = rt.run(inputs)
    finally:
        rt.close()
    if session is None:
        _assert_all_gone(rt.last_process_ids)
    return out


_SHARED: list[WebSession] = []  # the module's shared session while it is open


@pytest.fixture(scope="module")
def shared():
    """One Chromium for the tests of what a row computes and measures (about 2 s of CPU a launch with its driver,
    and the libraries' compiled code kept in its profile for the next page); the tests of a browser's own life
    (a launch timed, a crash, a timeout, everything gone at close) launch their own, after `own_browser`. It is
    never relaunched: the tests that share it come first in the file."""
    session = WebSession()
    _SHARED.append(session)
    yield session
    _SHARED.clear()
    session.close()
    _assert_all_gone(session.process_ids)
    assert session.launches == 1


@pytest.fixture
def own_browser():
    """For a test that launches a browser of its own: Playwright's sync API allows one driver per thread, so the
    shared session, if open, is closed first."""
    for session in _SHARED:
        session.close()


def _check_common(out, n, backend, threads):
    env = out.environment
    assert out.outputs.shape == (n, web_models.NUM_CLASSES) and out.outputs.dtype == np.float32
    assert out.latency_ms.shape == (n,)
    assert np.all(np.isfinite(out.latency_ms)) and np.all(out.latency_ms > 0)
    assert out.load_ms > 0 and out.first_inference_ms > 0 and out.throughput_sps > 0
    assert out.memory_bytes["renderer_peak_rss_bytes"] > 20e6  # a real renderer, not a guess
    assert out.memory_bytes["js_heap_used_bytes"] > 0
    assert env["browser_version"].split(".")[0].isdigit()
    assert "Chrome/" in env["user_agent"]
    # COOP/COEP from the server make the page cross-origin isolated, which is
    # what enables wasm threads.
    assert env["cross_origin_isolated"] is True
    assert env["wasm_threads_available"] is True
    assert env["wasm_simd_available"] is True
    assert env["backend"] == backend
    assert env["threads_requested"] == threads
    if env["threads"] != threads:
        # What ran is reported, and the difference is said in the notes.
        assert 1 <= env["threads"] < threads
        assert any(f"{env['threads']} wasm thread(s) although {threads}" in n for n in out.notes)
    t = env["timings_ms"]  # a launch is timed by the row that paid it (test_onnx_on_onnxruntime_web_matches_keras)
    assert t["browser_launch"] >= 0 and t["inference"] > 0 and t["inputs_fetch"] >= 0


def _check_fp32(out, models):
    diff = np.abs(out.outputs - models.keras_outputs).max()
    assert diff < FP32_MAX_ABS_DIFF, f"max abs diff {diff:g} vs Keras"
    assert np.array_equal(out.outputs.argmax(1), models.keras_outputs.argmax(1))


@pytest.mark.parametrize("backend, threads", [("wasm", 2), ("cpu", 1), ("webgl", 1)])
def test_tfjs_graph_matches_keras(models, shared, backend, threads):
    out = _run(models.tfjs, models.inputs, shared, backend=backend, threads=threads, warmup_runs=3)
    _check_fp32(out, models)
    _check_common(out, len(models.inputs), backend, threads)
    assert out.environment["runtime"] == "tfjs" and out.environment["library"] == "@tensorflow/tfjs"
    assert out.memory_bytes["tfjs_tensor_bytes"] > 0  # the weights live in tensors
    if backend == "wasm":
        assert out.environment["wasm_threaded_build"] is True
        assert out.memory_bytes["wasm_memory_bytes"] >= 16 * 2**20
    if backend == "webgl":
        # No GPU here: the report must say the WebGL figures are SwiftShader's.
        assert "SwiftShader" in out.environment["webgl_renderer"]
        assert "SwiftShader" in out.environment["gpu"]
        assert any("SwiftShader" in n for n in out.notes)
        assert out.memory_bytes["gpu_process_peak_rss_bytes"] > 0


def test_nchw_onnx_from_torch_with_fixed_batch(models, shared, tmp_path):
    t = web_models.build_torch_onnx(tmp_path, models.inputs)
    # torch.onnx.export (dynamo) keeps the weights in a file beside the model:
    # the page must hand it to onnxruntime-web as external data.
    assert (tmp_path / "torch_model.onnx.data").is_file()
    out = _run(t.onnx, t.inputs, shared, warmup_runs=3)
    assert np.abs(out.outputs - t.torch_outputs).max() < FP32_MAX_ABS_DIFF
    assert np.array_equal(out.outputs.argmax(1), t.torch_outputs.argmax(1))
    assert out.environment["whole_set_batch_size"] == 1  # the model's batch is fixed at 1
    assert out.latency_ms.shape == (len(t.inputs),)
    # at batch 1 the timed pass is the outputs' pass: every sample ran once
    assert out.environment["outputs_from_timed_pass"] == len(t.inputs)


def test_tflite_on_tfjs_tflite_matches_keras(models, shared):
    out = _run(models.tflite, models.inputs, shared, warmup_runs=3)
    _check_fp32(out, models)
    _check_common(out, len(models.inputs), "tflite-wasm", 1)
    assert (out.environment["runtime"], out.environment["library"]) == ("tfjs-tflite", "@tensorflow/tfjs-tflite")
    assert out.environment["outputs_from_timed_pass"] == len(models.inputs)


def test_batch1_model_timing_fewer_samples_still_gives_every_output(models, shared):
    # the first 5 outputs come from the timed pass, the others from the whole-set pass: all must be right
    out = _run(models.tflite, models.inputs, shared, warmup_runs=1, latency_samples=5)
    _check_fp32(out, models)
    assert out.latency_ms.shape == (5,)
    assert out.environment["outputs_from_timed_pass"] == 5


def test_with_no_count_asked_the_timing_stops_at_its_budget_and_every_output_still_comes(models, shared):
    # a real-size model takes seconds an inference in wasm: the page times batch 1 until the budget is spent (its
    # minimum of readings kept), then runs the rest of the set for its outputs only
    reps = -(-(MIN_READINGS + 30) // len(models.inputs))
    x = np.concatenate([models.inputs] * reps)
    out = _run(models.tflite, x, shared, warmup_runs=1, latency_budget_s=1e-6)
    assert out.latency_ms.shape == (MIN_READINGS,) and len(x) > MIN_READINGS
    assert out.environment["outputs_from_timed_pass"] == MIN_READINGS
    diff = np.abs(out.outputs - np.concatenate([models.keras_outputs] * reps)).max()
    assert diff < FP32_MAX_ABS_DIFF
    assert any(f"first {MIN_READINGS} of {len(x)} samples" in n and "budget" in n for n in out.notes), out.notes
    with pytest.raises(UnknownOption, match="latency_budget_s>0"):
        WebRuntime(latency_budget_s=0)


def test_tflite_int8_io_is_quantized_and_dequantized(models, shared):
    out = _run(models.tflite_int8, models.inputs, shared, warmup_runs=3)
    _check_common(out, len(models.inputs), "tflite-wasm", 1)
    assert out.environment["input_type"] == "int8" and out.environment["output_type"] == "int8"
    # Against the same int8 model on the host's LiteRT: the same integer
    # arithmetic, so at most one quantization step apart.
    from deploytool.modelfiles.tflite_io import read_io

    scale = read_io(str(models.tflite_int8.path))[1][0].scale
    host = web_models.litert_outputs(models.tflite_int8, models.inputs)
    assert np.abs(out.outputs - host).max() <= scale + 1e-6
    # Against Keras: quantization error only. Had the int8 outputs not been
    # dequantized they would be integers in [-128, 127], far outside this.
    assert np.abs(out.outputs - models.keras_outputs).max() < 0.1
    assert (out.outputs.argmax(1) == models.keras_outputs.argmax(1)).mean() >= 0.95


def test_a_single_array_model_binds_by_its_implied_signature_and_keeps_its_checks(models, shared, tmp_path):
    """Issue 37, one data path: a model made from one array (its artifact's implied signature) runs through the
    page's one protocol, its one input and output paired with the file's whatever their names, its row laid out
    as every row is; what its signature does not say is refused: a file of two outputs fails at load, an output
    of another size than the signature's fails the run."""
    import onnx
    from onnx import TensorProto, helper

    from deploytool.artifact import implied_signature

    x = helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", *web_models.INPUT_SHAPE])
    outs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", 64]) for name in ("flat", "negated")]
    nodes = [helper.make_node("Flatten", ["pixels"], ["flat"]), helper.make_node("Neg", ["flat"], ["negated"])]
    for k, graph_outputs in ((1, outs[:1]), (2, outs)):
        graph = helper.make_graph(nodes[:k], "g", [x], graph_outputs)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / f"{k}.onnx"))
    one = dataclasses.replace(models.onnx, path=tmp_path / "1.onnx", num_outputs=64,
                              signature=implied_signature(models.onnx.input_shape, 64))
    out = _run(one, models.inputs, shared, warmup_runs=0, latency_samples=2)
    assert np.array_equal(out.outputs, models.inputs.reshape(len(models.inputs), -1))  # Flatten, by the page
    assert out.output_layout == (("output", (64,)),)  # its one output under its implied signature's name
    with pytest.raises(StageFailed) as err:
        _run(dataclasses.replace(one, path=tmp_path / "2.onnx"), models.inputs, shared, warmup_runs=0)
    assert err.value.status == "load_failed" and "no tensor for output" in err.value.reason, err.value.reason
    with pytest.raises(StageFailed) as err:
        _run(dataclasses.replace(one, num_outputs=10, signature=implied_signature(one.input_shape, 10)),
             models.inputs, shared, warmup_runs=0)
    assert err.value.status == "runtime_failed" and "64 outputs per sample" in err.value.reason, err.value.reason


def test_a_test_set_sent_in_chunks_gives_the_outputs_of_one_piece_and_times_the_first(models, shared):
    """The page gets the test set a chunk at a time (its renderer's memory then does not grow with the set):
    every sample's outputs, in order, equal one piece's; latency is timed at batch 1 in the first chunk only,
    which holds at least the samples asked to be timed."""
    per_sample, chunk_samples = models.inputs[:1].nbytes, 7  # and a last chunk of fewer
    whole = _run(models.onnx, models.inputs, shared, warmup_runs=1, latency_samples=5)
    cut = _run(models.onnx, models.inputs, shared, warmup_runs=1, latency_samples=5, chunk_bytes=chunk_samples * per_sample)
    n = len(models.inputs)
    assert cut.outputs.shape == whole.outputs.shape == (n, web_models.NUM_CLASSES)
    np.testing.assert_array_equal(cut.outputs, whole.outputs)
    assert cut.latency_ms.shape == (5,) and np.all(cut.latency_ms > 0)
    assert cut.environment["chunks"] == 1 + -(-(n - 7) // chunk_samples) and "chunks" not in whole.environment
    assert any(f"{cut.environment['chunks']} chunks of {chunk_samples} samples" in m for m in cut.notes)
    few = _run(models.onnx, models.inputs, shared, warmup_runs=1, latency_samples=12, chunk_bytes=chunk_samples * per_sample)
    np.testing.assert_array_equal(few.outputs, whole.outputs)
    assert few.latency_ms.shape == (12,)  # the first chunk grows to hold the samples asked to be timed
    assert cut.memory_bytes["renderer_peak_rss_bytes"] > 20e6 and cut.throughput_sps > 0


def test_onnx_on_onnxruntime_web_matches_keras(models, own_browser):
    out = _run(models.onnx, models.inputs, threads=2, warmup_runs=3)
    _check_fp32(out, models)
    _check_common(out, len(models.inputs), "wasm", 2)
    assert out.environment["timings_ms"]["browser_launch"] > 0  # its own browser, launched for it and timed
    assert out.environment["runtime"] == "onnxruntime-web"
    assert out.environment["whole_set_batch_size"] > 1  # tf2onnx keeps the batch free
    assert out.environment["outputs_from_timed_pass"] == 0  # batched outputs come from the batched pass
    # the load the page's timing began under, as host rows record it (the lab judges latency against it)
    assert 0 <= out.environment["cpu_busy_fraction_before_timing"] <= 1 and out.environment["cpu_count"] >= 1


def _get(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, bytes, dict]:
    # http.client sends the path as given: no client-side normalisation of "..".
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def test_server_serves_only_its_roots_on_loopback(tmp_path):
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "inputs.bin").write_bytes(b"\x01\x02\x03")
    (root / "kernel.wasm").write_bytes(b"\x00asm\x01\x00\x00\x00")
    (root / ".hidden").write_text("hidden")
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    (root / "link.txt").symlink_to(secret)
    (root / "sub" / "uplink").symlink_to(tmp_path)
    page = tmp_path / "index.html"
    page.write_text("<p>hi</p>")

    with HarnessServer({"/data/": root, "/index.html": page}) as srv:
        host, port = srv.address
        assert host == "127.0.0.1"
        listening = [c for c in psutil.net_connections(kind="tcp")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
        assert [c.laddr.ip for c in listening] == ["127.0.0.1"]
        # Another loopback address on the same port: nothing listens there.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.2", port), timeout=2).close()

        status, body, headers = _get(port, "/data/inputs.bin")
        assert (status, body) == (200, b"\x01\x02\x03")
        assert headers["content-type"] == "application/octet-stream"
        assert headers["cross-origin-opener-policy"] == "same-origin"
        assert headers["cross-origin-embedder-policy"] == "require-corp"
        status, _, headers = _get(port, "/data/kernel.wasm")
        assert status == 200 and headers["content-type"] == "application/wasm"
        assert _get(port, "/index.html")[2]["content-type"].startswith("text/html")

        refused = [
            "/data/../secret.txt",  # traversal
            "/data/%2e%2e/secret.txt",  # encoded traversal
            "/data/sub/../../secret.txt",
            "/data//" + str(secret).lstrip("/"),  # absolute path after the prefix
            "/data/link.txt",  # symlink out of the root
            "/data/sub/uplink/secret.txt",  # symlinked directory out of the root
            "/data/.hidden",
            "/data/..%2fsecret.txt",
            "/data/",  # no directory listings
        ]
        for path in refused:
            status, body, _ = _get(port, path)
            assert status == 403, (path, status)
            assert b"SECRET" not in body
        for path in (str(secret), "/secret.txt", "/", "/data/missing.bin"):
            status, body, _ = _get(port, path)
            assert status == 404, (path, status)
            assert b"SECRET" not in body

        # Chromium sends Origin on the page's POSTs; the server requires it
        # (tests/unit/test_harness_server.py has the refusals).
        conn = http.client.HTTPConnection(host, port, timeout=5)
        conn.request("POST", "/results/outputs", body=b"\x00" * 1000, headers={"Origin": srv.origin})
        assert conn.getresponse().status == 204
        conn.close()
        conn = http.client.HTTPConnection(host, port, timeout=5)
        conn.request("POST", "/results/../x", body=b"x", headers={"Origin": srv.origin})
        assert conn.getresponse().status == 403
        conn.close()
        assert srv.take_result("outputs") == b"\x00" * 1000
        assert srv.requests_refused == len(refused) + 1


def test_corrupt_model_becomes_stage_failed_and_browser_is_gone(models, own_browser, tmp_path):
    broken = tmp_path / "tfjs"
    shutil.copytree(models.tfjs.path, broken)
    (broken / "model.json").write_text('{"format": "graph-model", "modelTopology": ')
    rt = WebRuntime(timeout_s=60)
    with pytest.raises(StageFailed) as err:
        rt.load(dataclasses.replace(models.tfjs, path=broken))
    assert err.value.status == "load_failed"
    assert err.value.reason.startswith("browser:")
    assert "JSON" in err.value.reason  # the browser's own parse error
    assert "\n" not in err.value.reason
    _assert_all_gone(rt.last_process_ids)
    rt.close()  # closing again is harmless


def test_run_past_timeout_becomes_stage_failed_and_browser_is_gone(models, own_browser):
    rt = WebRuntime(backend="cpu", warmup_runs=0, timeout_s=60)
    rt.load(models.tfjs)
    pids = rt.browser_process_ids
    assert any(psutil.pid_exists(p) for p in pids)
    rt.options = dataclasses.replace(rt.options, timeout_s=0.2)  # 20,000 samples on the cpu backend take seconds
    x = np.repeat(models.inputs, 20_000 // len(models.inputs), axis=0)
    with pytest.raises(StageFailed) as err:
        rt.run(Feed.one("input", x))
    assert err.value.status == "timeout"
    assert "timeout_s=0.2" in err.value.reason
    _assert_all_gone(rt.last_process_ids)
    assert rt.last_process_ids >= pids
    with pytest.raises(StageFailed):
        rt.run(models.inputs)  # the browser is gone: a clean failure, not a hang
    rt.close()


def test_the_timeout_holds_for_the_whole_set_however_many_chunks_it_takes(models, own_browser):
    # 400 chunks of one sample: each a page job of tens of ms (fetch, run, post, polling), so each alone is far
    # within 2 s and all of them together far beyond
    per_sample = models.inputs[:1].nbytes
    rt = WebRuntime(warmup_runs=0, latency_samples=1, timeout_s=2.0, chunk_bytes=per_sample)
    try:
        rt.load(models.tflite)
        x = np.repeat(models.inputs[:1], 400, axis=0)
        t = time.monotonic()
        with pytest.raises(StageFailed) as err:
            rt.run(Feed.one("input", x))
        assert time.monotonic() - t < 30
        assert err.value.status == "timeout" and "chunks together" in err.value.reason
    finally:
        rt.close()


def test_a_run_that_cannot_finish_in_time_stops_when_its_pace_shows_it_and_keeps_the_browser(models, own_browser):
    """Issue 38: a row whose pace shows it cannot finish by its limit stops then, with its pace in the reason,
    instead of running on to the limit (a real-size int8 row in tfjs-tflite took its whole 900 s). The page's own
    check, within a chunk: about 8 s of batch-1 inferences on the cpu backend, 4 s allowed. The page is healthy, so
    the session's browser serves the next row."""
    x = np.repeat(models.inputs, 40_000 // len(models.inputs), axis=0)
    with WebSession() as session:
        rt = WebRuntime(session=session, backend="cpu", warmup_runs=0, latency_samples=1, batch_size=1, timeout_s=4.0)
        rt.load(models.tfjs)
        browser = session.browser()
        with pytest.raises(StageFailed) as err:
            rt.run(Feed.one("input", x))
        assert err.value.status == "timeout", err.value.reason
        assert "stopped the run early" in err.value.reason and "inferences left" in err.value.reason, err.value.reason
        assert "ms a sample" in err.value.reason and "timeout_s=4" in err.value.reason
        rt.close()
        again = WebRuntime(session=session, backend="cpu", warmup_runs=0, latency_samples=2, timeout_s=60)
        again.load(models.tfjs)
        out = again.run(models.inputs)
        again.close()
        assert session.browser() is browser and session.launches == 1
        assert out.outputs.shape == (len(models.inputs), web_models.NUM_CLASSES)


def test_between_chunks_a_run_stops_when_the_chunks_pace_shows_the_rest_cannot_finish(models, own_browser):
    """Issue 38, the same between chunks: 40 chunks of 100 samples at batch 1 on webgl (SwiftShader: milliseconds a
    sample, so a chunk takes well under the page's one-second window), 4 s allowed for about 10 s of work: the
    first chunk's pace stops the run."""
    x = np.repeat(models.inputs, 4_000 // len(models.inputs), axis=0)
    rt = WebRuntime(backend="webgl", warmup_runs=0, latency_samples=1, batch_size=1, timeout_s=4.0,
                    chunk_bytes=100 * models.inputs[:1].nbytes)
    try:
        rt.load(models.tfjs)
        t = time.monotonic()
        with pytest.raises(StageFailed) as err:
            rt.run(Feed.one("input", x))
        assert time.monotonic() - t < 4.0  # before the limit, not at it
        assert err.value.status == "timeout" and "samples left" in err.value.reason, err.value.reason
    finally:
        rt.close()


def test_crashed_renderer_becomes_stage_failed(models, own_browser):
    rt = WebRuntime(timeout_s=60)
    rt.load(models.onnx)
    # A real crash: the renderer processes of our own browser die by SIGKILL.
    from tests.integration.browser_launches import kill_renderers

    assert kill_renderers(rt.browser_process_ids)
    with pytest.raises(StageFailed) as err:
        rt.run(models.inputs)
    assert err.value.status == "runtime_failed"
    assert "crash" in err.value.reason.lower()
    _assert_all_gone(rt.last_process_ids)
    rt.close()


def test_missing_pieces_are_typed_errors(models, tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOYTOOL_CHROMIUM", str(tmp_path / "no-chromium"))
    with pytest.raises(HarnessMissing, match="make setup"):
        WebRuntime().load(models.onnx)
    monkeypatch.delenv("DEPLOYTOOL_CHROMIUM")
    page_only = tmp_path / "web_harness"
    page_only.mkdir()
    for f in ("index.html", "harness.js"):
        (page_only / f).write_text("")
    monkeypatch.setenv("DEPLOYTOOL_WEB_HARNESS", str(page_only))
    with pytest.raises(HarnessMissing, match=r"make setup.*npm ci"):
        WebRuntime().load(models.onnx)
    with pytest.raises(UnknownOption):
        WebRuntime(backend="vulkan")
    with pytest.raises(UnknownOption):
        WebRuntime(num_workers=3)


def test_backend_option_applies_to_tfjs_only(models):
    with pytest.raises(StageFailed) as err:
        WebRuntime(backend="webgl").load(models.onnx)
    assert err.value.status == "unsupported"
    assert "wasm" in err.value.reason
