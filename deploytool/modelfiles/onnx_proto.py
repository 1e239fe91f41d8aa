"""What deploytool reads of an ONNX file without `import onnx` (about a second
of start-up, mostly ml_dtypes): the graph's inputs and outputs with their
shapes, and the `location` of every tensor kept as external data. A few
protobuf wire-format fields are decoded by number (onnx.proto3); weights are
skipped, never copied. It validates nothing beyond the wire format: the
runtime that loads the model is the judge, and converters that must inspect
or rewrite a graph import onnx themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from deploytool.value import value

# field numbers in onnx.proto3
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_SPARSE_INITIALIZER = 1, 5, 11, 12, 15
_NODE_ATTRIBUTE = 5
_ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS = 5, 6, 10, 11
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION, _TENSOR_NAME = 13, 14, 8
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_VALUE_NAME, _VALUE_TYPE = 1, 2
_TYPE_TENSOR, _TENSOR_TYPE_ELEM, _TENSOR_TYPE_SHAPE, _SHAPE_DIM, _DIM_VALUE = 1, 1, 2, 1, 1
_TYPE_SEQUENCE, _TYPE_MAP = 4, 5  # TypeProto's sequence_type and map_type
# TensorProto.DataType -> numpy dtype name (the types a graph input or output of ours can have)
ELEM_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
              10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


class ProtoError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ProtoError("truncated or overlong varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """(field number, value) of one message: an int for scalars, a memoryview for length-delimited fields."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtoError("field number 0")
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ProtoError("a field runs past the end of its message")
            yield number, buf[i:i + n]
            i += n
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if i + size > len(buf):
                raise ProtoError("truncated fixed-size field")
            yield number, int.from_bytes(buf[i:i + size], "little")
            i += size
        else:
            raise ProtoError(f"wire type {wire} (not used by ONNX)")


def _all(buf: memoryview, number: int) -> list:
    return [v for n, v in _fields(buf) if n == number]


def _one(buf: memoryview, number: int) -> Any:
    found = _all(buf, number)
    return found[-1] if found else None


def _text(v: memoryview | None) -> str:
    return bytes(v).decode("utf-8", "replace") if v is not None else ""


@value
class ValueInfo:
    name: str
    dims: tuple[int | None, ...]  # None: a symbolic or unknown dimension
    dtype: str = ""  # numpy dtype name of a tensor's elements ("" when the graph does not say)
    kind: str = "tensor"  # "sequence" or "map": not a tensor (a ZipMap's sequence of {class: probability})


@value
class ModelInfo:
    inputs: tuple[ValueInfo, ...]  # graph inputs that are not initializers: what a caller feeds
    outputs: tuple[ValueInfo, ...]
    external_locations: tuple[str, ...]  # every external `location`, subgraphs included, first-seen order


def _value_info(buf: memoryview) -> ValueInfo:
    dims: list[int | None] = []
    type_proto = _one(buf, _VALUE_TYPE) or memoryview(b"")
    tensor_type = _one(type_proto, _TYPE_TENSOR)
    if tensor_type is None and (_one(type_proto, _TYPE_SEQUENCE) is not None or _one(type_proto, _TYPE_MAP) is not None):
        kind = "sequence" if _one(type_proto, _TYPE_SEQUENCE) is not None else "map"
        return ValueInfo(_text(_one(buf, _VALUE_NAME)), (), "", kind)
    shape = _one(tensor_type, _TENSOR_TYPE_SHAPE) if tensor_type is not None else None
    for dim in _all(shape, _SHAPE_DIM) if shape is not None else []:
        value = _one(dim, _DIM_VALUE)
        dims.append(value or None)
    elem = _one(tensor_type, _TENSOR_TYPE_ELEM) if tensor_type is not None else None
    dtype = ELEM_TYPES.get(elem, f"onnx type {elem}") if isinstance(elem, int) else ""
    return ValueInfo(_text(_one(buf, _VALUE_NAME)), tuple(dims), dtype)


def _tensor_location(tensor: memoryview) -> str | None:
    """The external `location` of one TensorProto, "" when it is external but names none, None when inline."""
    if _one(tensor, _TENSOR_DATA_LOCATION) != _EXTERNAL:
        return None
    entries = {_text(_one(e, _ENTRY_KEY)): _text(_one(e, _ENTRY_VALUE)) for e in _all(tensor, _TENSOR_EXTERNAL_DATA)}
    return entries.get("location", "")


def _locations(graph: memoryview) -> list[str]:
    graphs, found = [graph], []
    while graphs:
        g = graphs.pop()
        tensors = list(_all(g, _GRAPH_INITIALIZER))
        for sparse in _all(g, _GRAPH_SPARSE_INITIALIZER):
            tensors += _all(sparse, _SPARSE_VALUES) + _all(sparse, _SPARSE_INDICES)
        for node in _all(g, _GRAPH_NODE):
            for attr in _all(node, _NODE_ATTRIBUTE):
                for number, v in _fields(attr):
                    if not isinstance(v, memoryview):  # tensors and graphs are messages, never scalars
                        continue
                    if number in (_ATTR_T, _ATTR_TENSORS):
                        tensors.append(v)
                    elif number in (_ATTR_G, _ATTR_GRAPHS):
                        graphs.append(v)
        for t in tensors:
            loc = _tensor_location(t)
            if loc is not None and loc not in found:
                found.append(loc)
    return found


def read(path: Path) -> ModelInfo:
    """The model's I/O and external locations; raises ProtoError (or OSError) for a file that is not one."""
    data = memoryview(Path(path).read_bytes())
    try:
        graph = _one(data, _MODEL_GRAPH)
        if not isinstance(graph, memoryview):
            raise ProtoError("no graph in the file")
        initializers = {_text(_one(t, _TENSOR_NAME)) for t in _all(graph, _GRAPH_INITIALIZER)}
        inputs = tuple(v for v in map(_value_info, _all(graph, _GRAPH_INPUT)) if v.name not in initializers)
        outputs = tuple(map(_value_info, _all(graph, _GRAPH_OUTPUT)))
        return ModelInfo(inputs, outputs, tuple(_locations(graph)))
    except TypeError:  # a field of the wrong wire type where a message belongs
        raise ProtoError("a field has the wrong wire type") from None
