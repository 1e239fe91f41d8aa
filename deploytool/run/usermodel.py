"""A user's own model file as the source of a migrate run: `.keras`, a
SavedModel directory, `.onnx`, `.tflite` or a torch.export `.pt2`. Its input
shape, output size and (where it can be told) layout are read from the model;
preprocessing and labels come from flags; whatever cannot be inferred is asked
for with a clear error. The file is copied into the workspace so the run never
writes beside the user's file and never sees it change under it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.errors import BadModelFile, DataError, Raised, ShapeError, StageFailed, first_line_of
from deploytool.kinds.base import FLOAT_DTYPES
from deploytool.modelfiles import onnx_external
from deploytool.modelfiles.reader import FRAMEWORK_READS, KeptSignature, read_signature
from deploytool.modelfiles.signature import INT_DTYPES, Signature
from deploytool.modelfiles.tf_graph import check_saved_model
from deploytool.runtimes import runtime_class
from deploytool.runtimes.isolated import open_workers
from deploytool.spec import ModelSpec, Preprocess, TrainSpec
from deploytool.tolerances import USER_CLASSIFIER_TOLERANCES, source_tolerances
from deploytool.value import value
from deploytool.workspace import Workspace, safe_segment

SUFFIXES = {".keras": "keras", ".onnx": "onnx", ".tflite": "tflite", ".pt2": "torch"}
CHANNELS = (1, 3, 4)
# Artifact.options key of a user's file whose I/O tensors are quantized integers (a fully int8 .tflite)
QUANTIZED_IO = "quantized_io"


@value
class UserModelOptions:
    layout: str | None = None  # NHWC / NCHW when the model does not tell
    labels: tuple[str, ...] = ()
    scale: float = 1.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    task: str | None = None
    output: str | None = None  # --output: the output a classifier is scored on


def is_model_file(arg: str) -> bool:
    p = Path(arg)
    return p.suffix in SUFFIXES or p.suffix in (".h5", ".pb", ".pt", ".pth") or p.is_dir()


def source_format(path: Path) -> str:
    if path.is_dir():
        if (path / "saved_model.pb").exists():
            return "saved_model"
        raise BadModelFile(f"{path}: a directory but not a SavedModel (no saved_model.pb); "
                           "pass a .keras, .onnx, .tflite, .pt2 file or a SavedModel directory")
    if not path.exists():
        raise BadModelFile(f"{path}: no such model file")
    if path.suffix in (".pt", ".pth"):
        raise BadModelFile(f"{path}: a pickled PyTorch file is never loaded (it can run code); "
                           "save the model with torch.export.save(torch.export.export(model, (x,)), 'model.pt2')")
    if path.suffix == ".h5":
        raise BadModelFile(f"{path}: legacy HDF5 Keras files are not read; re-save with model.save('model.keras')")
    fmt = SUFFIXES.get(path.suffix)
    if fmt is None:
        raise BadModelFile(f"{path}: unknown model file type; use .keras, .onnx, .tflite, .pt2 or a SavedModel dir")
    return fmt


def _check_keras_archive(path: Path) -> None:
    """Keras answers a damaged .keras file with "File not found"; say what is really wrong."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
            names = set(z.namelist())
    except (zipfile.BadZipFile, OSError) as e:
        raise BadModelFile(f"{path}: not a readable .keras file (bad zip archive: {e}); "
                           "re-save it with model.save('model.keras')") from None
    if bad is not None or "config.json" not in names:
        what = f"member {bad} is damaged" if bad is not None else "no config.json inside"
        raise BadModelFile(f"{path}: not a readable .keras file ({what}); re-save it with model.save('model.keras')")


def _layout(dims: list[int | None], fmt: str, path: Path, wanted: str | None) -> str:
    if wanted:
        return wanted
    if fmt in ("keras", "saved_model"):
        return "NHWC"
    if fmt == "torch":
        return "NCHW"
    c_last, c_first = dims[3] in CHANNELS, dims[1] in CHANNELS
    if c_last and not c_first:
        return "NHWC"
    if c_first and not c_last:
        return "NCHW"
    raise ShapeError(f"{path}: input shape {dims} does not tell whether it is NHWC or NCHW; pass --layout NHWC or NCHW")


def _home(path: Path, digest: str, ws: Workspace) -> tuple[str, Path]:
    """(clean name, folder): where the workspace keeps the model of content `digest` (the file's name may hold
    anything; folders and run ids get a clean one)."""
    name = safe_segment(path.stem)
    return name, ws.inside(ws.root / "models" / f"user-{name}-{digest[:12]}")


