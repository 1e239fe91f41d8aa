"""One onnx2tf run, shared by the routes that use it: an ONNX file becomes a
SavedModel (with a `serving_default` signature) and the TFLite files onnx2tf
writes beside it. The input keeps the ONNX model's layout (onnx2tf would
otherwise turn every 4-D input into NHWC by guessing which axis is the
channel) and a free batch dimension. onnx2tf reports many faults by printing
an error and calling sys.exit(1); that becomes an exception with the
printed error here. onnx2tf is imported inside the function; `run` writes
nothing outside the directory given.

`shared_run` keeps one run per (source bytes, layout, calibration set,
onnx2tf version) in this process (a conversion worker), in a temporary
folder, so the TFLite modes of one source cost one onnx2tf run: a
calibrated run writes every file (float32, float16, dynamic range, both
integer ones). Calibration changes only the integer files: with onnx2tf
1.29 / TensorFlow 2.19 the float32, float16 and dynamic-range files of a
calibrated run are byte-identical to an uncalibrated run's (fresh
processes; a warm process only renames layers: `model_3/...`). It never
serves another source or calibration set; a run that failed is that
failure for every mode that asks it. Only the newest source's runs are
kept; the folders go when the process exits, and a dead process's are
removed by the next one that makes a run.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact, content_hash
from deploytool.convert._common import dist_version, onnx_input_names
from deploytool.data.feed import Feed, channels_last, feed_sha256, layout_unknown
from deploytool.errors import NoConversion, ToolFailed
from deploytool.modelfiles.signature import Dims, TensorSpec, match_names
from deploytool.modelfiles.onnx_external import copy_with_external
from deploytool.value import value

CONVERTER = "onnx2tf"
DIST = "onnx2tf"

# The file onnx2tf writes for each of our quantization words (`{stem}_{suffix}.tflite`).
TFLITE_SUFFIX = {"none": "float32", "fp16": "float16", "dynamic": "dynamic_range_quant",
                 "int8": "integer_quant", "int8-io": "full_integer_quant"}

# onnx2tf's word for inputs it must not transpose: every input keeps the shape the source gives it (an image in
# the source's layout, NCHW or NHWC; a sequence as stored), so one test set feeds the source and the file alike
KEEP_INPUTS = "keep_nwc_or_nhwc_or_ndhwc_input_names"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Onnx2tfError(ToolFailed):
    """onnx2tf gave up (it called sys.exit): the message is the error it printed; its cause the SystemExit."""


def _printed_error(text: str) -> str:
    lines = [_ANSI.sub("", s).strip() for s in text.splitlines()]
    errors = [s for s in lines if s.startswith("ERROR:") and "trace log" not in s]
    return (errors[0] if errors else next((s for s in reversed(lines) if s), "onnx2tf stopped")).strip()


def run(source: Artifact, out_dir: Path, calibration: Feed | None = None,
        integer: bool = False, dynamic: bool = False) -> dict:
    """Convert `source` (an ONNX artifact) into `out_dir`: a SavedModel plus `<stem>_<suffix>.tflite` files.

    `calibration` (float32, in the source's layout) is needed when `integer` asks for the int8 models.
    Returns the options that describe the run.
    """
    import onnx2tf

    out_dir = Path(out_dir)
    # onnx2tf writes back into the model file it is given (shape inference, renamed outputs): give it a copy, with
    # its external weight files, so the source — a user's file in the workspace, content-addressed — never changes.
    src = copy_with_external(Path(source.path), out_dir / "onnx2tf-input")
    names = onnx_input_names(src)
    # every input kept as fed: an image in the source's layout, a sequence (N, steps, features) as stored
    kwargs: dict = {KEEP_INPUTS: names}
    options: dict = {"keep_input_layout": source.layout, "onnxsim": False, "signaturedefs": True}
    if dynamic:
        kwargs["output_dynamic_range_quantized_tflite"] = True
    if integer:
        if calibration is None:
            raise ValueError("int8 quantization needs a calibration set")
        arrays = dict(calibration.items())
        paths = []
        for i, (src_name, model_name) in enumerate(match_names(list(arrays), names).items()):
            calib = out_dir / f"calibration{i}.npy"
            a = arrays[src_name]  # token ids and masks keep their integer type: the model takes them so
            np.save(calib, np.ascontiguousarray(a, dtype=np.float32 if a.dtype.kind == "f" else a.dtype))
            paths.append([model_name, str(calib), 0.0, 1.0])
        kwargs.update(output_integer_quantized_tflite=True, quant_type="per-channel",
                      custom_input_op_name_np_data_path=paths, input_quant_dtype="int8", output_quant_dtype="int8")
        options.update(quant_type="per-channel", calibration_samples=len(calibration))
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            # onnxsim is a separate tool (not installed); its simplifications are not needed for a correct model.
            onnx2tf.convert(input_onnx_file_path=str(src), output_folder_path=str(out_dir), non_verbose=True,
                            not_use_onnxsim=True, output_signaturedefs=True,
                            copy_onnx_input_output_names_to_tflite=True, **kwargs)
    except SystemExit as e:
        raise Onnx2tfError(_printed_error(printed.getvalue())) from e
    except ModuleNotFoundError as e:  # onnx2tf has one module per ONNX op it converts
        module = e.name or ""
        if not module.startswith("onnx2tf.ops."):
            raise
        op = module.rsplit(".", 1)[-1]
        raise NoConversion(f"onnx2tf has no conversion for the ONNX op {op}", (op,),
                           "onnx2tf converts the ONNX ops it has a module for (onnx2tf/ops/); this one needs another "
                           "converter, or the model exported without it") from e
    finally:
        sys.stdout.write(printed.getvalue())  # into the conversion log
    return options


def _paired(source: Artifact, file_shapes: dict[str, tuple[int | None, ...]]) -> list[tuple[TensorSpec, Dims]]:
    """Each output of the source's signature with its file output's shape (one sample), where the names pair."""
    sig = source.signature
    if not file_shapes:
        return []
    try:
        pairs = match_names(list(sig.output_names), list(file_shapes))
    except KeyError:
        return []
    return [(t, file_shapes[pairs[t.name]]) for t in sig.outputs if t.name in pairs]


def channels_last_names(source: Artifact, file_shapes: dict[str, tuple[int | None, ...]]) -> list[str]:
    """The source's outputs onnx2tf made channels-last in the file (`file_shapes`: each output of the file by its
    name, one sample's shape): what every runtime lays out channels-first again (data.feed.restore_channels_first)."""
    return [t.name for t, shape in _paired(source, file_shapes) if channels_last(t.sample_shape, shape)]


def layout_notes(source: Artifact, file_shapes: dict[str, tuple[int | None, ...]]) -> tuple[str, ...]:
    """What a row must know of outputs whose shape cannot tell whether onnx2tf moved their channels last (every
    dimension equal, data.feed.layout_unknown): they are compared as the file gives them."""
    return tuple(f"output {t.name} is {list(t.sample_shape)} per sample in the source and in the file: whether "
                 "onnx2tf made it channels-last cannot be told from its shape, so it is compared as the file gives it"
                 for t, shape in _paired(source, file_shapes) if layout_unknown(t.sample_shape, shape))


def run_recipe(source: Artifact, integer: bool) -> str:
    """`run`'s onnx2tf.convert call as standalone Python (into the folder 'onnx2tf'; see convert._common.Recipe)."""
    keep = KEEP_INPUTS
    lines = ["import shutil", "import numpy as np", "import onnx", "import onnx2tf",
             "shutil.copyfile(SOURCE, 'input.onnx')  # onnx2tf writes into the file it is given",
             "graph = onnx.load('input.onnx', load_external_data=False).graph",
             "names = [i.name for i in graph.input if i.name not in {t.name for t in graph.initializer}]",
             f"kwargs = {{{keep!r}: names, 'output_dynamic_range_quantized_tflite': True}}"]
    if integer:
        lines += ["paths = []",
                  "for i, ((name, _, _), model_name) in enumerate(zip(INPUTS, names)):",
                  "    a = CALIBRATION[name]",
                  "    np.save(f'calibration{i}.npy', a.astype(np.float32) if a.dtype.kind == 'f' else a)",
                  "    paths.append([model_name, f'calibration{i}.npy', 0.0, 1.0])",
                  "kwargs.update(output_integer_quantized_tflite=True, quant_type='per-channel', "
                  "custom_input_op_name_np_data_path=paths, input_quant_dtype='int8', output_quant_dtype='int8')"]
    lines.append("onnx2tf.convert(input_onnx_file_path='input.onnx', output_folder_path='onnx2tf', non_verbose=True, "
                 "not_use_onnxsim=True, output_signaturedefs=True, copy_onnx_input_output_names_to_tflite=True, "
                 "**kwargs)")
    return "\n".join(lines) + "\n"


# what an onnx2tf recipe imports: onnx2tf runs on TensorFlow, onnx, onnxruntime and LiteRT
RECIPE_IMPORTS = ("onnx2tf", "onnx", "onnxruntime", "tensorflow", "tf-keras", "onnx-graphsurgeon", "ai-edge-litert")


def tflite_path(source: Artifact, out_dir: Path, quantize: str) -> Path:
    """The file `run` made for `quantize` (onnx2tf names its files after the input file)."""
    return Path(out_dir) / f"{Path(source.path).stem}_{TFLITE_SUFFIX[quantize]}.tflite"


# Shared runs live in <tmp>/deploytool-onnx2tf-run-<pid>-<random>: the pid says whose they are.
RUN_PREFIX = "deploytool-onnx2tf-run-"


@value
class _Run:
    folder: Path | None  # None when the run failed
    stem: str  # onnx2tf names its files after the input file
    options: dict
    error: Exception | None = None


_runs: dict[tuple, _Run] = {}
_runs_lock = threading.Lock()
_cleanup_registered = False


def shared_run(source: Artifact, calibration: Feed | None) -> tuple[dict[str, Path], dict]:
    """(our quantization word -> the .tflite file, the run's options) of the one onnx2tf run of `source` with
    `calibration` in this process, made on first use: with calibration every file, without it the float32,
    float16 and dynamic-range ones. Raises that run's error, each time it is asked. Do not write to the files."""
    key = (content_hash(source.path), source.layout, None if calibration is None else feed_sha256(calibration),
           dist_version(DIST))
    with _runs_lock:
        made = _runs.get(key)
        if made is None:
            _forget(keep_source=key[0])
            made = _runs[key] = _new_run(source, calibration)
        else:
            print(f"onnx2tf: using this worker's run of {key[0][:12]} "
                  f"({'calibration ' + key[2][:12] if key[2] else 'uncalibrated'})", flush=True)
    if made.error is not None:
        raise made.error
    assert made.folder is not None
    files = {q: made.folder / f"{made.stem}_{suffix}.tflite" for q, suffix in TFLITE_SUFFIX.items()}
    return {q: f for q, f in files.items() if f.is_file()}, dict(made.options)


def _new_run(source: Artifact, calibration: Feed | None) -> _Run:
    global _cleanup_registered
    if not _cleanup_registered:
        atexit.register(_forget)
        _remove_dead_processes_runs()
        _cleanup_registered = True
    folder = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))
    try:
        options = run(source, folder, calibration, integer=calibration is not None, dynamic=True)
    except Exception as e:  # kept: every mode that asks this run gets this failure
        shutil.rmtree(folder, ignore_errors=True)
        return _Run(None, "", {}, e)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _Run(folder, Path(source.path).stem, options)


def _forget(keep_source: str | None = None) -> None:
    """Remove the kept runs (all, or those of sources other than `keep_source`)."""
    for key in [k for k in _runs if k[0] != keep_source]:
        folder = _runs.pop(key).folder
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def forget_runs() -> None:
    """Remove every run kept in this process (tests start from none)."""
    with _runs_lock:
        _forget()


def _remove_dead_processes_runs() -> None:
    """Folders a killed worker (a timeout, a crash) could not remove: those whose pid no longer runs."""
    for folder in Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*"):
        pid = folder.name[len(RUN_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # alive, another user's
            pass
