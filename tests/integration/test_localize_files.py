"""Localizing a user's own model file (.onnx, .tflite, .keras): a failing row
(forced with a tolerance, as `--tolerance` does) is taken apart op by op and
the first op whose output departs from the source's is named, with its op type
and the error it introduces. Tiny models: a hand-made ONNX MLP whose middle
weights carry one outlier (dynamic int8 quantization then rounds the rest to
nothing), the contract tier's cached Keras CNN as TFLite, and a two-layer
Keras model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from deploytool.data.feed import Feed

if TYPE_CHECKING:
    from deploytool.artifact import Artifact

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files

STRICT = {"agreement": (1.01, 1.01)}  # no row can pass: what `--tolerance agreement=1.01` forces


def outlier_mlp(path: Path) -> Path:
    """x (N,8,8,1) -> Reshape -> MatMul a -> Relu -> MatMul b (one weight 100x the rest) -> Relu -> MatMul y."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w_a = rng.normal(0, 0.2, (64, 32)).astype(np.float32)
    w_b = rng.normal(0, 0.2, (32, 16)).astype(np.float32)
    w_b[0, 0] = 40.0  # per-tensor int8: scale 40/127, so every other weight of b rounds to 0 or +-0.3
    w_y = rng.normal(0, 0.2, (16, 10)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w_a, "Wa"), (w_b, "Wb"), (w_y, "Wy"),
                                                          (np.array([-1, 64], np.int64), "shape"))]
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["f"]), helper.make_node("MatMul", ["f", "Wa"], ["a"]),
             helper.make_node("Relu", ["a"], ["ar"]), helper.make_node("MatMul", ["ar", "Wb"], ["b"]),
             helper.make_node("Relu", ["b"], ["br"]), helper.make_node("MatMul", ["br", "Wy"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8, 8, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def digits_npz(tmp_path_factory):
    from tests.integration.tiny_models import digits

    x, y = digits()
    path = tmp_path_factory.mktemp("data") / "digits.npz"
    np.savez(path, x=x[1000:1100], y=y[1000:1100], x_train=x[:200], y_train=y[:200])
    return path


class InProcess:
    """The converter worker's `convert`, in this process (TensorFlow is imported here anyway): no worker start-up."""

    def convert(self, source: Artifact, fmt: str, quantize: str, out_dir: Path,
                calibration: Feed | None = None) -> Artifact:
        from deploytool import convert

        return convert.convert(source, fmt, quantize, out_dir, calibration)


def _migrate_and_localize(tmp: Path, model: Path, npz: Path, fmt: str, quantize: str, run_id: str = "r"):
    """One row of `migrate --model FILE --format FMT --quantize Q --tolerance agreement=1.01` on the host, its bug
    bundle, and its localization attached to the bundle, as `migrate --localize` does (without the report)."""
    from deploytool.bugs.bundle import bundle_row
    from deploytool.localize import attach_to_bundle, localize
    from deploytool.result import Combo
    from deploytool.run.context import RunContext
    from deploytool.run.request import MigrateRequest
    from deploytool.run.runner import run_combination
    from deploytool.workspace import Workspace

    req = MigrateRequest(model=str(model), test_npz=npz, formats=(fmt,), quantize=(quantize,), latency_samples=2,
                         warmup_runs=0, tolerances=STRICT)
    ctx = RunContext.build(req, Workspace.open(tmp / "ws"), targets=["host"])
    assert ctx.user_artifact is not None  # a model file
    result = run_combination(ctx, InProcess(), Combo(ctx.user_artifact.format, fmt, quantize, "host"), run_id, "k")
    assert result.failing, result
    bundle_row(ctx, result, run_id)
    assert result.bundle, result.bundle_error  # else the localization would land in the working directory
    loc = localize(ctx, result, InProcess())
    attach_to_bundle(loc, Path(result.bundle))
    loc.discard()
    return result, loc


def test_a_user_onnx_row_names_the_op_that_quantization_breaks(tmp_path, digits_npz):
    """Both files traced in one onnxruntime session each: the first MatMul survives dynamic int8, the second
    (the outlier's) is named, with what it introduces beyond its input's error; its minimal cut is bundled."""
    model = outlier_mlp(tmp_path / "mlp.onnx")
    result, loc = _migrate_and_localize(tmp_path, model, digits_npz, "onnx", "dynamic")
    assert [(c.layer, c.kind) for c in loc.cuts[:2]] == [("a", "MatMul"), ("ar", "Relu")]
    assert all(c.status == "ok" for c in loc.cuts[:-1]), loc.table()
    bad = loc.first_bad
    assert (bad.layer, bad.kind, bad.status) == ("b", "MatMul", "wrong"), loc.table()
    assert bad.rel_error > 0.25 and bad.input_rel_error < 0.05
    assert "op b (MatMul, #2) is the first" in loc.verdict and "its input was off by" in loc.verdict
    bundle = Path(result.bundle)
    assert json.loads((bundle / "localization.json").read_text())["verdict"] == loc.verdict
    import onnx

    cut = onnx.load(str(bundle / "minimal" / "converted" / "cut.onnx"))
    assert [o.name for o in cut.graph.output] == ["b"] and "MatMulInteger" in {n.op_type for n in cut.graph.node}

    # the same row on a second night is the same finding, counted again; its folder is an onnxruntime issue
    # with the backend-test layout and the minimal cut
    from deploytool.bugs.upstream import record_and_write
    from deploytool.store import SqlAlchemyStore
    from deploytool.workspace import Workspace

    ws = Workspace.open(tmp_path / "ws")
    store = SqlAlchemyStore(ws.default_db_url)
    (first,) = record_and_write(store, ws, "night-1", [result])
    again, _ = _migrate_and_localize(tmp_path, model, digits_npz, "onnx", "dynamic", run_id="night-2")
    (second,) = record_and_write(store, ws, "night-2", [again])
    assert second.id == first.id and second.occurrences == 2 and second.runs == ("night-1", "night-2")
    assert second.last_seen >= first.last_seen and second.owner == "microsoft/onnxruntime"
    folder = ws.finding_dir(second.id)
    issue = (folder / "issue.md").read_text()
    assert "Is this a quantized model? yes (dynamic)" in issue and "`backend_test/`" in issue, issue
    assert (folder / "backend_test" / "test_data_set_0" / "input_0.pb").is_file() and (folder / "minimal").is_dir()


def test_a_user_tflite_row_is_traced_op_by_op(tmp_path, digits_npz):
    """A .tflite runs as given: one interpreter that keeps every tensor traces it. Its first CONV_2D holds
    the Keras model's first layer's output (the file was converted from it), so the trace reads real tensors."""
    from deploytool.localize.file import trace
    from tests.contract.model_cache import ModelCache

    cache = ModelCache()
    tflite, keras_art = cache.converted("keras", "tflite", "none"), cache.source("keras")
    user = tmp_path / "user.tflite"
    user.write_bytes(Path(tflite.path).read_bytes())
    _, loc = _migrate_and_localize(tmp_path, user, digits_npz, "tflite", "none")
    kinds = [c.kind for c in loc.cuts]
    assert kinds[0] == "CONV_2D" and "FULLY_CONNECTED" in kinds and "MAX_POOL_2D" in kinds, loc.table()
    assert all(c.rel_error == 0.0 for c in loc.cuts) and "builds up" in loc.verdict
    import keras

    from tests.integration.tiny_models import digits

    x = digits()[0][1000:1004]
    first_conv = keras.Model(*(lambda m: (m.inputs, m.layers[0].output))(keras.saving.load_model(keras_art.path)))
    traced = trace(user, "tflite", Feed.one("input", x))
    conv = next(v for kind, v in traced.values() if kind == "CONV_2D")
    np.testing.assert_allclose(conv, np.asarray(first_conv(x)), atol=1e-4)


def test_a_user_keras_row_is_cut_into_sub_models(tmp_path, digits_npz):
    """A .keras converted to TFLite: each layer's functional sub-model is converted and run like the row
    (two layers here, untrained: one conversion per cut is what this way costs)."""
    import keras

    keras.utils.set_random_seed(0)
    user = tmp_path / "user.keras"
    keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
                      keras.layers.Flatten(), keras.layers.Dense(10, name="logits")]).save(user)
    _, loc = _migrate_and_localize(tmp_path, user, digits_npz, "tflite", "none")
    assert [(c.layer, c.kind) for c in loc.cuts] == [("conv", "Conv2D"), ("logits", "Dense")], loc.table()
    assert all(c.status == "ok" and c.rel_error < 1e-3 for c in loc.cuts) and "builds up" in loc.verdict


