"""Quantized input/output of TFLite models: read the tensors' scale and zero
point and convert float inputs to the model's integer type and integer outputs
back to float. Every TFLite runtime (LiteRT on the host, the browser, the
phone) goes through here, so a user never has to remember it (tensorflow#53278).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from deploytool.modelfiles.signature import TensorSpec, canonical_name
from deploytool.value import value


@value
class TensorQuant:
    name: str
    dtype: str  # numpy dtype name: float32, int8, uint8, ...
    shape: tuple[int, ...]
    scale: float  # 0.0 when the tensor is not quantized
    zero_point: int
    dims: tuple[int | None, ...] = ()  # the file's shape signature: None where it leaves a dimension open

    def spec(self) -> TensorSpec:
        """The tensor as a signature describes one (its open dimensions None, its quantization if any)."""
        return TensorSpec(self.name, self.dtype, self.dims or tuple(self.shape),
                          quantization=(self.scale, self.zero_point) if self.quantized else None)

    @property
    def quantized(self) -> bool:
        return self.dtype in ("int8", "uint8", "int16") and self.scale != 0.0

    def quantize(self, x: np.ndarray) -> np.ndarray:
        if not self.quantized:
            return np.ascontiguousarray(x, dtype=self.dtype)
        info = np.iinfo(self.dtype)
        q = np.round(x / self.scale) + self.zero_point
        return np.clip(q, info.min, info.max).astype(self.dtype)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        if not self.quantized:
            return np.asarray(q, dtype=np.float32)
        return ((q.astype(np.float32) - self.zero_point) * self.scale).astype(np.float32)


def quantization_notes(inputs: Iterable[TensorQuant], outputs: Iterable[TensorQuant]) -> list[str]:
    """What a row says of a file's quantized tensors, the same words on every runtime that runs it (LiteRT,
    TensorFlow's interpreter, tfjs-tflite, the phone): the float data each quantized input took, and the
    dequantization of each quantized output before it was compared."""
    notes = [f"{t.dtype} model input {canonical_name(t.name)}: float data quantized with the tensor's scale "
             f"{t.scale:.6g} and zero point {t.zero_point}" for t in inputs if t.quantized]
    notes += [f"{t.dtype} model output {canonical_name(t.name)}: dequantized with its scale {t.scale:.6g} and "
              f"zero point {t.zero_point} before comparison" for t in outputs if t.quantized]
    return notes


def tensor_quant(d: dict) -> TensorQuant:
    scale, zp = d.get("quantization", (0.0, 0))
    shape = tuple(int(s) for s in d["shape"])
    open_ = d.get("shape_signature")
    dims = tuple(None if int(s) < 0 else int(s) for s in open_) if open_ is not None and len(open_) else shape
    return TensorQuant(d["name"], np.dtype(d["dtype"]).name, shape, float(scale), int(zp), dims)


def io_of(interpreter: Any) -> tuple[list[TensorQuant], list[TensorQuant]]:
    """(inputs, outputs) of a LiteRT interpreter already holding a model."""
    return ([tensor_quant(d) for d in interpreter.get_input_details()],
            [tensor_quant(d) for d in interpreter.get_output_details()])


def read_io(model_path: str) -> tuple[list[TensorQuant], list[TensorQuant]]:
    """(inputs, outputs) of a .tflite file, read with the LiteRT interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    return io_of(Interpreter(model_path=str(model_path)))


def signature_names(interpreter: Any) -> dict[int, str]:
    """Tensor index -> the name its model's one signature gives it (a converted Keras model's own input and
    output names); {} for a model without exactly one signature."""
    runners = interpreter.get_signature_list()
    if len(runners) != 1:
        return {}
    runner = interpreter.get_signature_runner(next(iter(runners)))
    names: dict[int, str] = {}
    for details in (runner.get_input_details(), runner.get_output_details()):
        names.update({int(d["index"]): name for name, d in details.items()})
    return names


@value
class NamedTensors:
    """A TFLite file's inputs and outputs by the names its signature gives them (else their tensor names), each
    with its tensor (whose `name` is the flatbuffer's own, what a runtime other than LiteRT shows)."""

    inputs: dict[str, TensorQuant]
    outputs: dict[str, TensorQuant]


def tflite_tensors(model_path: str) -> NamedTensors:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(model_path))
    names = signature_names(interpreter)

    def named(details: list[dict]) -> dict[str, TensorQuant]:
        return {names.get(int(d["index"]), d["name"]): tensor_quant(d) for d in details}

    return NamedTensors(named(interpreter.get_input_details()), named(interpreter.get_output_details()))

