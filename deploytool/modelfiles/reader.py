"""Read a model file's I/O `Signature`: `.onnx` (from its protobuf, without onnx), `.tflite` (LiteRT's
interpreter: its signature's names, the tensors' dtypes and shape signatures), `.keras` and SavedModel
directories (Keras and TensorFlow, imported here and only here), and torch.export `.pt2` (the graph's
placeholders; the archive's pickled sample inputs are never read). Names are the source's own: a converter that
renames tensors (TFLite's `serving_default_x:0`) is mapped back by `canonical_name`. It reads; it never runs a
model and never decides what a signature means for the data (deploytool.data does)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from deploytool.modelfiles import onnx_proto, pt2
from deploytool.modelfiles.signature import Signature, TensorSpec, canonical_name, output_spec, serving_signature, spec_of
from deploytool.proc.quiet import import_tensorflow
from deploytool.provenance import package_version

__all__ = ["FRAMEWORK_READS", "KeptSignature", "canonical_name", "read_signature", "keras_signature"]

# The formats whose reader imports a framework (TensorFlow or PyTorch, as their baseline's runtime does), and the
# libraries whose versions could change what it reads.
FRAMEWORK_READS = {"keras": ("keras", "tensorflow"), "saved_model": ("tensorflow",), "torch": ("torch",)}


@cache
def _reader_key(fmt: str) -> str:
    """What a signature read from a `fmt` file depends on besides its bytes: this code and the libraries."""
    h = hashlib.sha256(fmt.encode())
    here = Path(__file__).parent
    for name in ("reader.py", "signature.py", "pt2.py"):
        h.update((here / name).read_bytes())
    for dist in FRAMEWORK_READS.get(fmt, ()):
        h.update(f"{dist}=={package_version(dist) or 'missing'}".encode())
    return h.hexdigest()


class KeptSignature:
    """The signature of the model of content `sha256`, kept in `path` (beside the model's copy in a workspace) by
    the run that read it, for the formats whose reader imports TensorFlow or PyTorch (4-5 s of CPU here): a run
    on the same bytes starts without that import. Keyed by the bytes, this module's code and the libraries'
    versions, so an edit or an upgrade reads the file again; a kept file that is missing, unreadable or of another
    key is read again, never trusted."""

    def __init__(self, path: Path, fmt: str, sha256: str):
        self.path, self.fmt, self.sha256 = Path(path), fmt, sha256

    def _key(self) -> str:
        return f"{self.sha256}:{_reader_key(self.fmt)}"

    def get(self) -> Signature | None:
        if self.fmt not in FRAMEWORK_READS:
            return None
        try:
            kept = json.loads(self.path.read_text(encoding="utf-8"))
            return Signature.from_json(kept["signature"]) if kept.get("key") == self._key() else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, sig: Signature) -> None:
        if self.fmt not in FRAMEWORK_READS:
            return
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps({"key": self._key(), "signature": sig.to_json()}), encoding="utf-8")
            os.replace(partial, self.path)
        except OSError:  # a run that cannot keep it reads the file again next time
            partial.unlink(missing_ok=True)


def read_signature(path: Path, fmt: str) -> Signature:
    """The signature of the model at `path` in format `fmt` (onnx, tflite, keras, saved_model, torch)."""
    readers = {"onnx": _onnx, "tflite": _tflite, "keras": _keras, "saved_model": _saved_model, "torch": _pt2}
    if fmt not in readers:
        raise ValueError(f"no signature reader for {fmt} models")
    return readers[fmt](Path(path))


def _onnx(path: Path) -> Signature:
    m = onnx_proto.read(path)

    def out(v: onnx_proto.ValueInfo) -> TensorSpec:
        # a sequence of maps (scikit-learn's ZipMap: one {class: probability} per sample) is read as per-class
        # scores (the runtime lays it out in class order); their number shows when it runs
        if v.kind != "tensor":
            return output_spec(v.name, "float32", [None, None])
        return output_spec(v.name, v.dtype or "float32", v.dims)

    return Signature(tuple(spec_of(v.name, v.dtype or "float32", v.dims) for v in m.inputs),
                     tuple(out(v) for v in m.outputs))


def _tflite(path: Path) -> Signature:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    runners = interpreter.get_signature_list()
    names: dict[int, str] = {}
    if len(runners) == 1:  # the signature's own names (a converted Keras model's input names), by tensor index
        runner = interpreter.get_signature_runner(next(iter(runners)))
        for kind in (runner.get_input_details(), runner.get_output_details()):
            names.update({int(d["index"]): name for name, d in kind.items()})

    def spec(d: dict[str, Any], out: bool) -> TensorSpec:
        shape = d.get("shape_signature")
        shape = shape if shape is not None and len(shape) else d["shape"]
        name = names.get(int(d["index"]), canonical_name(d["name"]))
        dims = [None, *[int(s) for s in shape[1:]]] if len(shape) else []
        scale, zero_point = d.get("quantization", (0.0, 0))
        q = (float(scale), int(zero_point)) if scale else None
        return output_spec(name, d["dtype"], dims, q) if out else spec_of(name, d["dtype"], dims, quantization=q)

    return Signature(tuple(spec(d, False) for d in interpreter.get_input_details()),
                     tuple(spec(d, True) for d in interpreter.get_output_details()))


def _keras(path: Path) -> Signature:
    import_tensorflow()
    import keras

    model = keras.saving.load_model(path, compile=False)
    return keras_signature(model)


def keras_signature(model: Any) -> Signature:
    """The signature of a loaded Keras model (the zoo's twins are read the same way)."""
    def dims(t: Any) -> list[int | None]:
        return [None, *list(t.shape)[1:]]

    outs = model.outputs if isinstance(model.outputs, (list, tuple)) else [model.outputs]
    names = list(getattr(model, "output_names", None) or [])
    return Signature(tuple(spec_of(_keras_name(t), t.dtype, dims(t)) for t in model.inputs),
                     tuple(output_spec(names[i] if i < len(names) else _layer_name(t), t.dtype, dims(t))
                           for i, t in enumerate(outs)))


def _layer_name(t: Any) -> str:
    """An output without a name of its own (a Sequential model has no output_names) by the layer that makes it,
    which the .keras file keeps: its tensor's name (`keras_tensor_5`) counts the models this process loaded
    before, and would change the signature, hence the run id, of the same file loaded again."""
    layer = getattr(getattr(t, "_keras_history", None), "operation", None)
    return str(getattr(layer, "name", "") or "") or _keras_name(t)


def _keras_name(t: Any) -> str:
    name = str(getattr(t, "name", "") or "")
    return name.split(":")[0] if name else "input"


def _saved_model(path: Path) -> Signature:
    tf = import_tensorflow()
    loaded = tf.saved_model.load(str(path))
    sig = serving_signature(loaded, str(path))
    ins = sig.structured_input_signature[1]
    outs = sig.structured_outputs
    return Signature(tuple(spec_of(n, s.dtype.name, [None, *list(s.shape)[1:]]) for n, s in ins.items()),
                     tuple(output_spec(n, s.dtype.name, [None, *list(s.shape)[1:]]) for n, s in outs.items()))


def _pt2(path: Path) -> Signature:
    program = pt2.load_program(path)
    nodes = {n.name: n for n in program.graph.nodes}
    sig = program.graph_signature

    def spec(name: str, out: bool) -> TensorSpec:
        val = nodes[name].meta.get("val")
        dims = [d if isinstance(d, int) else None for d in val.shape] if val is not None else []
        dims = [None, *dims[1:]] if dims else dims
        dtype = str(val.dtype).removeprefix("torch.") if val is not None else "float32"
        return output_spec(name, dtype, dims) if out else spec_of(name, dtype, dims)

    outputs = [n for n in sig.user_outputs if n in nodes]
    names = pt2.output_names(program) or outputs  # a dict's keys, where the module returns one
    return Signature(tuple(spec(n, False) for n in sig.user_inputs),
                     tuple(replace(spec(n, True), name=named) for n, named in zip(outputs, names)))
