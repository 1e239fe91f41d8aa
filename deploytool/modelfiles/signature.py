"""A model's I/O signature as a value: its named inputs (dtype, shape with unknown dims, and what kind of data
each one takes: image, sequence, tokens or features, as deploytool.kinds infers it) and its named outputs (dtype,
shape). Every stage takes the signature instead of assuming "one 4-D float input, one logits output". This module
holds the value; reading it out of a model file is deploytool.modelfiles.read_signature's. It never loads a
framework."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from deploytool.kinds import infer_kind
from deploytool.kinds.base import FLOAT_DTYPES
from deploytool.value import value

_DECORATED = re.compile(r"^(?:serving_default_)?(?P<name>.+?)(?::\d+)?$")
# numpy dtype names an input may have (what the runtimes and converters here can feed): FLOAT_DTYPES and these
INT_DTYPES = ("int64", "int32", "int8", "uint8", "int16", "bool")

Dims = tuple[int | None, ...]


@value
class TensorSpec:
    """One input or output: `shape` starts with the batch dimension; None is a dimension the model leaves open
    (the batch, a sequence length). `kind` is set for inputs only."""

    name: str
    dtype: str
    shape: Dims
    kind: str = ""
    # (scale, zero point) of a quantized integer tensor (a fully int8 TFLite file's input): it takes float data,
    # quantized with them by the runtime, and its values mean float ones; None for any other tensor
    quantization: tuple[float, int] | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def sample_shape(self) -> Dims:
        """The shape of one sample: without the batch dimension."""
        return self.shape[1:]

    @property
    def is_float(self) -> bool:
        """Takes or gives float values: a float tensor, or a quantized integer one (its values mean floats)."""
        return self.dtype in FLOAT_DTYPES or self.quantization is not None

    def to_json(self) -> dict[str, Any]:
        d = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "kind": self.kind}
        return d if self.quantization is None else {**d, "quantization": list(self.quantization)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TensorSpec":
        q = d.get("quantization")
        return cls(str(d["name"]), str(d["dtype"]), tuple(None if v is None else int(v) for v in d["shape"]),
                   str(d.get("kind", "")), (float(q[0]), int(q[1])) if q else None)

    def describe(self) -> str:
        """`input_ids: int64 [N, 16] (tokens)`."""
        dims = ", ".join("N" if i == 0 and v is None else ("?" if v is None else str(v))
                         for i, v in enumerate(self.shape))
        q = f", quantized: scale {self.quantization[0]:.4g}, zero point {self.quantization[1]}" \
            if self.quantization else ""
        return f"{self.name}: {self.dtype} [{dims}]" + (f" ({self.kind}{q})" if self.kind or q else "")


@value
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.outputs)

    @property
    def image_classifier(self) -> bool:
        """One 4-D float input of fixed size and one output of class scores (N, C >= 2): the path image models
        always took (its checks, layouts, preprocessing and messages). A per-pixel or per-step output (N, C, H, W)
        is not one score per class. The one place this is decided."""
        if len(self.inputs) != 1 or len(self.outputs) != 1:
            return False
        x, y = self.inputs[0], self.outputs[0]
        fixed = x.rank == 4 and all(d is not None for d in x.shape[1:])
        return fixed and x.is_float and y.rank == 2 and (y.shape[-1] or 0) >= 2

    def scored_output(self, wanted: str | None = None) -> TensorSpec:
        """The output a classifier is scored on: `wanted` when named (KeyError when the model has none of that
        name); else the first float output holding several values per sample in its last dimension (per-class
        scores, the way scikit-learn's exporters write `probabilities` beside an integer `label`); else the first
        output. Every output is still compared; an integer label output for equality."""
        if wanted:
            hit = next((t for t in self.outputs if t.name == wanted or canonical_name(t.name) == wanted), None)
            if hit is None:
                raise KeyError(wanted)
            return hit
        scores = [t for t in self.outputs if t.is_float and t.rank >= 2 and (t.shape[-1] is None or t.shape[-1] >= 2)]
        return scores[0] if scores else self.outputs[0]

    @property
    def integer_outputs(self) -> tuple[str, ...]:
        """Outputs of integers (labels, indices): compared for equality, not by their distance."""
        return tuple(t.name for t in self.outputs if not t.is_float and t.dtype != "bool")

    @property
    def quantized(self) -> bool:
        """A model that computes in integers: one of its inputs or outputs is a quantized integer tensor."""
        return any(t.quantization is not None for t in (*self.inputs, *self.outputs))

    @property
    def all_float_inputs(self) -> bool:
        return all(t.is_float for t in self.inputs)

    def input(self, name: str) -> TensorSpec:
        for t in self.inputs:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {"inputs": [t.to_json() for t in self.inputs], "outputs": [t.to_json() for t in self.outputs]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Signature":
        return cls(tuple(TensorSpec.from_json(t) for t in d.get("inputs") or ()),
                   tuple(TensorSpec.from_json(t) for t in d.get("outputs") or ()))

    def describe(self) -> str:
        return ("inputs " + "; ".join(t.describe() for t in self.inputs) + " -> outputs "
                + "; ".join(t.describe() for t in self.outputs))


def dtype_name(dtype: Any) -> str:
    """A numpy dtype name for a dtype given as numpy, a framework's dtype object or a string."""
    try:
        return np.dtype(dtype).name  # numpy dtypes and scalar types, and names numpy knows
    except TypeError:
        pass
    name = getattr(dtype, "name", None) or str(dtype)
    name = name.removeprefix("torch.").removeprefix("tf.").removeprefix("<dtype: '").removesuffix("'>")
    try:
        return np.dtype(name).name
    except TypeError:
        return name


def spec_of(name: str, dtype: Any, shape: Any, kind: str | None = None,
            quantization: tuple[float, int] | None = None) -> TensorSpec:
    """A TensorSpec from a reader's raw facts: dims 0 or negative (ONNX's symbolic, TFLite's -1) are unknown."""
    dims: Dims = tuple(None if d is None or int(d) <= 0 else int(d) for d in shape)
    dt = dtype_name(dtype)
    q = quantization if quantization and quantization[0] and dt in ("int8", "uint8", "int16") else None
    return TensorSpec(name, dt, dims, kind if kind is not None else infer_kind(dt, dims, q is not None), q)


def output_spec(name: str, dtype: Any, shape: Any, quantization: tuple[float, int] | None = None) -> TensorSpec:
    return spec_of(name, dtype, shape, kind="", quantization=quantization)


def canonical_name(name: str) -> str:
    """A tensor's name without the decorations converters add: `serving_default_input_ids:0` -> `input_ids`."""
    m = _DECORATED.match(name)
    return m.group("name") if m else name


def match_names(wanted: tuple[str, ...] | list[str], available: list[str]) -> dict[str, str]:
    """Each wanted name (the source model's) -> the name it has in a converted model: the same, the same once
    converter decorations are taken off (`serving_default_x:0`), `output_<i>` for the i-th (Keras's export names
    outputs so), or, when none of these pairs all of them and the counts agree, the same position. Raises
    KeyError naming what could not be paired."""
    out: dict[str, str] = {}
    free = list(available)
    for i, w in enumerate(wanted):
        hit = w if w in free else next((a for a in free if canonical_name(a) == canonical_name(w)), None)
        if hit is None and f"output_{i}" in free:  # Keras's export names a model's outputs by position
            hit = f"output_{i}"
        if hit is not None:
            out[w] = hit
            free.remove(hit)
    if len(out) == len(wanted):
        return out
    if len(wanted) == len(available):
        return dict(zip(wanted, available))
    missing = [w for w in wanted if w not in out]
    raise KeyError(f"the model has no tensor for {', '.join(missing)} (it has {', '.join(available)})")


def flatten_outputs(out: Any, names: tuple[str, ...] | list[str]) -> list[Any]:
    """A framework's outputs in any structure — one tensor, a list or tuple, a dict (nested) — as the list of
    tensors in the order of `names` (the signature's output names): a dict's entries by their keys (a nested
    key reads "outer.inner"), a sequence's by position. Every runtime flattens the same way, so the same output
    has the same name on every route."""
    flat = flat_named(out, "")
    if len(flat) == 1 and len(names) <= 1:
        return [flat[0][1]]
    by_key = dict(flat)
    if names and all(n in by_key for n in names):
        return [by_key[n] for n in names]
    return [v for _, v in flat]


def flat_named(out: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(out, dict):
        return [kv for k, v in out.items() for kv in flat_named(v, f"{prefix}{k}" if not prefix else f"{prefix}.{k}")]
    if isinstance(out, (list, tuple)):
        return [kv for i, v in enumerate(out) for kv in flat_named(v, f"{prefix}{i}" if not prefix else f"{prefix}.{i}")]
    return [(prefix, out)]


SERVING = "serving_default"


def serving_signature(loaded: Any, where: str) -> Any:
    """A loaded SavedModel's `serving_default` signature — the one every route runs (the baseline, each converter),
    whatever other signatures it has — or BadModelFile naming the ones it has and the fix."""
    from deploytool.errors import BadModelFile

    sigs = getattr(loaded, "signatures", {}) or {}
    if SERVING not in sigs:
        have = ", ".join(sorted(sigs)) or "none"
        raise BadModelFile(f"{where}: the SavedModel has no '{SERVING}' signature (it has: {have}); save it with "
                           f"tf.saved_model.save(model, path, signatures={{'{SERVING}': f}}) or model.export(path)")
    return sigs[SERVING]
