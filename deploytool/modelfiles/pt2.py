"""Read a torch.export `.pt2` file without running anything in it: the one
door through which every `.pt2` (a user's file or the zoo's own) is loaded.

`torch.export.load` is not safe on a stranger's file: it unpickles the
archive's sample inputs with `weights_only=False` when the safe unpickler
refuses them, `pickle.loads` opaque constants, loads TorchScript objects, and
maps AOTInductor shared libraries. So this module reads the archive itself and
uses only torch's *data* readers: the graph (JSON, rebuilt by torch's
deserializer and checked by its verifier), the weights and tensor constants
(raw bytes, or a pickle read with `weights_only=True`). Sample inputs are never
read; the input shape comes from the graph's placeholder. Anything else that
would need unpickling or native code is refused with one `BadModelFile` line.
It must not call `torch.export.load`, `pickle.loads` or `torch.load` without
`weights_only=True`, and torch's logging and warnings stay quiet while it reads.
"""

from __future__ import annotations

import contextlib
import io
import warnings
import zipfile
from pathlib import Path
from typing import Any, Iterator

from deploytool.errors import BadModelFile, first_line_of

MODEL = "model"  # the program torch.export.save writes; a .pt2 package may hold others, which are ignored
RESAVE = "save it with torch.export.save(torch.export.export(model, (x,)), 'model.pt2')"


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """Torch's loggers and Python warnings muted while a file is read: a bad file is one line, not twenty."""
    # Loggers left at NOTSET inherit the muted level of "torch"; only the ones with their own level are set
    # (each setLevel clears every logger's cache, so setting hundreds of them costs seconds). logging is imported
    # here: torch, which a .pt2 needs, imports it anyway; a run without a .pt2 does not (bench_user_onnx.py).
    import logging

    children = [lg for n, lg in list(logging.root.manager.loggerDict.items())
                if n.startswith("torch.") and isinstance(lg, logging.Logger) and lg.level != logging.NOTSET]
    loggers = [logging.getLogger("torch"), *children]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    first = first_line_of(text, 200)
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _tensor_pickle(reader: Any, member: str, path: Path) -> Any:
    """A pickled tensor (or dict of tensors) read by torch's restricted unpickler, or refused."""
    import torch

    try:
        return torch.load(io.BytesIO(reader.read_bytes(member)), weights_only=True)
    except Exception as e:
        raise BadModelFile(f"{path}: its member {member} is a pickle that is not plain tensor data "
                           f"({_first_line(e)}); deploytool never unpickles code; {RESAVE}") from None


def _tensors(reader: Any, kind: str, path: Path) -> dict[str, Any]:
    """The weights (kind "weights") or constants ("constants") of MODEL as {name: tensor}.

    Mirrors torch.export.pt2_archive._package._load_state_dict / _load_constants, except that a
    pickled entry is read with weights_only=True and a non-tensor constant is refused.
    """
    import torch
    from torch._export.serde.serialize import deserialize_size, deserialize_storage_offset, deserialize_stride
    from torch.export.pt2_archive import _package as pkg
    from torch.export.pt2_archive import constants as names

    base = names.WEIGHTS_DIR if kind == "weights" else names.CONSTANTS_DIR
    legacy = f"{base}{MODEL}.pt"  # the torch 2.6/2.7 layout: one torch.save'd dict
    if legacy in reader.get_file_names():
        loaded = _tensor_pickle(reader, legacy, path)
        if not isinstance(loaded, dict):
            raise BadModelFile(f"{path}: {legacy} is not a dict of tensors; {RESAVE}")
        return loaded
    config_file = (names.WEIGHTS_CONFIG_FILENAME_FORMAT if kind == "weights"
                   else names.CONSTANTS_CONFIG_FILENAME_FORMAT).format(MODEL)
    if config_file not in reader.get_file_names():
        raise BadModelFile(f"{path}: the archive has no {config_file}; {RESAVE}")
    config = pkg._load_payload_config(reader, config_file)
    raw = pkg._build_file_map(reader, config, base)  # raw tensor bytes only: it skips pickled entries
    out: dict[str, Any] = {}
    for fqn, meta in config.config.items():
        if kind == "constants" and not meta.path_name.startswith(names.TENSOR_CONSTANT_FILENAME_PREFIX):
            # custom_obj_ (TorchScript pickler) and opaque_obj_ (plain pickle.loads) both run code to load
            raise BadModelFile(f"{path}: constant {fqn!r} is a Python or TorchScript object, not a tensor; "
                               f"deploytool only loads tensor weights; {RESAVE} from a model without it")
        if meta.use_pickle:
            out[fqn] = _tensor_pickle(reader, f"{base}{meta.path_name}", path)
            continue
        t = meta.tensor_meta
        if t is None:
            raise BadModelFile(f"{path}: {kind} entry {fqn!r} has no tensor metadata; {RESAVE}")
        tensor = torch.as_strided(raw[meta.path_name], deserialize_size(t.sizes), deserialize_stride(t.strides),
                                  deserialize_storage_offset(t.storage_offset))
        out[fqn] = torch.nn.Parameter(tensor, requires_grad=t.requires_grad) if meta.is_param else tensor
    return out


