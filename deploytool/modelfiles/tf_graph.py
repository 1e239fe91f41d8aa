"""What a TensorFlow graph may hold before anything runs it. A SavedModel is a program: its serving function or
the init op it runs when loaded can read, write and list files (`WriteFile`, `ReadFile`, `MatchingFiles`, the
checkpoint ops with a path of the graph's choosing) or load native code (an op this TensorFlow does not know
comes from a custom library). So every op of a user's SavedModel — its graph and every function of its library —
is checked against an allowlist, read from `saved_model.pb` as protobuf, before TensorFlow loads it: an op with
no side effect (TensorFlow's registry says it is not stateful), or one of the stateful ops models are made of
(variables, random numbers, control flow, lookup tables filled from tensors, assertions) — and never one that
reads files, datasets or summaries though TensorFlow does not call it stateful (ReadFile). The checkpoint ops are
allowed only inside TensorFlow's own save and restore functions (`__inference__traced_save_N`, `_restore_N`),
which it calls with the model's own variables path, and only when neither a signature nor the init op reaches
them. A Keras model's traced serving graph is checked the same way (`check_graph_def`) before its first call.
This module reads protobufs and TensorFlow's op registry; it never loads or runs a graph."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from deploytool.errors import BadModelFile

# Stateful ops a model may hold: they change nothing outside the model's own memory.
ALLOWED_STATEFUL = frozenset({
    # variables (resource and reference)
    "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "VarIsInitializedOp", "DisableCopyOnRead", "DestroyResourceOp", "ResourceGather", "ResourceGatherNd",
    "ResourceScatterAdd", "ResourceScatterUpdate", "ResourceScatterSub", "ResourceScatterMul", "ResourceScatterDiv",
    "ResourceScatterMin", "ResourceScatterMax", "ResourceScatterNdUpdate", "ResourceScatterNdAdd", "VariableV2",
    "Variable", "Assign", "AssignAdd", "AssignSub", "IsVariableInitialized", "VariableShape",
    # calls and control flow (what they call is checked too)
    "StatefulPartitionedCall", "PartitionedCall", "While", "If", "Case", "For", "StatelessWhile", "StatelessIf",
    "StatelessCase", "RemoteCall",
    # random numbers
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal", "RandomShuffle", "Multinomial",
    "RandomGamma", "RandomGammaGrad", "RandomPoisson", "RandomPoissonV2", "RandomCrop", "ParameterizedTruncatedNormal",
    "StatefulUniform", "StatefulUniformInt", "StatefulUniformFullInt", "StatefulStandardNormalV2",
    "StatefulTruncatedNormal", "RngReadAndSkip", "RngSkip", "NonDeterministicInts", "AnonymousSeedGenerator",
    "DeleteSeedGenerator", "DummySeedGenerator",
    # tensor arrays, lists and stacks (in-memory)
    "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3", "TensorArrayScatterV3",
    "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3", "TensorArrayCloseV3", "TensorArrayGradV3",
    "StackV2", "StackPushV2", "StackPopV2", "StackCloseV2",
    # lookup tables filled from tensors (not from files)
    "HashTableV2", "MutableHashTableV2", "MutableHashTableOfTensorsV2", "MutableDenseHashTableV2",
    "AnonymousHashTable", "AnonymousMutableHashTable", "LookupTableFindV2", "LookupTableImportV2",
    "LookupTableInsertV2", "LookupTableSizeV2", "LookupTableExportV2", "LookupTableRemoveV2", "InitializeTableV2",
    # checks and no-ops
    "Assert", "CheckNumerics", "CheckNumericsV2", "NoOp",
})
# The checkpoint ops: a file path in, files read or written; only TensorFlow's own save/restore functions.
CHECKPOINT_OPS = frozenset({"SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "ShardedFilespec",
                            "Save", "SaveSlices", "Restore", "RestoreSlice"})
_SAVER_FUNCTION = re.compile(r"_traced_(?:save|restore)_\d+$")
# Ops TensorFlow does not call stateful that still reach outside the model: they read files (ReadFile, MatchingFiles,
# ImmutableConst's memory map), open datasets, readers and caches, or write summaries and debug dumps.
OUTSIDE = re.compile(r"File|Reader|Dataset|Iterator|Record|Checkpoint|Save|Restore|Snapshot|Matching|Immutable|"
                     r"LoadAndRemap|Summary|Debug|Dump|PyFunc|Socket|Gcs|Bigtable|Cache")
FIX = "deploytool runs no model that can touch files or load native code; export the model without that op"


def _registry() -> Any:
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()
    from tensorflow.python.framework import op_def_registry

    return op_def_registry


def _allowed(op: str, node: Any, registry: Any) -> str:
    """"" when the op may run; else why not."""
    if op in ALLOWED_STATEFUL:
        return ""
    if op in ("PrintV2", "Print"):  # prints to stderr/stdout/the log, or to a file: not that
        stream = node.attr["output_stream"].s.decode(errors="replace") if "output_stream" in node.attr else ""
        return "it prints to a file" if stream.startswith("file://") else ""
    if OUTSIDE.search(op):
        return "an op that reads or writes outside the model (files, datasets, summaries)"
    op_def = registry.get(op)
    if op_def is None:
        return "an op this TensorFlow does not know (a custom op library would run native code)"
    if op_def.is_stateful:
        return "an op with effects outside the model (files, I/O, processes)"
    return ""


def _called(node: Any) -> Iterator[str]:
    """The functions a node calls (PartitionedCall's `f`, While's body and cond, If's branches, ...)."""
    for value in node.attr.values():
        if value.HasField("func"):
            yield value.func.name
        if value.HasField("list"):
            yield from (f.name for f in value.list.func)


def _reached(roots: set[str], calls: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(calls.get(name, ()))
    return seen


def check_graph_def(graph_def: Any, what: str, saver_nodes: frozenset[str] = frozenset()) -> None:
    """Refuse (BadModelFile, one line naming the op and where) a GraphDef holding an op outside the allowlist.
    Checkpoint ops may sit only in TensorFlow's own save/restore functions, and nothing may call those but the
    graph's saver nodes (`saver_nodes`: the SaverDef's save and restore ops, which TensorFlow runs with the model's
    own variables path): what a caller runs — signatures, the init op, methods — never reaches them."""
    registry = _registry()
    functions = {f.signature.name: f for f in graph_def.library.function}
    calls = {name: {c for n in f.node_def for c in _called(n)} for name, f in functions.items()}
    roots = {c for n in graph_def.node if n.name not in saver_nodes for c in _called(n)} | \
        {n for n in functions if not _SAVER_FUNCTION.search(n)}
    reachable = _reached(roots, calls)
    places = [("the graph", n) for n in graph_def.node] + [(name, n) for name, f in functions.items() for n in f.node_def]
    for where, node in places:
        if node.op in CHECKPOINT_OPS:
            if _SAVER_FUNCTION.search(where) and where not in reachable:
                continue
            why = "a checkpoint op outside TensorFlow's own save and restore functions (it reads or writes a path " \
                  "the graph chooses)"
        else:
            why = _allowed(node.op, node, registry)
        if why:
            raise BadModelFile(f"{what}: refused before anything ran it: it holds {node.op} (in {where}), {why}; "
                               f"{FIX}")


def check_saved_model(path: Path) -> None:
    """Check every op of a SavedModel directory, read from saved_model.pb without loading it."""
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()
    from tensorflow.core.protobuf import saved_model_pb2

    pb = Path(path) / "saved_model.pb"
    try:
        model = saved_model_pb2.SavedModel.FromString(pb.read_bytes())
    except Exception as e:  # a damaged or foreign file: nothing can be checked, so nothing runs
        raise BadModelFile(f"{path}: saved_model.pb is not a readable SavedModel ({type(e).__name__}); re-export the "
                           "model with tf.saved_model.save or model.export") from None
    for meta in model.meta_graphs:
        saver = meta.saver_def
        nodes = frozenset(n.split(":")[0] for n in (saver.save_tensor_name, saver.restore_op_name) if n)
        check_graph_def(meta.graph_def, str(path), nodes)
