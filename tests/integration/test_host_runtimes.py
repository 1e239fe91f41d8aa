"""The two converted-model host runtimes, LiteRT and onnxruntime, on real
artifacts converted from tiny trained models: outputs against the source
model and against the raw interpreter, batch handling (free and fixed batch,
remainder chunks), int8 I/O (de)quantization, measurement fields, options,
and failures (corrupt file, an artifact whose layout disagrees with the model).
"""

from __future__ import annotations

from dataclasses import replace
from importlib import metadata

import numpy as np
import pytest

from deploytool import convert as C
from deploytool.artifact import implied_signature
from deploytool.errors import StageFailed
from deploytool.runtimes import runtime_class
from deploytool.runtimes.keras import KerasRuntime
from deploytool.runtimes.litert import LiteRTRuntime
from deploytool.runtimes.measure import readings_for
from deploytool.runtimes.onnxrt import OnnxRuntime
from tests.integration.tiny_models import agreement, build_keras, build_torch, max_abs_diff

pytestmark = pytest.mark.slow
OWN_WORKERS = True  # it opens and closes workers of its own and looks inside them (conftest.py)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("sources")
    return {"keras": build_keras(d), "torch": build_torch(d)}


@pytest.fixture(scope="module")
def artifacts(sources, tmp_path_factory):
    root = tmp_path_factory.mktemp("artifacts")
    wanted = [("keras", "tflite", "none"), ("keras", "tflite", "int8-io"), ("torch", "tflite", "none"),
              ("torch", "onnx", "none"), ("torch", "onnx", "int8"), ("keras", "onnx", "none")]
    return {(k, f, q): C.convert(sources[k].artifact, f, q, root / k / f / q, sources[k].x_train)
            for k, f, q in wanted}


def run(runtime, art, x):
    with runtime:
        runtime.load(art)
        return runtime.run(x)