def _copy_in(path: Path, digest: str, ws: Workspace) -> tuple[str, str, Path, Path]:
    """The model copied into the workspace, named by its content: (clean name, sha256, folder, model path)."""
    name, dest_dir = _home(path, digest, ws)
    dest = dest_dir / (path.name if path.is_file() else "saved_model")
    if not dest.exists():
        if path.is_file():
            onnx_external.copy_with_external(path, dest_dir)
        else:
            dest_dir.mkdir(parents=True, exist_ok=True)
            shutil.copytree(path, dest)
    return name, digest, dest_dir, dest


def _checked(path: Path, fmt: str) -> str:
    """The file's sha256 (an .onnx's external weights are part of its identity), after the checks that must
    come before anything reads it."""
    if fmt == "onnx":
        onnx_external.external_files(path)  # weights missing or outside its folder: refused before any read
    if fmt == "keras":
        _check_keras_archive(path)
    if fmt == "saved_model":
        # its graph may write files or load native code: refused before TensorFlow loads it, on every run
        _check_saved_model(path)
    return content_hash(path)


def _check_saved_model(path: Path) -> None:
    """tf_graph.check_saved_model (it reads TensorFlow's op registry) in the worker the SavedModel's signature is read
    and its baseline run in (see `_in_worker`), before either; a worker that crashes checking it refuses the file."""
    try:
        _in_worker("saved_model", check_saved_model, path)
    except StageFailed as e:
        raise BadModelFile(f"{path}: saved_model.pb could not be checked ({e.reason}); nothing ran it") from None


def _signature(path: Path, fmt: str, digest: str, kept: Path) -> Signature:
    """The model's signature: kept from an earlier run on the same bytes (`KeptSignature`: a .keras, a
    SavedModel or a .pt2 is read by importing TensorFlow or PyTorch, 4-5 s of CPU here), else read."""
    keeper = KeptSignature(kept / "signature.json", fmt, digest)
    sig = keeper.get()
    if sig is None:
        try:
            sig = _in_worker(fmt, read_signature, path, fmt)
        except BadModelFile:
            raise
        except Exception as e:
            raise BadModelFile(f"{path}: cannot be read as a {fmt} model ({Raised.of(e).name}: "
                               f"{first_line_of(str(e), 200)}); check the file") from None
        keeper.put(sig)
    if not sig.inputs or not sig.outputs:
        raise BadModelFile(f"{path}: the model has {len(sig.inputs)} inputs and {len(sig.outputs)} outputs; "
                           "it needs at least one of each")
    odd = [t for t in sig.inputs if t.dtype not in (*FLOAT_DTYPES, *INT_DTYPES)]
    if odd:
        raise BadModelFile(f"{path}: input {odd[0].describe()} has a type deploytool cannot feed; inputs must be "
                           f"float ({', '.join(FLOAT_DTYPES)}) or integer ({', '.join(INT_DTYPES)})")
    return sig


