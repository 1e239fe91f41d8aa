"""Every (source x format x quantization) that `quantize_modes` lists, converted
for real from tiny trained Keras and PyTorch models and run in the real host
runtime (LiteRT, onnxruntime), against the source model's own outputs. TF.js
artifacts are checked on disk (the browser runtime is tested elsewhere).
Also: a user's own SavedModel / ONNX / TFLite, impossible combinations,
missing calibration and corrupt files.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from deploytool.data.feed import Feed
from deploytool import convert as C
from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.errors import StageFailed
from deploytool.modelfiles.tflite_io import read_io
from deploytool.runtimes.litert import LiteRTRuntime
from deploytool.runtimes.onnxrt import OnnxRuntime
from tests.integration.tiny_models import agreement, export_keras_saved_model, max_abs_diff

pytestmark = pytest.mark.slow

CASES = [(kind, fmt, q) for kind in ("keras", "torch") for fmt in C.FORMATS for q in C.quantize_modes(kind, fmt)]
RUNTIME = {"tflite": LiteRTRuntime, "onnx": OnnxRuntime}
# (max abs diff, minimum top-1 agreement) per quantization word; None = not bounded.
TOLERANCE = {"none": (1e-4, 1.0), "fp16": (1e-2, 0.99), "dynamic": (None, 0.90), "int8": (None, 0.90),
             "int8-io": (None, 0.90)}
TFJS_WEIGHT_DTYPE = {"none": None, "fp16": "float16", "uint8": "uint8", "uint16": "uint16"}


@pytest.fixture(scope="module")
def sources():
    """The tiny Keras and PyTorch models of the contract tier's cache (~/.cache/deploytool/tests/test-models/): trained once for both
    tiers, with the source model's own outputs on the test split as the reference."""
    from deploytool.runtimes import make_runtime
    from tests.contract.model_cache import N_TRAIN, ModelCache, digits_in
    from tests.integration.tiny_models import Source, digits

    cache = ModelCache()
    _, y = digits()
    out = {}
    for kind in ("keras", "torch"):
        art = cache.source(kind)
        x = digits_in(art.layout)
        with make_runtime("pc", art.format, warmup_runs=0, latency_samples=1) as rt:
            rt.load(art)
            reference = rt.run(Feed.one("input", x[N_TRAIN:])).outputs
        out[kind] = Source(art, x[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:], reference)
    yield out
    cache.close()


@pytest.fixture(scope="module")
def converted(sources):
    """(kind, fmt, quantize) -> (Artifact, conversion seconds): the contract tier's cached conversion (the same
    route on the same tiny model is converted once for both tiers; 0 s when it was already there)."""
    from tests.contract.model_cache import ModelCache

    cache = ModelCache()
    memo: dict = {}

    def get(kind: str, fmt: str, quantize: str):
        key = (kind, fmt, quantize)
        if key not in memo:
            t0 = time.perf_counter()
            art = cache.converted(kind, fmt, quantize)
            memo[key] = (art, time.perf_counter() - t0)
        return memo[key]

    yield get
    cache.close()


def run_host(art: Artifact, x: np.ndarray, **options) -> np.ndarray:
    with RUNTIME[art.format](**options) as rt:
        rt.load(art)
        return rt.run(Feed.one("input", x)).outputs


def check_metadata(art: Artifact, src: Artifact, fmt: str, quantize: str, out_dir: Path) -> None:
    assert art.format == C.artifact_format(fmt)
    assert art.quantize == quantize
    assert (art.layout, art.input_shape, art.num_outputs) == (src.layout, src.input_shape, src.num_outputs)
    assert art.converter and art.converter_version
    assert art.sha256 == content_hash(art.path) and art.size_bytes == size_on_disk(art.path) > 0
    assert art.source_sha256 == src.sha256
    assert art.options["mode"] == C.plan(src.format, fmt, quantize).mode
    assert Path(art.path).parent == out_dir
    # the cached entry was moved after conversion: its artifact.json names the folder it was made in
    assert replace(Artifact.load(out_dir / "artifact.json"), path=art.path) == art


