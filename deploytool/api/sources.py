"""What the Python API takes beside a path: a Keras model or a torch module in memory, and a test set as arrays.
Each is saved into the workspace as the file the CLI reads (`.keras`; a torch.export `.pt2`, exported with example
inputs taken from the test set; `.npz`), then goes the CLI's way as that file. A file is named by its content, and
the same content finds the file saved before, so the same model and data give the same run id again (a notebook
cell run twice resumes its run). Nothing is pickled or unpickled; TensorFlow and torch are never imported here
(a model object means its framework is imported already)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from deploytool.data.npz import read_arrays
from deploytool.errors import BadModelFile, DataError, UnknownOption, first_line_of
from deploytool.workspace import Workspace, safe_segment

FOLDER = "from-python"  # under the workspace: the models and test sets the API saved
# of a Keras archive, what is not the model: metadata.json holds the time it was saved
_KERAS_VOLATILE = frozenset({"metadata.json"})
EXAMPLE_SAMPLES = 2  # a torch module is exported on this many samples of the test set, its batch left free


def _framework_object(model: Any, module: str, cls: str) -> bool:
    """`model` is an instance of `module`'s class `cls` — asked only when the framework is imported already."""
    lib = sys.modules.get(module)
    if lib is None:
        return False
    base: Any = lib
    for part in cls.split("."):
        base = getattr(base, part, None)
        if base is None:
            return False
    return isinstance(model, base)


def is_keras_model(model: Any) -> bool:
    return _framework_object(model, "keras", "Model")


def is_torch_module(model: Any) -> bool:
    return _framework_object(model, "torch", "nn.Module")


def _folder(ws: Workspace) -> Path:
    return ws.inside(ws.root / FOLDER)


def _keep(tmp: Path, dest: Path) -> Path:
    """`tmp` moved to `dest`, unless a file of the same content is there already (then `tmp` goes)."""
    if dest.exists():
        tmp.unlink()
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
    return dest


def test_arrays(data: Any) -> dict[str, np.ndarray] | None:
    """The test set's arrays as the .npz would hold them: x (one array), (x, y), or a mapping of names (x or one
    array per model input, y, calibration splits `<input>_train`); None for a path or no data."""
    if data is None or isinstance(data, (str, os.PathLike)):
        return None
    if isinstance(data, np.ndarray):
        return {"x": data}
    if isinstance(data, tuple) and len(data) == 2:
        return {"x": np.asarray(data[0]), "y": np.asarray(data[1])}
    if isinstance(data, Mapping):
        return {str(k): np.asarray(v) for k, v in data.items()}
    raise DataError(f"data must be a path to an .npz, an array x, a tuple (x, y) or a mapping of named arrays, "
                    f"not {type(data).__name__}")


def data_file(data: Any, ws: Workspace) -> Path | None:
    """The test set as an .npz path: the user's own file, or the arrays saved into the workspace."""
    if data is None:
        return None
    if isinstance(data, (str, os.PathLike)):
        return Path(data)
    arrays = test_arrays(data)
    assert arrays is not None
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        if a.dtype == object:
            raise DataError(f"data[{name!r}] holds Python objects; give numbers (an .npz is never unpickled)")
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode() + a.tobytes())
    dest = _folder(ws) / f"data-{h.hexdigest()[:16]}.npz"
    if dest.exists():
        return dest
    with tempfile.NamedTemporaryFile(dir=_folder_made(ws), suffix=".npz", delete=False) as f:
        np.savez(f, **arrays)
    return _keep(Path(f.name), dest)


def _folder_made(ws: Workspace) -> Path:
    folder = _folder(ws)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def model_file(model: Any, data: Any, ws: Workspace, name: str | None = None) -> str:
    """What `migrate` hands the CLI's request as `--model`: a path or a zoo name as given, a Keras model saved
    as `.keras`, a torch module exported to `.pt2` on the test set's first samples."""
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    if is_keras_model(model):
        return str(save_keras(model, ws, name or str(getattr(model, "name", "") or "keras")))
    if is_torch_module(model):
        return str(save_torch(model, _arrays_of(data), ws, name or type(model).__name__.lower()))
    raise UnknownOption(f"model must be a path, a zoo name, a keras.Model or a torch.nn.Module, not "
                        f"{type(model).__module__}.{type(model).__name__}")