def test_a_user_saved_model_row_is_cut_at_its_graph_ops(tmp_path, digits_npz):
    """A SavedModel has no Keras layers once loaded: its frozen serving graph is traced op by op in one run,
    and each op's cut is saved as a SavedModel, converted and run like the row. The second Dense's weights
    carry one outlier, so dynamic int8 ONNX (per-tensor) breaks its MatMul: that op is named, with its type."""
    import keras

    keras.utils.set_random_seed(0)
    dense = lambda n, name, **kw: keras.layers.Dense(n, use_bias=False, name=name, **kw)  # no BiasAdd: fewer cuts
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), dense(16, "a", activation="relu"),
                              dense(10, "b")])
    rng = np.random.default_rng(0)
    w_b = rng.normal(0, 0.2, (16, 10)).astype(np.float32)
    w_b[0, 0] = 40.0  # per-tensor int8: every other weight of b rounds to 0 or +-0.3
    model.get_layer("a").set_weights([rng.normal(0, 0.2, (64, 16)).astype(np.float32)])
    model.get_layer("b").set_weights([w_b])
    user = tmp_path / "user_saved_model"
    model.export(str(user), verbose=False)
    result, loc = _migrate_and_localize(tmp_path, user, digits_npz, "onnx", "dynamic")
    kinds = [c.kind for c in loc.cuts]
    assert kinds == ["MatMul", "Relu", "MatMul"], loc.table()
    assert all(c.status == "ok" for c in loc.cuts[:-1]), loc.table()
    bad = loc.first_bad
    assert bad.status == "wrong" and "/b" in bad.layer and bad.rel_error > 0.25, loc.table()
    assert f"layer {bad.layer} (MatMul, cut #2)" in loc.verdict and "is the first cut whose output is wrong" in loc.verdict
    minimal = Path(result.bundle) / "minimal"
    assert (minimal / "source" / "cut_saved_model" / "saved_model.pb").is_file(), sorted(minimal.rglob("*"))
