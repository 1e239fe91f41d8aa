"""One onnx2tf run, shared by the routes that use it: an ONNX file becomes a
SavedModel (with a `serving_default` signature) and the TFLite files onnx2tf
writes beside it. The input keeps the ONNX model's layout (onnx2tf would
otherwise turn every 4-D input into NHWC by guessing which axis is the
channel) and a free batch dimension. onnx2tf reports many faults by printing
an error and calling sys.exit(1); that becomes an exception with the
printed error here. onnx2tf is imported inside the function; nothing is
written outside the directory given.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert._common import onnx_input_name

CONVERTER = "onnx2tf"
DIST = "onnx2tf"

# The file onnx2tf writes for each of our quantization words (`{stem}_{suffix}.tflite`).
TFLITE_SUFFIX = {"none": "float32", "fp16": "float16", "dynamic": "dynamic_range_quant",
                 "int8": "integer_quant", "int8-io": "full_integer_quant"}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Onnx2tfError(RuntimeError):
    """onnx2tf gave up (it called sys.exit): the message is the error it printed."""


def _printed_error(text: str) -> str:
    lines = [_ANSI.sub("", s).strip() for s in text.splitlines()]
    errors = [s for s in lines if s.startswith("ERROR:") and "trace log" not in s]
    return (errors[0] if errors else next((s for s in reversed(lines) if s), "onnx2tf stopped")).strip()


def run(source: Artifact, out_dir: Path, calibration: np.ndarray | None = None,
        integer: bool = False, dynamic: bool = False) -> dict:
    """Convert `source` (an ONNX artifact) into `out_dir`: a SavedModel plus `<stem>_<suffix>.tflite` files.

    `calibration` (float32, in the source's layout) is needed when `integer` asks for the int8 models.
    Returns the options that describe the run.
    """
    import onnx2tf

    from deploytool.onnx_external import copy_with_external

    out_dir = Path(out_dir)
    # onnx2tf writes back into the model file it is given (shape inference, renamed outputs): give it a copy, with
    # its external weight files, so the source — a user's file in the workspace, content-addressed — never changes.
    src = copy_with_external(Path(source.path), out_dir / "onnx2tf-input")
    name = onnx_input_name(src)
    keep = "keep_ncw_or_nchw_or_ncdhw_input_names" if source.layout == "NCHW" else \
        "keep_nwc_or_nhwc_or_ndhwc_input_names"
    kwargs: dict = {keep: [name]}
    options: dict = {"keep_input_layout": source.layout, "onnxsim": False, "signaturedefs": True}
    if dynamic:
        kwargs["output_dynamic_range_quantized_tflite"] = True
    if integer:
        calib = out_dir / "calibration.npy"
        np.save(calib, np.ascontiguousarray(calibration, dtype=np.float32))
        kwargs.update(output_integer_quantized_tflite=True, quant_type="per-channel",
                      custom_input_op_name_np_data_path=[[name, str(calib), 0.0, 1.0]],
                      input_quant_dtype="int8", output_quant_dtype="int8")
        options.update(quant_type="per-channel", calibration_samples=len(calibration))
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            # onnxsim is a separate tool (not installed); its simplifications are not needed for a correct model.
            onnx2tf.convert(input_onnx_file_path=str(src), output_folder_path=str(out_dir), non_verbose=True,
                            not_use_onnxsim=True, output_signaturedefs=True,
                            copy_onnx_input_output_names_to_tflite=True, **kwargs)
    except SystemExit:
        raise Onnx2tfError(_printed_error(printed.getvalue())) from None
    except ModuleNotFoundError as e:  # onnx2tf has one module per ONNX op it converts
        if not (e.name or "").startswith("onnx2tf.ops."):
            raise
        raise NotImplementedError(f"onnx2tf has no conversion for the ONNX op {e.name.rsplit('.', 1)[-1]}") from None
    finally:
        sys.stdout.write(printed.getvalue())  # into the conversion log
    return options


def tflite_path(source: Artifact, out_dir: Path, quantize: str) -> Path:
    """The file `run` made for `quantize` (onnx2tf names its files after the input file)."""
    return Path(out_dir) / f"{Path(source.path).stem}_{TFLITE_SUFFIX[quantize]}.tflite"