def raw_litert(path, x: np.ndarray) -> np.ndarray:
    """The interpreter driven by hand, one sample at a time, float I/O only: an independent reference."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    rows = []
    for s in x:
        it.set_tensor(i, s[None])
        it.invoke()
        rows.append(it.get_tensor(o)[0].copy())
    return np.stack(rows)


def test_registry_finds_the_host_runtimes():
    assert runtime_class("host", "tflite") is LiteRTRuntime
    assert runtime_class("host", "onnx") is OnnxRuntime


def test_litert_fp32_outputs_and_measurements(sources, artifacts):
    src, art = sources["keras"], artifacts[("keras", "tflite", "none")]
    out = run(LiteRTRuntime(), art, src.x_test)
    n = len(src.x_test)
    assert out.outputs.shape == (n, 10) and out.outputs.dtype == np.float32
    assert max_abs_diff(out.outputs, raw_litert(art.path, src.x_test)) < 1e-5
    assert max_abs_diff(out.outputs, src.reference) < 1e-4 and agreement(out.outputs, src.reference) == 1.0
    k = out.inferences_per_reading  # a tiny model's inference is under 50 µs: K per timer reading
    assert out.latency_ms.shape == (readings_for(n, k),) and (out.latency_ms > 0).all()
    assert out.first_inference_ms > 0 and out.throughput_sps > 0 and out.load_ms > 0
    assert out.latency.p50_ms <= out.latency.p90_ms
    assert out.memory_bytes.get("process_peak_rss_delta_bytes", -1) >= 0
    env = out.environment
    assert env["runtime"] == "litert" and env["version"] == metadata.version("ai-edge-litert")
    assert env["num_threads"] == env["threads"] == 1 and env["batch_resizable"] is True
    assert env["input_dtype"] == env["output_dtype"] == "float32"
    assert env["latency_inferences_per_reading"] == k and 0 <= env["cpu_busy_fraction_before_timing"] <= 1
    # the row says how latency was timed (and whether the machine was busy), nothing else
    assert (k > 1) == any(f"timed {k} batch-1 inferences" in s for s in out.notes)
    assert all(s.startswith(("latency: ", "the machine was busy")) for s in out.notes), out.notes


def test_litert_batch_size_and_options_do_not_change_outputs(sources, artifacts):
    src, art = sources["keras"], artifacts[("keras", "tflite", "none")]
    whole = run(LiteRTRuntime(), art, src.x_test).outputs
    # 7 does not divide the set: the last chunk makes the interpreter resize again.
    odd = run(LiteRTRuntime(batch_size=7, num_threads=2, warmup_runs=0, latency_samples=25), art, src.x_test)
    assert max_abs_diff(odd.outputs, whole) < 1e-5
    assert odd.latency_ms.shape == (25,)
    assert odd.environment["num_threads"] == 2 and odd.environment["throughput_batch"] == 7


def test_litert_fixed_batch_nchw_model(sources, artifacts):
    src, art = sources["torch"], artifacts[("torch", "tflite", "none")]
    assert art.layout == "NCHW"
    out = run(LiteRTRuntime(), art, src.x_test)
    assert out.environment["batch_resizable"] is False and out.environment["throughput_batch"] == 1
    assert any("fixed batch of 1" in n for n in out.notes)
    assert max_abs_diff(out.outputs, src.reference) < 1e-4 and agreement(out.outputs, src.reference) == 1.0


def test_litert_int8_io_is_quantized_by_the_runtime(sources, artifacts):
    from ai_edge_litert.interpreter import Interpreter

    src, art = sources["keras"], artifacts[("keras", "tflite", "int8-io")]
    out = run(LiteRTRuntime(), art, src.x_test)
    env = out.environment
    assert env["input_dtype"] == "int8" and env["output_dtype"] == "int8"
    assert env["input_quantization"]["scale"] > 0 and env["output_quantization"]["scale"] > 0
    assert out.outputs.dtype == np.float32
    assert agreement(out.outputs, src.reference) >= 0.90
    assert np.abs(out.outputs - src.reference).mean() < 0.05 * src.reference.std()

    # The classic user bug (tensorflow#53278): cast floats to int8 and read raw int8 outputs.
    # On this model it must be visibly wrong, or the test above would prove nothing.
    it = Interpreter(model_path=str(art.path))
    it.resize_tensor_input(it.get_input_details()[0]["index"], [len(src.x_test), 8, 8, 1])
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], src.x_test.astype(np.int8))
    it.invoke()
    naive = it.get_tensor(it.get_output_details()[0]["index"]).astype(np.float32)
    assert agreement(naive, src.reference) < 0.5


@pytest.mark.parametrize("kind,quantize", [("torch", "none"), ("keras", "none"), ("torch", "int8")])
def test_onnxruntime_outputs_and_measurements(kind, quantize, sources, artifacts):
    src, art = sources[kind], artifacts[(kind, "onnx", quantize)]
    out = run(OnnxRuntime(intra_op_num_threads=1, latency_samples=50), art, src.x_test)
    assert out.outputs.shape == (len(src.x_test), 10) and out.outputs.dtype == np.float32
    if quantize == "none":
        assert max_abs_diff(out.outputs, src.reference) < 1e-4 and agreement(out.outputs, src.reference) == 1.0
    else:
        assert agreement(out.outputs, src.reference) >= 0.90 and max_abs_diff(out.outputs, src.reference) > 0
    assert out.latency_ms.shape == (50,) and out.first_inference_ms > 0 and out.throughput_sps > 0
    env = out.environment
    assert env["runtime"] == "onnxruntime" and env["version"] == metadata.version("onnxruntime")
    assert env["providers"] == ["CPUExecutionProvider"] and env["intra_op_num_threads"] == 1
    assert env["batch_resizable"] is True and env["input_dtype"] == "float32"


def test_onnxruntime_batch_size_does_not_change_outputs(sources, artifacts):
    src, art = sources["torch"], artifacts[("torch", "onnx", "none")]
    a = run(OnnxRuntime(), art, src.x_test).outputs
    b = run(OnnxRuntime(batch_size=13, intra_op_num_threads=2), art, src.x_test)
    assert max_abs_diff(a, b.outputs) < 1e-5 and b.environment["intra_op_num_threads"] == 2


@pytest.mark.parametrize("runtime,fmt,suffix", [(LiteRTRuntime, "tflite", ".tflite"),
                                                (OnnxRuntime, "onnx", ".onnx")])
def test_corrupt_model_is_a_final_load_failure(runtime, fmt, suffix, artifacts, tmp_path):
    bad = tmp_path / f"broken{suffix}"
    bad.write_bytes(b"\x00not a model\xff" * 100)
    art = replace(artifacts[("torch", fmt, "none")], path=bad)
    with pytest.raises(StageFailed) as e:
        runtime().load(art)
    assert e.value.status == "load_failed"
    assert e.value.reason.split(" ")[0] in ("litert", "onnxruntime")


@pytest.mark.parametrize("runtime,fmt", [(LiteRTRuntime, "tflite"), (OnnxRuntime, "onnx")])
def test_layout_comes_from_the_artifact_and_is_checked(runtime, fmt, artifacts):
    # A Keras-born (NHWC) model described as NCHW (its signature says one sample is (1, 8, 8)): the runtime must
    # refuse, not guess.
    art = artifacts[("keras", fmt, "none")]
    wrong = replace(art, layout="NCHW", input_shape=(1, 8, 8), signature=implied_signature((1, 8, 8), 10))
    with pytest.raises(StageFailed) as e:
        runtime().load(wrong)
    assert e.value.status == "load_failed" and "the artifact says one sample is [1, 8, 8]" in e.value.reason


@pytest.mark.parametrize("key", [("torch", "onnx", "none"), ("keras", "tflite", "int8-io")])
def test_a_test_set_past_the_stream_size_reaches_the_worker_as_a_file_and_gives_the_same_outputs(
        key, sources, artifacts, monkeypatch):
    """deploytool.data.ondisk: a set larger than STREAM_BYTES goes to the measuring worker as a file it reads a batch
    at a time (lowered here so the tiny set crosses it); its outputs are those of the set handed over whole, the
    row says so, and the file is gone when the workers close."""
    from deploytool.data import ondisk
    from deploytool.runtimes import isolated

    src, art = sources[key[0]], artifacts[key]
    cls = LiteRTRuntime if key[1] == "tflite" else OnnxRuntime
    options = {"latency_samples": 20, "warmup_runs": 1, "batch_size": 7}
    with isolated.runtime_workers() as workers:
        whole = workers.measure(cls, options, art, src.x_test)
        monkeypatch.setattr(isolated, "STREAM_BYTES", 1024)
        sent = workers.sendable(src.x_test).first  # an array handed in: the one input of a single-array model
        assert isinstance(sent, ondisk.OnDisk) and workers.sendable(src.x_test).first is sent  # written once per array
        streamed = workers.measure(cls, options, art, src.x_test)
        scratch = sent.path.parent
    assert np.array_equal(streamed.outputs, whole.outputs) and streamed.latency_ms.shape == (20,)
    assert any("read from a file a batch at a time" in n for n in streamed.notes)
    assert not any("read from a file" in n for n in whole.notes)
    assert not scratch.exists()


@pytest.mark.parametrize("runtime,fmt", [(LiteRTRuntime, "tflite"), (OnnxRuntime, "onnx"), (KerasRuntime, "keras")])
def test_a_single_array_model_binds_through_its_implied_signature_on_the_one_load_path(runtime, fmt, sources,
                                                                                      artifacts):
    """A model made here from one array (a zoo twin) carries the signature its artifact's fields imply
    (implied_signature: one float32 input, one output, paired with the file's by position whatever the file names
    them) and is bound by it on the load path every model takes; its row is laid out as every row is; a
    signature whose input shape is not the file's is refused before anything runs, and data of another shape
    than the signature's before anything is fed."""
    src = sources["keras" if fmt == "keras" else "torch"]
    art = src.artifact if fmt == "keras" else artifacts[("torch", fmt, "none")]
    implied = art.signature
    assert implied == implied_signature(art.input_shape, 10) and "signature" not in art.to_json()
    assert implied.input_names == ("input",) and implied.output_names == ("output",)
    assert implied.inputs[0].shape == (None, *art.input_shape) and implied.outputs[0].shape == (None, 10)
    out = run(runtime(), art, src.x_test)
    assert out.output_layout == (("output", (10,)),) and out.outputs.shape == (len(src.x_test), 10)
    with runtime() as rt:
        rt.load(art)
        with pytest.raises(ValueError, match="the model expects"):
            rt.run(src.x_test[:, :-1])
    if fmt == "keras":  # a traced function takes the signature's shape: a wrong one fails at the first call
        return
    shape = (art.input_shape[0] + 1, *art.input_shape[1:])
    wrong = replace(art, input_shape=shape, signature=implied_signature(shape, 10))
    with pytest.raises(StageFailed) as e, runtime() as rt:
        rt.load(wrong)
    assert e.value.status == "load_failed" and "but the artifact says one sample is" in e.value.reason


