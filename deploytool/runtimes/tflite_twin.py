"""A batch-N twin of a .tflite model whose batch of 1 is baked into its graph
(PyTorch-born models: litert-torch converts at batch 1 and writes the 1 into
every Reshape's target shape, so the input cannot be resized). On a phone such
a model would take one benchmark_model process per test sample; its twin takes
one per N samples. The twin is the same flatbuffer with batch sizes changed and
nothing else: the input's leading 1 and the leading 1 of every Reshape's
constant target shape become N; ops, weights and quantization are the file's
own. It is trusted only after LiteRT on the host gave the batch-1 file's own
outputs for samples spread over one twin batch. It serves the accuracy pass
only: latency is always measured on the artifact itself. This module never
talks to a device.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from deploytool.errors import first_line_of
from deploytool.value import value

# Samples of one twin batch checked on the host against the batch-1 file.
CHECKED_SAMPLES = 8


@value
class Twin:
    path: Path
    batch: int
    reshapes: int  # Reshape target shapes rewritten from 1 to `batch`


def needs_twin(path: Path) -> bool:
    """The model's batch is fixed at 1 and at least one Reshape holds that 1 as a constant (so resizing the
    input would make the Reshape fail to prepare)."""
    try:
        model = _read(path)
    except Exception:  # not a model we can read as a flatbuffer: the device's own ladder decides
        return False
    sg = model.subgraphs[0]
    if len(sg.inputs) != 1 or _leading(sg.tensors[sg.inputs[0]]) != 1:
        return False
    return bool(_batch_one_reshapes(model))


def make_twin(path: Path, batch: int, out_path: Path) -> Twin:
    """Write the batch-`batch` twin of `path` to `out_path`; ValueError when the graph has no such twin."""
    from ai_edge_litert.tools import flatbuffer_utils as fbu

    model = _read(path)
    sg = model.subgraphs[0]
    if len(model.subgraphs) != 1:
        raise ValueError(f"the model has {len(model.subgraphs)} subgraphs; only one-subgraph models get a twin")
    for i in (*sg.inputs, *sg.outputs):
        t = sg.tensors[i]
        if _leading(t) != 1:
            raise ValueError(f"tensor {_name(t)} does not lead with a batch of 1 ({list(t.shape)})")
        t.shape = [batch, *list(t.shape)[1:]]
        if t.shapeSignature is not None and len(t.shapeSignature):
            t.shapeSignature = [batch, *list(t.shapeSignature)[1:]]
    reshapes = _batch_one_reshapes(model)
    for op, shape_tensor in reshapes:
        if shape_tensor is not None:
            if len(shape_tensor.shape) != 1:
                raise ValueError("a Reshape's target shape is not a vector")
            buf = model.buffers[shape_tensor.buffer]
            dims = np.frombuffer(bytes(buf.data), dtype=_int_dtype(shape_tensor)).copy()
            dims[0] = batch
            buf.data = np.frombuffer(dims.tobytes(), dtype=np.uint8)
        opts = op.builtinOptions
        if opts is not None and getattr(opts, "newShape", None) is not None and len(opts.newShape):
            opts.newShape = [batch, *list(opts.newShape)[1:]]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fbu.write_model(model, str(out_path))
    return Twin(Path(out_path), batch, len(reshapes))


def check_twin(original: Path, twin: Twin, batch_inputs: np.ndarray) -> str | None:
    """None when the twin, run on the host at its batch, gives the batch-1 file's outputs for samples spread
    over `batch_inputs` (the first twin batch, already in the model's input type); else why not."""
    from ai_edge_litert.interpreter import Interpreter

    try:
        it = Interpreter(model_path=str(twin.path))
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], batch_inputs)
        it.invoke()
        got = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        one = Interpreter(model_path=str(original))
        one.allocate_tensors()
        rows = np.unique(np.linspace(0, twin.batch - 1, num=min(CHECKED_SAMPLES, twin.batch)).round().astype(int))
        for r in rows:
            one.set_tensor(one.get_input_details()[0]["index"], batch_inputs[r : r + 1])
            one.invoke()
            for d, g in zip(one.get_output_details(), got):
                want = one.get_tensor(d["index"])
                if g.shape[1:] != want.shape[1:] or not _close(g[r : r + 1], want):
                    return f"its outputs differ from the batch-1 file's at sample {r} of the batch"
    except (ValueError, RuntimeError) as e:
        return f"LiteRT cannot run it at batch {twin.batch}: {first_line_of(str(e)) or type(e).__name__}"
    return None


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    if np.issubdtype(b.dtype, np.integer):  # quantized outputs: the same integers, one step of rounding apart
        return bool(np.all(np.abs(a.astype(np.int64) - b.astype(np.int64)) <= 1))
    return bool(np.allclose(a, b, rtol=1e-4, atol=1e-5))


def _read(path: Path) -> Any:
    from ai_edge_litert.tools import flatbuffer_utils as fbu

    return fbu.read_model(str(path))


def _batch_one_reshapes(model: Any) -> list:
    """(op, constant target-shape tensor or None) of every Reshape whose target shape leads with 1."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils as fbu

    sg = model.subgraphs[0]
    found = []
    for op in sg.operators:
        if fbu.get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex]) != \
                schema.BuiltinOperator.RESHAPE:
            continue
        shape_tensor = sg.tensors[op.inputs[1]] if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
        if shape_tensor is not None:
            data = model.buffers[shape_tensor.buffer].data
            if data is None or not len(data):
                continue  # a computed target shape follows the input's batch by itself
            dims = np.frombuffer(bytes(data), dtype=_int_dtype(shape_tensor))
            if len(dims) and dims[0] == 1:
                found.append((op, shape_tensor))
        else:
            opts = op.builtinOptions
            new_shape = list(getattr(opts, "newShape", None) or [])
            if new_shape and new_shape[0] == 1:
                found.append((op, None))
    return found


def _int_dtype(tensor: Any) -> type[np.signedinteger]:
    from ai_edge_litert import schema_py_generated as schema

    return np.int64 if tensor.type == schema.TensorType.INT64 else np.int32


def _leading(tensor: Any) -> int | None:
    shape = list(tensor.shape) if tensor.shape is not None else []
    return int(shape[0]) if shape else None


def _name(tensor: Any) -> str:
    name = tensor.name
    return name.decode() if isinstance(name, bytes) else str(name)
