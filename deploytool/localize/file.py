"""Localization for a user's own model file (.onnx, .tflite, .keras, a
SavedModel directory), which has no zoo layer plan: its own graph is the plan.
`trace` runs a model once and keeps every intermediate value — ONNX: every
node output exposed as a graph output, one onnxruntime session; TFLite: one
interpreter that keeps all tensors; Keras: one functional model whose outputs
are all its layers'; SavedModel: its frozen serving graph returning every op's
output (savedmodel.py). A row whose converted file has the source's
own format (a quantized .onnx, a .tflite as given) is compared tensor by
tensor with the source's trace; a row converted to another format is cut
(`FileSource.cut`: the ONNX graph up to one tensor, a Keras functional
sub-model, or the SavedModel's frozen graph pruned at one op), and localize.py
converts and runs each cut like the row. Nothing here changes a stored result
or converts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.data.feed import Feed
from deploytool.errors import UnknownOption
from deploytool.localize import savedmodel
from deploytool.modelfiles.signature import Signature, match_names, output_spec
from deploytool.modelfiles.tflite_io import signature_names, tensor_quant
from deploytool.proc.quiet import import_tensorflow
from deploytool.value import value

# Ops that only move or relabel numbers (or make shapes): a cut there holds what the cut before it held.
SKIP_ONNX = {"Shape", "Constant", "ConstantOfShape", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
             "Transpose", "Cast", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
SKIP_TFLITE = {"RESHAPE", "SQUEEZE", "TRANSPOSE", "QUANTIZE", "DEQUANTIZE", "SHAPE", "EXPAND_DIMS"}
SKIP_KERAS = {"InputLayer", "Flatten", "Reshape", "Dropout", "Permute"}
TRACEABLE = ("onnx", "tflite", "keras", "saved_model")
CUTTABLE = ("onnx", "keras", "saved_model")


@value
class Point:
    """One intermediate value of a model: the tensor (or layer) name and the op (or layer class) making it."""

    name: str
    kind: str


Trace = dict[str, tuple[str, np.ndarray]]  # name -> (op type, values (N, ...)), in graph order


def trace(path: Path, fmt: str, x: Feed) -> Trace:
    """Every intermediate value of the model at `path` on `x` (the model's named inputs), from one
    run."""
    tracer = {"onnx": _trace_onnx, "tflite": _trace_tflite, "keras": _trace_keras,
              "saved_model": _trace_saved_model}.get(fmt)
    if tracer is None:
        raise UnknownOption(f"a {fmt} model cannot be localized here; localize a .onnx, .tflite, .keras model "
                            "or a SavedModel directory")
    if len(x.names) > 1 and fmt == "saved_model":  # its frozen graph is fed through one input tensor
        raise UnknownOption("a SavedModel of several inputs cannot be traced here; localize a .onnx, .tflite "
                            "or .keras model")
    # one path for every model: a single-array model's one input is paired by position (match_names)
    return tracer(Path(path), x)


def _onnx_outputs_exposed(path: Path) -> tuple[Any, dict[str, str]]:
    import onnx

    model = onnx.load(str(path))  # external weights are read from beside the file
    kinds: dict[str, str] = {}
    exposed = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out in node.output:
            if out and node.op_type not in SKIP_ONNX:
                kinds[out] = node.op_type
                if out not in exposed:
                    model.graph.output.append(onnx.ValueInfoProto(name=out))
                    exposed.add(out)
    return model, kinds


def _trace_onnx(path: Path, x: Feed) -> Trace:
    import onnxruntime as ort

    model, kinds = _onnx_outputs_exposed(path)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = sess.get_inputs()
    names = [o.name for o in sess.get_outputs()]
    # every graph input from the samples, by its name
    feeds = {m: x[src] for src, m in match_names(x.names, [i.name for i in inputs]).items()}
    n = len(x)
    batch_one = inputs[0].shape and inputs[0].shape[0] == 1
    runs = ([sess.run(names, {k: a[j : j + 1] for k, a in feeds.items()}) for j in range(n)] if batch_one
            else [sess.run(names, feeds)])
    out: Trace = {}
    for i, name in enumerate(names):
        v = np.concatenate([np.asarray(r[i]) for r in runs]) if batch_one else np.asarray(runs[0][i])
        if name in kinds and v.dtype.kind == "f" and v.ndim and v.shape[0] == n:
            out[name] = (kinds[name], v.astype(np.float32))
    return {name: out[name] for name in kinds if name in out}


def _trace_tflite(path: Path, x: Feed) -> Trace:
    import warnings

    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    with warnings.catch_warnings():  # "for debugging purposes only": localizing is debugging
        warnings.simplefilter("ignore", UserWarning)
        # Builtin kernels only: a delegate (XNNPACK) computes a partition's inner tensors where they are not kept.
        it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ins = it.get_input_details()
    sig = signature_names(it)  # each input by its signature's (or tensor's) name
    by_name = {sig.get(int(d["index"]), d["name"]): d for d in ins}
    feeds = [(by_name[m], x[src]) for src, m in match_names(x.names, list(by_name)).items()]
    for d, a in feeds:
        if int(d["shape"][0]) != 1 or list(d["shape"][1:]) != list(a.shape[1:]):
            it.resize_tensor_input(d["index"], [1, *a.shape[1:]])
    it.allocate_tensors()
    details = {d["index"]: d for d in it.get_tensor_details()}
    made_by: dict[int, str] = {}
    for op in it._get_ops_details():
        for t in op["outputs"]:
            if int(t) >= 0 and op["op_name"] not in SKIP_TFLITE:
                made_by.setdefault(int(t), op["op_name"])
    points = list(made_by.items())
    values: dict[int, list[np.ndarray]] = {t: [] for t, _ in points}
    for j in range(len(x)):
        for d, a in feeds:
            it.set_tensor(d["index"], tensor_quant(d).quantize(a[j : j + 1]))
        it.invoke()
        for t, _ in points:
            values[t].append(tensor_quant(details[t]).dequantize(it.get_tensor(t)))
    out: Trace = {}
    for t, kind in points:
        if any(v.ndim == 0 or v.shape[0] != 1 for v in values[t]):
            continue  # not a per-sample value (a scalar, a shape)
        v = np.concatenate(values[t])
        if v.dtype.kind == "f" and len(v) == len(x):
            out[str(details[t]["name"])] = (kind, v)
    return out


def _keras_points(model: Any) -> list[Any]:
    return [layer for layer in model.layers if type(layer).__name__ not in SKIP_KERAS]


def _load_keras(path: Path) -> Any:
    import_tensorflow()
    import keras

    return keras.saving.load_model(path, compile=False)


def _trace_keras(path: Path, x: Feed) -> Trace:
    import keras

    model = _load_keras(path)
    layers = _keras_points(model)
    every = keras.Model(model.inputs, [layer.output for layer in layers])
    names = [str(i.name).split(":")[0] for i in model.inputs]  # the model's inputs in its own order
    by_model = {m: x[src] for src, m in match_names(x.names, names).items()}
    outs = every([by_model[n] for n in names] if len(names) > 1 else by_model[names[0]], training=False)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return {layer.name: (type(layer).__name__, np.asarray(v, np.float32)) for layer, v in zip(layers, outs)}


def _trace_saved_model(path: Path, x: Feed) -> Trace:
    return savedmodel.trace(path, x.first)  # its one input (trace refuses several)


class FileSource:
    """A user's model file cut at any of its intermediate values, with the source's values at every cut
    from one traced run."""

    def __init__(self, artifact: Artifact, x: Feed):
        if artifact.format not in CUTTABLE:
            raise UnknownOption(f"a {artifact.format} model cannot be cut into smaller models here; rows converted "
                                "from a .onnx, a .keras file or a SavedModel directory can be localized")
        self.artifact = artifact
        self._frozen: Any = None
        self.reference = trace(Path(artifact.path), artifact.format, x)

    def points(self) -> list[Point]:
        return [Point(name, kind) for name, (kind, _) in self.reference.items()]

    def cut(self, point: Point, out_dir: Path, x: Feed) -> tuple[Artifact, np.ndarray]:
        """The model up to `point` saved as an artifact, and the source's values there (in their own shape)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        ref = self.reference[point.name][1]
        if self.artifact.format == "onnx":
            path = out_dir / "cut.onnx"
            _onnx_cut(Path(self.artifact.path), point.name, path)
        elif self.artifact.format == "saved_model":
            if self._frozen is None:  # frozen once, pruned at each cut
                self._frozen = savedmodel.freeze(Path(self.artifact.path))
            path = out_dir / "cut_saved_model"
            savedmodel.cut(self._frozen, point.name, path)
        else:
            import keras

            model = _load_keras(Path(self.artifact.path))
            path = out_dir / "cut.keras"
            keras.Model(model.inputs, model.get_layer(point.name).output).save(path)
        sig = self.artifact.signature  # the source's inputs, and the cut's one value as its output
        cut_sig = Signature(sig.inputs, (output_spec(point.name, "float32", [None, *ref.shape[1:]]),))
        art = Artifact(path=path, format=self.artifact.format, framework=self.artifact.framework,
                       layout=self.artifact.layout, input_shape=tuple(self.artifact.input_shape),
                       num_outputs=int(np.prod(ref.shape[1:])), converter=f"deploytool.localize cut at {point.name}",
                       sha256=content_hash(path), size_bytes=size_on_disk(path), signature=cut_sig)
        return art, ref


def _onnx_cut(path: Path, tensor: str, dest: Path) -> None:
    """The ONNX graph pruned to what computes `tensor`, which becomes its one output."""
    import onnx

    model = onnx.load(str(path))
    g = model.graph
    needed, keep = {tensor}, []
    for node in reversed(list(g.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    for field_name in ("initializer", "value_info"):
        items = [t for t in getattr(g, field_name) if t.name in needed]
        del getattr(g, field_name)[:]
        getattr(g, field_name).extend(items)
    del g.output[:]
    g.output.append(onnx.helper.make_tensor_value_info(tensor, onnx.TensorProto.FLOAT, None))
    onnx.save(model, str(dest))


def rel_error(target: np.ndarray, reference: np.ndarray) -> float:
    scale = float(np.abs(reference).max()) or 1.0
    diff = np.abs(target.astype(np.float64) - reference)
    return float(diff.max() / scale) if np.isfinite(diff).all() else float("inf")


def aligned_rel_error(out: np.ndarray, ref: np.ndarray) -> tuple[float, str]:
    """Relative error of `out` (N, k) against `ref` in its own shape; for a 4-D value also in the other
    channel order, since a converter may hand an intermediate back as NHWC where ONNX has NCHW (onnx2tf).
    Returns (error, the order it was compared in)."""
    n = len(ref)
    out = out.reshape(n, -1)
    best = (rel_error(out, ref.reshape(n, -1)), "")
    if ref.ndim == 4 and out.shape[1] == ref[0].size:
        for perm, name in (((0, 2, 3, 1), "NCHW->NHWC"), ((0, 3, 1, 2), "NHWC->NCHW")):
            e = rel_error(out, np.ascontiguousarray(ref.transpose(perm)).reshape(n, -1))
            if e < best[0]:
                best = (e, name)
    return best


def compare_traces(source: Trace, converted: Trace) -> list[tuple[Point, float | None]]:
    """Each source value with its relative error in the converted model's trace (None: no value of that
    name and size there, e.g. fused away by a quantizer's graph optimization)."""
    out: list[tuple[Point, float | None]] = []
    for name, (kind, ref) in source.items():
        got = converted.get(name)
        if got is None or got[1].size != ref.size:
            out.append((Point(name, kind), None))
            continue
        out.append((Point(name, kind), rel_error(got[1].reshape(len(ref), -1), ref.reshape(len(ref), -1))))
    return out


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60]