def check_tfjs(art: Artifact, quantize: str) -> None:
    model_json = json.loads((Path(art.path) / "model.json").read_text())
    assert model_json["format"] == "graph-model"
    weights = [w for group in model_json["weightsManifest"] for w in group["weights"]]
    for group in model_json["weightsManifest"]:
        for shard in group["paths"]:
            assert (Path(art.path) / shard).stat().st_size > 0
    float_weights = [w for w in weights if w["dtype"] == "float32"]
    assert float_weights
    want = TFJS_WEIGHT_DTYPE[quantize]
    got = {w.get("quantization", {}).get("dtype") for w in float_weights}
    assert got == {want}, f"{quantize}: weights quantized as {got}"


@pytest.mark.parametrize("kind,fmt,quantize", CASES, ids=["-".join(c) for c in CASES])
def test_conversion_runs_and_matches_source(kind, fmt, quantize, sources, converted):
    src = sources[kind]
    art, seconds = converted(kind, fmt, quantize)
    check_metadata(art, src.artifact, fmt, quantize, Path(art.path).parent)
    if fmt == "tfjs":
        check_tfjs(art, quantize)
        print(f"\n{kind} {fmt} {quantize}: converted in {seconds:.2f}s, {art.size_bytes} bytes")
        return
    out = run_host(art, src.x_test)
    assert out.shape == src.reference.shape and out.dtype == np.float32
    diff, agree = max_abs_diff(out, src.reference), agreement(out, src.reference)
    print(f"\n{kind} {fmt} {quantize}: converted in {seconds:.2f}s, {art.size_bytes} bytes, "
          f"max abs diff {diff:.2e}, top-1 agreement {agree:.4f}")
    max_diff, min_agree = TOLERANCE[quantize]
    if max_diff is not None:
        assert diff < max_diff
    assert agree >= min_agree
    if quantize != "none":
        assert diff > 0, "a quantized model that is bit-identical to fp32 was not quantized"


def test_quantized_tflite_files_shrink(converted):
    sizes = {q: converted("keras", "tflite", q)[0].size_bytes for q in ("none", "fp16", "int8")}
    assert sizes["int8"] < sizes["fp16"] < sizes["none"]


def test_int8_io_has_int8_tensors_and_the_runtime_returns_float(sources, converted):
    src = sources["keras"]
    io_art, _ = converted("keras", "tflite", "int8-io")
    float_io_art, _ = converted("keras", "tflite", "int8")
    (inp,), (outp,) = read_io(io_art.path)
    assert inp.dtype == "int8" and inp.quantized and outp.dtype == "int8" and outp.quantized
    (finp,), _ = read_io(float_io_art.path)
    assert finp.dtype == "float32"
    out = run_host(io_art, src.x_test)
    assert out.dtype == np.float32
    # Same integer graph inside: the runtime's (de)quantization must give the float-I/O model's
    # outputs to within one output quantization step.
    assert max_abs_diff(out, run_host(float_io_art, src.x_test)) <= outp.scale * 1.01
    assert np.abs(out - src.reference).mean() < 0.05 * src.reference.std()


def test_torch_int8_tflite_says_it_has_int8_io(converted):
    art, _ = converted("torch", "tflite", "int8")
    (inp,), (outp,) = read_io(art.path)
    assert inp.dtype == "int8" and outp.dtype == "int8"
    assert any("int8 input and output" in n for n in art.notes)
    assert art.layout == "NCHW" and inp.shape[1:] == (1, 8, 8)


def test_tfjs_int8_word_is_uint8_weights_and_says_so(sources, tmp_path):
    art = C.convert(sources["keras"].artifact, "tfjs", "int8", tmp_path / "out", sources["keras"].x_train)
    assert art.quantize == "int8"
    check_tfjs(art, "uint8")
    assert any("uint8 weight quantization was done instead of full int8" in n for n in art.notes)
    assert Artifact.load(tmp_path / "out" / "artifact.json").notes == art.notes


