"""Localization for a user's SavedModel directory. A Keras-exported SavedModel
has no Keras layers once loaded, so it is taken apart at the TensorFlow graph
level: the serving signature's concrete function with its variables frozen to
constants is one flat graph; `trace` evaluates every op output that computes
(not constants, identities, reshapes or shape arithmetic) in one run, and
`cut` saves that graph pruned at one op as a SavedModel of its own, which the
converters take like the user's. Nothing here converts or runs a converted
model (localize.py does); TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.convert._tf import serving_function
from deploytool.errors import BadModelFile
from deploytool.proc.quiet import import_tensorflow
from deploytool.value import value

# Ops that hold, move or relabel numbers, or compute shapes: a cut there holds what the cut before it held.
SKIP_TF = {"Placeholder", "Const", "Identity", "IdentityN", "NoOp", "ReadVariableOp", "Reshape", "Squeeze",
           "ExpandDims", "Shape", "ShapeN", "Size", "Rank", "StridedSlice", "Slice", "Pack", "Unpack", "Fill",
           "Range", "Transpose", "Cast", "StopGradient", "PreventGradient", "Snapshot"}
_WRAPPER = re.compile(r"^((StatefulPartitionedCall|PartitionedCall)(_\d+)?/)+")


@value
class FrozenGraph:
    """The serving signature as one graph of constants: its input and output tensor names, and the
    op outputs worth comparing as (short name, node name, op type), in graph order."""

    graph_def: Any
    input_tensor: str
    output_key: str
    batch_one: bool
    points: tuple[tuple[str, str, str], ...]

    def node_of(self, name: str) -> str:
        return next(node for short, node, _ in self.points if short == name)


def freeze(path: Path) -> FrozenGraph:
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    import_tensorflow()
    try:
        loaded, _, out_key, sig = serving_function(Path(path))
    except ValueError as e:
        raise BadModelFile(f"{path}: {e}") from None
    frozen = convert_variables_to_constants_v2(sig)
    del loaded
    graph_def = frozen.graph.as_graph_def()
    (inp,) = frozen.inputs
    computed = _computed_from(graph_def, inp.op.name)
    points: list[tuple[str, str, str]] = []
    shorts: set[str] = set()
    for node in graph_def.node:
        if node.op in SKIP_TF or node.name not in computed:
            continue
        short = _WRAPPER.sub("", node.name)
        short = node.name if short in shorts or not short else short
        shorts.add(short)
        points.append((short, node.name, node.op))
    return FrozenGraph(graph_def, inp.name, out_key, inp.shape.rank is not None and inp.shape[0] == 1,
                       tuple(points))


def _computed_from(graph_def: Any, feed: str) -> set[str]:
    """The nodes whose value depends on the node `feed` (not on constants alone, like a folded weight)."""
    inputs = {n.name: [i.split(":")[0] for i in n.input if not i.startswith("^")] for n in graph_def.node}
    computed: set[str] = set()
    grew = True
    while grew:  # the nodes come in creation order, so one pass usually settles it
        grew = False
        for name, ins in inputs.items():
            if name not in computed and name != feed and any(i == feed or i in computed for i in ins):
                computed.add(name)
                grew = True
    return computed


def _pruned(graph_def: Any, input_tensor: str, outputs: list[str]) -> Any:
    """A concrete function from the input tensor to `outputs` (tensor names) of the frozen graph."""
    import tensorflow as tf

    wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    g = wrapped.graph
    return wrapped.prune(g.as_graph_element(input_tensor), [g.as_graph_element(t) for t in outputs])


def trace(path: Path, x: np.ndarray) -> dict[str, tuple[str, np.ndarray]]:
    """Every computing op's output of the SavedModel at `path` on `x`, from one run of its frozen graph
    (one per sample when the signature takes a batch of one)."""
    import tensorflow as tf

    frozen = freeze(path)
    fn = _pruned(frozen.graph_def, frozen.input_tensor, [f"{node}:0" for _, node, _ in frozen.points])
    batches = [x[i:i + 1] for i in range(len(x))] if frozen.batch_one else [x]
    runs = [[np.asarray(v) for v in fn(tf.constant(b))] for b in batches]
    out: dict[str, tuple[str, np.ndarray]] = {}
    for i, (short, _, kind) in enumerate(frozen.points):
        v = np.concatenate([r[i] for r in runs]) if frozen.batch_one else runs[0][i]
        if v.dtype.kind == "f" and v.ndim and v.shape[0] == len(x):
            out[short] = (kind, v.astype(np.float32))
    return out


def _upstream_of(graph_def: Any, node: str) -> Any:
    """The graph pruned to the nodes `node` depends on (data and control inputs), in their order."""
    import tensorflow as tf

    by_name = {n.name: n for n in graph_def.node}
    needed, todo = set(), [node]
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(i.lstrip("^").split(":")[0] for i in by_name[name].input)
    sub = tf.compat.v1.GraphDef()
    sub.versions.CopyFrom(graph_def.versions)
    sub.library.CopyFrom(graph_def.library)
    sub.node.extend(n for n in graph_def.node if n.name in needed)
    return sub


def cut(frozen: FrozenGraph, name: str, dest: Path) -> None:
    """The frozen graph pruned to what computes the op `name` (a short name from `trace`), saved at `dest`
    as a SavedModel whose one-output serving signature returns that op's output."""
    import tensorflow as tf

    node = frozen.node_of(name)
    sub = _upstream_of(frozen.graph_def, node)
    placeholder = next(n for n in frozen.graph_def.node if n.name == frozen.input_tensor.split(":")[0])
    shape = tf.TensorShape(placeholder.attr["shape"].shape)

    class Cut(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32, name="input")])
        def serve(self, x: Any) -> Any:
            (y,) = tf.graph_util.import_graph_def(sub, input_map={frozen.input_tensor: x},
                                                  return_elements=[f"{node}:0"], name="cut")
            return {frozen.output_key: y}

    module = Cut()
    tf.saved_model.save(module, str(dest), signatures={"serving_default": module.serve})
