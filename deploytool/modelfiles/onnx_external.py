"""ONNX weights kept outside the model file ("external data": `model.onnx`
plus `model.onnx.data`, or whatever `location` the tensors name). The one place
that reads those locations, so copying, hashing, sizing and serving a model
all see the same files. A location is never trusted: one that leaves the
model's folder is refused before any file is opened. This module reads only
the model's structure (no weights, through onnx_proto, without `import onnx`)
and never runs a model.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from deploytool.errors import BadModelFile, first_line_of
from deploytool.modelfiles import onnx_proto


def _read_proto(path: Path) -> Any:
    """The model's structure (no weights, no `import onnx`): its I/O and external locations."""
    try:
        return onnx_proto.read(path)
    except (onnx_proto.ProtoError, OSError) as e:
        first = first_line_of(str(e), 200) or type(e).__name__
        raise BadModelFile(f"{path}: cannot be read as an ONNX model ({first}); check the file") from None


def _locations(model: Any) -> list[str]:
    """Every external `location` in the model, subgraphs and constant attributes included, in first-seen order."""
    return list(model.external_locations)


def _checked(model_path: Path, location: str) -> Path:
    """model_path's folder / location, refused unless it is a file inside that folder."""
    if not location:
        raise BadModelFile(f"{model_path}: a tensor is marked external but names no file; re-save the model")
    pure = PurePosixPath(location)
    if pure.is_absolute() or ".." in pure.parts \
            or "\\" in location or "\x00" in location:
        raise BadModelFile(f"{model_path}: its weights are said to live in {location!r}, outside the model's "
                           "folder; such a model is never read. Re-save it with its external data beside it")
    file = model_path.parent / location
    if not file.is_file():
        raise BadModelFile(f"{model_path}: its weights live in {location!r}, which is not a file beside the "
                           "model; keep the external data file next to the .onnx")
    # A symlink may point anywhere: it must land beside the model (or beside the file the model
    # itself links to, as in the Hugging Face cache, where both link into one blobs/ folder).
    real = file.resolve()
    if not any(real.is_relative_to(folder) for folder in (model_path.parent.resolve(), model_path.resolve().parent)):
        raise BadModelFile(f"{model_path}: its weights file {location!r} is a link to {real}, outside the "
                           "model's folder; copy the real file beside the model")
    _refuse_sparse(model_path, location, real)
    return file


# An external data file longer than this with less than half of it on disk is refused (see _refuse_sparse).
SPARSE_MIN_BYTES = 64 * 2**20


def _refuse_sparse(model_path: Path, location: str, real: Path) -> None:
    """Weights are written densely (onnx.save_model, a download), so a large file mostly made of holes is not a
    model's data: copying it into the workspace would write every hole out (a few bytes on disk can claim
    terabytes), and hashing or loading it would read them all. Refused before anything is read or written."""
    st = real.stat()
    on_disk = st.st_blocks * 512
    if st.st_size > SPARSE_MIN_BYTES and on_disk < st.st_size // 2:
        raise BadModelFile(f"{model_path}: its weights file {location!r} is sparse ({st.st_size / 2**30:.3g} GiB "
                           f"long, {on_disk / 2**20:.3g} MiB on disk): not written weights; re-save the model, or "
                           "copy the file with `cp --sparse=never` if its zeros are real")


# protobuf parses one message of at most 2 GiB: a larger .onnx cannot be read by onnx or onnxruntime (issue 38).
PROTOBUF_LIMIT_BYTES = 2**31


def refuse_over_protobuf_limit(model_path: Path) -> None:
    """An .onnx file (itself, its external data aside) over PROTOBUF_LIMIT_BYTES: one line before anything is read
    (a model over 2 GiB keeps its weights as external data, which is read, copied and served beside it)."""
    size = Path(model_path).stat().st_size
    if size > PROTOBUF_LIMIT_BYTES:
        raise BadModelFile(f"{model_path}: {size / 2**30:.3g} GiB in one .onnx file, beyond the 2 GiB protobuf "
                           "(so onnx and onnxruntime) can read; save it with its weights as external data: "
                           "onnx.save_model(model, path, save_as_external_data=True)")


def external_locations(model_path: Path) -> list[str]:
    """The `location` strings of an ONNX model's external data, as written in it, each checked.

    Raises BadModelFile for an unreadable model, one over PROTOBUF_LIMIT_BYTES in its own file, a location that
    leaves the model's folder (absolute, `..`, or a link out of it) or a file that is missing.
    """
    model_path = Path(model_path)
    refuse_over_protobuf_limit(model_path)
    locations = _locations(_read_proto(model_path))
    for loc in locations:
        _checked(model_path, loc)
    return locations


def external_files(model_path: Path) -> list[Path]:
    """The files an ONNX model's tensors keep their bytes in (model_path's folder / location); raises
    as external_locations does."""
    return [Path(model_path).parent / loc for loc in external_locations(model_path)]


def model_files(path: Path) -> list[Path]:
    """Every file that makes up a model file: itself, then, for an .onnx, its external data.

    A file that is not ONNX, or an .onnx that cannot be parsed, is just itself: what it
    is made of is judged where it is loaded. Unsafe or missing locations still raise.
    """
    path = Path(path)
    if path.suffix != ".onnx" or not path.is_file():
        return [path]
    try:
        model = _read_proto(path)
    except BadModelFile:
        return [path]
    return [path, *(_checked(path, loc) for loc in _locations(model))]


def copy_with_external(src: Path, dst_dir: Path, name: str | None = None) -> Path:
    """Copy a model file (as `name`, default its own) and its external data into dst_dir; the copy's path.

    Each external file keeps its location relative to the model, which is what the
    model itself names, so the copy loads wherever dst_dir is.
    """
    src, dst_dir = Path(src), Path(dst_dir)
    files = model_files(src)  # checked before anything is written
    dst_dir.mkdir(parents=True, exist_ok=True)
    dest = dst_dir / (name or src.name)
    # a file already there is replaced, never written into: it may be a link to a shared file
    # (deploytool.workspace.share_large_files), whose other names must keep their bytes
    dest.unlink(missing_ok=True)
    shutil.copyfile(src, dest)  # bytes only: a read-only original must not make a read-only copy
    for f in files[1:]:
        target = dst_dir / f.relative_to(src.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        shutil.copyfile(f, target)
    return dest


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def content_hash(path: Path) -> str:
    """sha256 of a model file and its external data: the file's own sha256 when it has none.

    The external files' names are inside the model file, so its digest already covers them.
    """
    digests = [_file_sha256(f) for f in model_files(path)]
    return digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()


def size_on_disk(path: Path) -> int:
    """Bytes of a model file and its external data."""
    return sum(f.stat().st_size for f in model_files(path))