def test_user_saved_model_converts_like_keras(sources, tmp_path):
    src = sources["keras"]
    saved = export_keras_saved_model(src, tmp_path)
    for fmt in ("tflite", "onnx"):
        art = C.convert(saved, fmt, "none", tmp_path / fmt, src.x_train)
        check_metadata(art, saved, fmt, "none", tmp_path / fmt)
        out = run_host(art, src.x_test)
        assert max_abs_diff(out, src.reference) < 1e-4


def test_user_onnx_and_tflite_models(sources, converted, tmp_path):
    src = sources["torch"]
    onnx_fp32, _ = converted("torch", "onnx", "none")
    user_onnx = replace(onnx_fp32, format="onnx", quantize="none")
    assert C.quantize_modes("onnx", "onnx") == ("none", "dynamic", "int8")
    copied = C.convert(user_onnx, "onnx", "none", tmp_path / "as_is")
    assert copied.sha256 == user_onnx.sha256 and copied.converter == "copy"
    quantized = C.convert(user_onnx, "onnx", "int8", tmp_path / "int8", src.x_train)
    assert quantized.converter == "onnxruntime.quantization"
    assert agreement(run_host(quantized, src.x_test), src.reference) >= 0.90
    user_tflite, _ = converted("torch", "tflite", "none")
    assert C.quantize_modes("tflite", "tflite") == ("none",)
    same = C.convert(user_tflite, "tflite", "none", tmp_path / "tflite")
    assert same.sha256 == user_tflite.sha256
    assert max_abs_diff(run_host(same, src.x_test), src.reference) < 1e-4


@pytest.fixture
def onnx2tf_runs(monkeypatch):
    """The calibration-set sizes (None: uncalibrated) of the onnx2tf runs this test starts, counted around the
    real `_onnx2tf.run`; the process's kept runs are forgotten first."""
    from deploytool.convert import _onnx2tf

    real, runs = _onnx2tf.run, []

    def counted(source, out_dir, calibration=None, **kwargs):
        runs.append(None if calibration is None else len(calibration))
        return real(source, out_dir, calibration, **kwargs)

    _onnx2tf.forget_runs()
    monkeypatch.setattr(_onnx2tf, "run", counted)
    yield runs
    _onnx2tf.forget_runs()


@pytest.mark.parametrize("kind", ["torch", "keras"])
def test_user_onnx_reaches_tflite_and_tfjs_through_onnx2tf(kind, sources, converted, onnx2tf_runs, tmp_path):
    """A user's .onnx (NCHW from PyTorch, NHWC from Keras) becomes TFLite and TF.js with onnx2tf; the
    input keeps the ONNX model's layout and the fp32 TFLite model gives the source's outputs. The five TFLite
    modes cost one (calibrated) onnx2tf run; its float files do not claim the calibration, and give the
    outputs of an uncalibrated run's files bit for bit."""
    from deploytool.convert import _onnx2tf

    src = sources[kind]
    onnx_fp32, _ = converted(kind, "onnx", "none")
    user_onnx = replace(onnx_fp32, format="onnx", quantize="none")
    arts = {}
    for quantize, max_diff in (("none", 1e-4), ("int8", None), ("fp16", 0), ("dynamic", 0), ("int8-io", 0)):
        t0 = time.perf_counter()
        art = arts[quantize] = C.convert(user_onnx, "tflite", quantize, tmp_path / quantize, src.x_train)
        seconds = time.perf_counter() - t0
        check_metadata(art, user_onnx, "tflite", quantize, tmp_path / quantize)
        assert art.converter == "onnx2tf" and art.layout == src.artifact.layout
        assert ("calibration_samples" in art.options) == (quantize in ("int8", "int8-io"))
        if max_diff == 0:  # TOLERANCE's checks of these modes are test_conversion_matches_source's
            continue
        (inp,), _ = read_io(str(art.path))
        assert inp.shape[1:] == tuple(src.artifact.input_shape)
        out = run_host(art, src.x_test)
        diff, agree = max_abs_diff(out, src.reference), agreement(out, src.reference)
        print(f"\nuser {kind} onnx -> tflite {quantize}: {seconds:.1f}s, max abs diff {diff:.2e}, agreement {agree:.4f}")
        assert agree >= (1.0 if max_diff else 0.90)
        assert diff < max_diff if max_diff else diff > 0
    assert onnx2tf_runs == [256] and arts["int8"].options["calibration_samples"] == 256  # of 1000 samples
    assert len({a.sha256 for a in arts.values()}) == 5
    if kind == "torch":
        plain = tmp_path / "uncalibrated"
        _onnx2tf.run(user_onnx, plain, dynamic=True)
        for q in ("none", "fp16", "dynamic"):
            alone = replace(arts[q], path=_onnx2tf.tflite_path(user_onnx, plain, q))
            assert np.array_equal(run_host(arts[q], src.x_test), run_host(alone, src.x_test)), q
    web = C.convert(user_onnx, "tfjs", "fp16", tmp_path / "tfjs", src.x_train)
    check_metadata(web, user_onnx, "tfjs", "fp16", tmp_path / "tfjs")
    check_tfjs(web, "fp16")
    assert web.converter == "onnx2tf + tensorflowjs_converter"