def _check_ops(program: Any, path: Path) -> None:
    """Every call in the graph is a torch operator; torch's verifier checks the same, this does not rely on it."""
    import inspect
    import math
    import operator

    import torch

    # builtins only: operator.attrgetter / methodcaller are classes and stay out
    plain = {f for m in (operator, math) for f in vars(m).values() if inspect.isbuiltin(f)}
    plain |= {torch.sym_int, torch.sym_float, torch.sym_ite, torch.sym_max, torch.sym_min, torch.sym_not,
              torch.sym_sum}
    for gm in program.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            if node.op in ("call_module", "call_method"):
                raise BadModelFile(f"{path}: the graph has a {node.op} node ({node.target}); {RESAVE}")
            if node.op == "call_function" and not (
                    isinstance(node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator))
                    or node.target in plain):
                raise BadModelFile(f"{path}: the graph calls {node.target!r}, which is not a torch operator; "
                                   "deploytool only runs torch.export programs of torch operators")


def load_program(path: str | Path) -> Any:
    """The ExportedProgram of a .pt2 file, read without unpickling code and without its sample inputs."""
    path = Path(path)
    if not path.is_file():
        raise BadModelFile(f"{path}: no such .pt2 file")
    if not zipfile.is_zipfile(path):
        raise BadModelFile(f"{path}: not a readable .pt2 file (not a zip archive); {RESAVE}")
    import torch  # noqa: F401 - imported before the loggers are muted: its import configures them

    try:
        with _quiet_torch():
            return _load(path)
    except BadModelFile:
        raise
    except Exception as e:  # a damaged or foreign archive fails in many places inside torch
        raise BadModelFile(f"{path}: not a readable .pt2 file ({_first_line(e)}); {RESAVE}") from None


def import_reader() -> None:
    """Import what reading a .pt2 file needs (torch's export deserializer pulls in torch._dynamo: ~1.5 s),
    for a worker that imports its framework before it is asked to load a model."""
    import torch  # imported before the loggers are muted: its import configures them

    with _quiet_torch():
        import torch._export.serde.serialize
        import torch.export.pt2_archive._package  # noqa: F401


def _load(path: Path) -> Any:
    from torch._export.serde import schema
    from torch._export.serde.serialize import ExportedProgramDeserializer, _bytes_to_dataclass
    from torch.export.pt2_archive import _package as pkg
    from torch.export.pt2_archive import constants as names

    reader = pkg.PT2ArchiveReader(str(path))  # torch's zip reader: checks archive_format == "pt2"
    members = reader.get_file_names()
    if names.ARCHIVE_VERSION_PATH not in members or reader.read_string(names.ARCHIVE_VERSION_PATH) != \
            names.ARCHIVE_VERSION_VALUE:
        raise BadModelFile(f"{path}: a .pt2 archive of another version than this torch reads; {RESAVE}")
    model_json = names.MODELS_FILENAME_FORMAT.format(MODEL)
    if model_json not in members:
        raise BadModelFile(f"{path}: the archive holds no exported program ({model_json}); AOTInductor "
                           f"packages and other archives are not read; {RESAVE}")
    serialized = _bytes_to_dataclass(schema.ExportedProgram, reader.read_bytes(model_json))
    weights = _tensors(reader, "weights", path)
    constants = _tensors(reader, "constants", path)
    # example_inputs=None: the sample inputs member is never read (torch would unpickle it unsafely).
    program = ExportedProgramDeserializer().deserialize(serialized, weights, constants, None)
    _check_ops(program, path)
    return program


def input_shape(program: Any, path: Path) -> list[int | None]:
    """The one user input's shape from its graph placeholder; a dynamic dimension is None."""
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    user = program.graph_signature.user_inputs
    if len(user) != 1:
        raise BadModelFile(f"{path}: the program takes {len(user)} inputs; deploytool runs one-input models")
    return [d if isinstance(d, int) else None for d in nodes[user[0]].meta["val"].shape]


def output_size(program: Any, path: Path) -> int:
    """Values per sample of the first user output (the class scores), from the graph's metadata."""
    outputs = program.graph_signature.user_outputs
    node = next((n for n in program.graph.nodes if n.name == (outputs[0] if outputs else None)), None)
    val = node.meta.get("val") if node is not None else None
    if val is None or not hasattr(val, "shape") or len(val.shape) == 0 or not isinstance(val.shape[-1], int):
        raise BadModelFile(f"{path}: the program's output has no fixed size per sample; {RESAVE}")
    return int(val.shape[-1])


def output_names(program: Any) -> list[str]:
    """The names a module's outputs have in its Python structure: a dict's keys ("outer.inner" when nested), a
    tuple's positions; [] for one tensor or a structure torch does not describe."""
    from deploytool.modelfiles.signature import flat_named

    spec = getattr(getattr(program, "call_spec", None), "out_spec", None)
    if spec is None:
        return []
    try:
        from torch.utils import _pytree

        n = spec.num_leaves
        structure = _pytree.tree_unflatten(list(range(n)), spec)
    except Exception:  # an odd spec: positions stand in for names
        return []
    if not isinstance(structure, dict):
        return []
    flat = flat_named(structure, "")
    return [name for name, _ in sorted(flat, key=lambda kv: kv[1])]


def fixed_batch(program: Any) -> int | None:
    """The batch size a program was exported at when its first input's batch dimension is fixed (torch.export's
    default without dynamic shapes), else None."""
    inputs = program.graph_signature.user_inputs
    node = next((n for n in program.graph.nodes if inputs and n.name == inputs[0]), None)
    val = node.meta.get("val") if node is not None else None
    shape = getattr(val, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) and isinstance(shape[0], int) else None