def _arrays_of(data: Any) -> dict[str, np.ndarray]:
    if isinstance(data, (str, os.PathLike)):
        return read_arrays(Path(data), what="the test set's arrays (x, or one per model input, and y)")
    arrays = test_arrays(data)
    if not arrays:
        raise DataError("a torch.nn.Module is exported with torch.export on samples of its test set: pass data "
                        "(x, (x, y), a mapping or an .npz path)")
    return arrays


def save_keras(model: Any, ws: Workspace, name: str) -> Path:
    """`model.save(<name>.keras)`, kept under a name of the archive's content (its save time left out)."""
    stem = safe_segment(name)
    tmp_dir = Path(tempfile.mkdtemp(dir=_folder_made(ws), prefix=".keras-"))
    try:
        tmp = tmp_dir / f"{stem}.keras"
        try:
            model.save(tmp)
        except Exception as e:
            raise BadModelFile(f"keras could not save the model ({type(e).__name__}: {first_line_of(str(e), 200)}); "
                               "a subclassed model needs get_config and keras.saving.register_keras_serializable") from None
        h = hashlib.sha256()
        with zipfile.ZipFile(tmp) as z:
            for member in sorted(set(z.namelist()) - _KERAS_VOLATILE):
                h.update(member.encode() + b"\0" + z.read(member))
        return _keep(tmp, _folder(ws) / f"{stem}-{h.hexdigest()[:12]}" / f"{stem}.keras")
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _example_inputs(arrays: dict[str, np.ndarray], samples: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The test set's first `samples` samples as torch.export's example: `x` positionally, or one keyword
    argument per named input (labels and calibration splits left out)."""
    import torch

    inputs = {k: v for k, v in arrays.items() if k != "y" and not k.endswith("_train")}
    if not inputs:
        raise DataError("data holds no model input (only y or calibration splits); give x or one array per input")
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v[:samples])) for k, v in inputs.items()}
    return ((tensors["x"],), {}) if list(tensors) == ["x"] else ((), tensors)


def _export(module: Any, arrays: dict[str, np.ndarray]) -> Any:
    """torch.export of the module in eval mode, its batch dimension free (on EXAMPLE_SAMPLES samples); a module
    whose batch cannot be free is exported at batch 1, which deploytool runs padded (README: a fixed batch)."""
    import torch

    args, kwargs = _example_inputs(arrays, EXAMPLE_SAMPLES)
    batch = torch.export.Dim("batch", min=1, max=4096)
    dynamic = ({0: batch},) if args else {k: {0: batch} for k in kwargs}
    try:
        return torch.export.export(module, args, kwargs, dynamic_shapes=dynamic)
    except Exception:
        args, kwargs = _example_inputs(arrays, 1)
        return torch.export.export(module, args, kwargs)


def save_torch(module: Any, arrays: dict[str, np.ndarray], ws: Workspace, name: str) -> Path:
    """The module exported with torch.export and saved as `<name>.pt2` (the same bytes for the same module and
    examples), kept under a name of its content; the module's train/eval mode is left as it was."""
    import torch

    stem = safe_segment(name)
    was_training = module.training
    module.eval()
    try:
        program = _export(module, arrays)
    except Exception as e:
        raise BadModelFile(f"torch.export could not export the module ({type(e).__name__}: "
                           f"{first_line_of(str(e), 200)}); export it yourself and pass the .pt2 path") from None
    finally:
        module.train(was_training)
    tmp_dir = Path(tempfile.mkdtemp(dir=_folder_made(ws), prefix=".pt2-"))
    try:
        tmp = tmp_dir / f"{stem}.pt2"  # the archive's folder inside is named after the file: same name, same bytes
        torch.export.save(program, str(tmp))
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        return _keep(tmp, _folder(ws) / f"{stem}-{digest[:12]}" / f"{stem}.pt2")
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