def _castlike_onnx(tmp_path):
    """An ONNX model of one CastLike op, which onnx2tf cannot convert: (its artifact, its graph)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("CastLike", ["x", "x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8, 8, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 8, 8, 1])])
    path = tmp_path / "castlike.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return Artifact(path=path, format="onnx", framework="onnx", layout="NHWC", input_shape=(8, 8, 1),
                    num_outputs=10, sha256=content_hash(path)), graph


def test_a_failed_onnx2tf_run_fails_every_mode_it_serves_and_float_modes_try_without_calibration(onnx2tf_runs,
                                                                                                 tmp_path):
    import onnx
    from onnx import helper

    src, graph = _castlike_onnx(tmp_path)
    other = tmp_path / "other.onnx"  # the same graph, other bytes: another source
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], doc_string="x"), str(other))
    calibration = np.zeros((4, 8, 8, 1), np.float32)
    reasons = []
    for i, (q, calib, source) in enumerate([("int8", calibration, src), ("int8-io", calibration, src),
                                            ("none", calibration, src), ("fp16", calibration, src),
                                            ("int8", calibration[:3], src), ("int8", calibration[:3] + 1, src),
                                            ("int8", calibration, replace(src, path=other))]):
        with pytest.raises(StageFailed) as e:
            C.convert(source, "tflite", q, tmp_path / str(i), Feed.one("input", calib))
        reasons.append(e.value.reason)
    # one calibrated run for both int8 modes, one uncalibrated run for both float modes, then one run for
    # each other calibration set (size or values) and for the other source
    assert onnx2tf_runs == [4, None, 3, 3, 4]
    assert len(set(reasons)) == 1 and "CastLike" in reasons[0]


def test_onnx2tf_and_litert_torch_tflite_side_by_side(sources, converted):
    """One PyTorch model, two TFLite converters: both give the source's outputs at --quantize none."""
    src = sources["torch"]
    mine, _ = converted("torch", "tflite-onnx2tf", "none")
    theirs, _ = converted("torch", "tflite", "none")
    assert mine.converter == "torch.onnx + onnx2tf" and theirs.converter == "litert-torch"
    assert mine.options["exported_with"]["converter"] == "torch.onnx"
    assert max_abs_diff(run_host(mine, src.x_test), run_host(theirs, src.x_test)) < 1e-4


def test_an_onnx_op_onnx2tf_lacks_is_a_one_line_conversion_failure_naming_it(tmp_path):
    src, _ = _castlike_onnx(tmp_path)
    with pytest.raises(StageFailed) as e:
        C.convert(src, "tflite", "none", tmp_path / "out")
    assert e.value.status == "conversion_failed" and "\n" not in e.value.reason
    assert e.value.reason.startswith("onnx2tf ") and "no conversion for the ONNX op CastLike" in e.value.reason