def _in_worker(fmt: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in the open run's worker of the runtime that runs a `fmt` baseline, when reading a `fmt` file
    imports that runtime's framework (FRAMEWORK_READS: a .keras, a SavedModel, a .pt2): TensorFlow or PyTorch is
    then imported once for the read and the baseline, not first here and again there (4-5 s of CPU), and a reader
    that crashes takes down that worker, not the run. Outside a run, or for a format read without one, here."""
    workers = open_workers()
    if workers is None or fmt not in FRAMEWORK_READS:
        return fn(*args)
    return workers.call(runtime_class("pc", fmt), fn, *args)


def _options(path: Path, sig: Signature) -> dict[str, object]:
    """What the user's artifact records of itself: where it came from, and whether it computes in integers."""
    return {"original_path": str(path), **({QUANTIZED_IO: True} if sig.quantized else {})}


def _image_classifier(sig: Signature, opts: UserModelOptions) -> bool:
    """The signature's image classifier (Signature.image_classifier) not asked to be judged as another task."""
    return sig.image_classifier and opts.task in (None, "classification")


def _resolve_any(path: Path, fmt: str, digest: str, sig: Signature, opts: UserModelOptions,
                 ws: Workspace) -> tuple[ModelSpec, Artifact]:
    """A model that is not one image in and class scores out: its signature is its spec. The task is the
    flag's, else decided when the data's labels are seen; class names come from --labels or the first
    output's size."""
    try:
        first = sig.scored_output(opts.output)
    except KeyError:
        raise DataError(f"--output {opts.output}: {path} has no such output; its outputs are "
                        + ", ".join(t.describe() for t in sig.outputs)) from None
    classes = first.shape[-1] if first.rank == 2 and first.shape[-1] else 0
    labels = opts.labels or (tuple(str(i) for i in range(classes)) if classes >= 2 else ())
    if opts.labels and len(opts.labels) != classes:
        raise DataError(f"--labels names {len(opts.labels)} classes but {path}'s scored output "
                        f"{first.describe()} has {classes} values per sample")
    name, digest, dest_dir, dest = _copy_in(path, digest, ws)
    first_in = sig.inputs[0]
    artifact = Artifact(path=dest, format=fmt, framework=fmt, layout="NCHW" if fmt == "torch" else "NHWC",
                        input_shape=tuple(d or 0 for d in first_in.sample_shape),
                        num_outputs=int(first.shape[-1] or 0) if first.rank else 1, converter="user-supplied",
                        options=_options(path, sig), sha256=digest, size_bytes=size_on_disk(dest),
                        signature=sig)
    artifact.save(dest_dir / "artifact.json")
    task = opts.task or ""  # "" until the labels are seen (deploytool.data)
    spec = ModelSpec(
        name=name, architecture="user", frameworks=(fmt,), dataset="npz", input_shape=(), layout=artifact.layout,
        labels=labels, preprocess=Preprocess(opts.scale, opts.mean, opts.std),
        train=TrainSpec(epochs=0, batch_size=0, optimizer="none", learning_rate=0.0, seed=0),
        expected_accuracy=(0.0, 1.0), tolerances={}, description=f"user model {path}", source=str(path),
        task=task, signature=sig, scored_output=first.name if len(sig.outputs) > 1 else "")
    return spec, artifact


def resolve(path: Path, opts: UserModelOptions, ws: Workspace) -> tuple[ModelSpec, Artifact]:
    """A ModelSpec built from the model and the flags, and the model copied into the workspace as an Artifact."""
    path = Path(path)
    fmt = source_format(path)
    digest = _checked(path, fmt)
    signature = _signature(path, fmt, digest, _home(path, digest, ws)[1])
    if opts.output:
        try:
            signature.scored_output(opts.output)
        except KeyError:
            raise DataError(f"--output {opts.output}: {path} has no such output; its outputs are "
                            + ", ".join(t.describe() for t in signature.outputs)) from None
    if not _image_classifier(signature, opts):
        return _resolve_any(path, fmt, digest, signature, opts, ws)
    dims = [None, *signature.inputs[0].sample_shape]
    num_outputs = int(signature.outputs[0].shape[-1] or 0)
    layout = _layout(dims, fmt, path, opts.layout)
    sample = tuple(d for d in dims[1:] if d is not None)  # every dimension, fixed (_image_classifier)
    hwc = (sample[0], sample[1], sample[2]) if layout == "NHWC" else (sample[1], sample[2], sample[0])
    if num_outputs < 2:
        raise ShapeError(f"{path}: the output has {num_outputs} values per sample; deploytool compares classifiers "
                         "(one score per class)")
    labels = opts.labels or tuple(str(i) for i in range(num_outputs))
    if len(labels) != num_outputs:
        raise DataError(f"--labels names {len(labels)} classes but {path} has {num_outputs} outputs")
    name, digest, dest_dir, dest = _copy_in(path, digest, ws)
    artifact = Artifact(path=dest, format=fmt, framework=fmt, layout=layout, input_shape=sample,
                        num_outputs=num_outputs, converter="user-supplied", options=_options(path, signature),
                        sha256=digest, size_bytes=size_on_disk(dest), signature=signature)
    artifact.save(dest_dir / "artifact.json")
    spec = ModelSpec(
        name=name, architecture="user", frameworks=(fmt,), dataset="npz", input_shape=hwc, layout=layout,
        labels=labels, preprocess=Preprocess(opts.scale, opts.mean, opts.std),
        train=TrainSpec(epochs=0, batch_size=0, optimizer="none", learning_rate=0.0, seed=0),
        expected_accuracy=(0.0, 1.0), tolerances=source_tolerances(USER_CLASSIFIER_TOLERANCES, signature.quantized),
        description=f"user model {path}", source=str(path), input_name=signature.inputs[0].name,
    )
    return spec, artifact