@pytest.mark.parametrize("kind,fmt,quantize", [("keras", "tfjs", "int8-io"), ("torch", "tfjs", "none"),
                                               ("keras", "onnx", "fp16"), ("torch", "tflite", "uint8")])
def test_impossible_combination_is_unsupported(kind, fmt, quantize, sources, tmp_path):
    with pytest.raises(StageFailed) as e:
        C.convert(sources[kind].artifact, fmt, quantize, tmp_path / "out", sources[kind].x_train)
    assert e.value.status == "unsupported"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind,fmt,quantize,converter", [("keras", "tflite", "int8", "tf.lite.TFLiteConverter"),
                                                         ("torch", "onnx", "int8", "onnxruntime.quantization"),
                                                         ("torch", "tflite", "int8", "litert-torch"),
                                                         ("torch", "tflite-onnx2tf", "int8", "onnx2tf")])
def test_int8_without_calibration_fails_as_a_result(kind, fmt, quantize, converter, sources, tmp_path):
    with pytest.raises(StageFailed) as e:
        C.convert(sources[kind].artifact, fmt, quantize, tmp_path / "out", calibration=None)
    assert e.value.status == "conversion_failed"
    assert "calibration" in e.value.reason


@pytest.mark.parametrize("fmt,suffix,fmt_word,converter,dist", [
    ("keras", ".keras", "tflite", "tf.lite.TFLiteConverter", "tensorflow"),
    ("keras", ".keras", "tfjs", "tensorflowjs_converter", "tensorflowjs"),
    ("keras", ".keras", "onnx", "tf2onnx", "tf2onnx"),
    ("torch", ".pt2", "onnx", "torch.onnx", "torch"),
    ("torch", ".pt2", "tflite", "litert-torch", "litert-torch"),
    ("onnx", ".onnx", "onnx", "onnxruntime.quantization", "onnxruntime"),
    ("onnx", ".onnx", "tflite", "onnx2tf", "onnx2tf"),
])
def test_corrupt_source_is_a_conversion_failure(fmt, suffix, fmt_word, converter, dist, tmp_path):
    from importlib import metadata

    bad = tmp_path / f"broken{suffix}"
    bad.write_bytes(b"\x00this is not a model\xff" * 64)
    layout, shape = ("NCHW", (1, 8, 8)) if fmt == "torch" else ("NHWC", (8, 8, 1))
    src = Artifact(path=bad, format=fmt, framework="torch" if fmt == "torch" else "keras", layout=layout,
                   input_shape=shape, num_outputs=10, sha256=content_hash(bad))
    quantize = "int8" if fmt == "onnx" else "none"
    calibration = np.zeros((4, *shape), np.float32)
    with pytest.raises(StageFailed) as e:
        C.convert(src, fmt_word, quantize, tmp_path / "out", Feed.one("input", calibration))
    assert e.value.status == "conversion_failed"
    assert e.value.reason.startswith(f"{converter} {metadata.version(dist)}: ")
    assert "\n" not in e.value.reason


def test_a_worker_exports_one_pytorch_source_to_onnx_once(sources, monkeypatch, tmp_path):
    """The ONNX modes (and onnx2tf's, which start from the same fp32 ONNX) share one torch.onnx export per
    source in a worker: the later ones get the same bytes without exporting again."""
    from deploytool.convert import onnx_torch

    real, exports = onnx_torch._export, []
    monkeypatch.setattr(onnx_torch, "_exports", {})

    def counting_export(src, path, calibration=None):
        exports.append(path)
        real(src, path, calibration)

    monkeypatch.setattr(onnx_torch, "_export", counting_export)
    src = sources["torch"].artifact
    a = C.convert(src, "onnx", "none", tmp_path / "a")
    b = C.convert(src, "onnx", "none", tmp_path / "b")
    q = C.convert(src, "onnx", "dynamic", tmp_path / "q")
    assert len(exports) == 1
    assert Path(a.path).read_bytes() == Path(b.path).read_bytes() and a.sha256 == b.sha256
    assert q.quantize == "dynamic" and Path(q.path).is_file() and q.size_bytes < a.size_bytes
