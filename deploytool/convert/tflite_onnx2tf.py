"""ONNX -> TFLite with onnx2tf (a second TFLite converter beside the
TensorFlow and litert-torch ones): fp32, fp16 weights, dynamic-range int8,
and full int8 calibrated on the training split with float or int8
input/output tensors. onnx2tf rebuilds the graph in TensorFlow and hands it
to the TFLite converter; the input keeps the ONNX model's layout and a free
batch dimension. Never runs the model it made beyond the calibration pass.
Every mode of one source and calibration set is served by one onnx2tf run
(`_onnx2tf.shared_run`); a float mode whose calibrated run failed gets its
own uncalibrated run, as it would alone, so an int8 failure never hides it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from deploytool.artifact import Artifact
from deploytool.convert import _onnx2tf, tflite_tf
from deploytool.convert._common import (Mode, Recipe, calibration_subset, dist_version, finish,
                                         refuse_integer_io_for_integer_inputs)
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import CHANNELS_LAST_OUTPUTS, Feed
from deploytool.modelfiles.signature import Dims
from deploytool.modelfiles.tflite_io import tflite_tensors

CONVERTER = _onnx2tf.CONVERTER
DIST = _onnx2tf.DIST

MODES = {
    "none": Mode("float32, no quantization"),
    "fp16": Mode("float16 weights (CPU kernels compute in float32)"),
    "dynamic": Mode("dynamic-range quantization: int8 weights, float32 input/output, activations "
                    "quantized at run time"),
    "int8": Mode("full integer int8 (per-channel weights, activations calibrated on the training split), "
                 "float32 input/output"),
    "int8-io": Mode("full integer int8 (per-channel weights, activations calibrated on the training split) "
                    "with int8 input/output tensors"),
}

UNSUPPORTED = tflite_tf.UNSUPPORTED  # the same words: uint8/uint16 are TF.js modes whichever converter makes the TFLite


def recipe(source: Artifact, quantize: str) -> Recipe:
    """onnx2tf.convert as `_onnx2tf.run` calls it (calibrated for the int8 modes), then the file for `quantize`."""
    code = _onnx2tf.run_recipe(source, quantize in ("int8", "int8-io")) + \
        f"shutil.copyfile('onnx2tf/input_{_onnx2tf.TFLITE_SUFFIX[quantize]}.tflite', OUT)\n"
    return Recipe(code, ("numpy", *_onnx2tf.RECIPE_IMPORTS), "model.tflite")


@register_converter("tflite_onnx2tf", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("onnx", "tflite"), Route("torch", "tflite-onnx2tf", after="onnx_torch")), owner="PINTO0309/onnx2tf",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    refuse_integer_io_for_integer_inputs(source.signature, quantize)
    integer = quantize in ("int8", "int8-io")
    if integer:
        files, options = _onnx2tf.shared_run(source, calibration_subset(calibration, f"onnx2tf {quantize}"))
    else:
        files, options = _float_files(source, calibration)
        # Calibration does not touch the float files (see _onnx2tf): they do not claim it.
        for key in ("quant_type", "calibration_samples"):
            options.pop(key, None)
    name = f"model_{_onnx2tf.TFLITE_SUFFIX[quantize]}.tflite"  # as onnx2tf names it for a model.onnx
    if quantize not in files:
        raise FileNotFoundError(f"onnx2tf finished without writing its {name.replace('model_', '', 1)} file")
    path = Path(out_dir) / "model.tflite"
    shutil.copyfile(files[quantize], path)
    options["file"] = name
    if quantize == "int8-io":
        options.update(inference_input_type="int8", inference_output_type="int8")
    outs: dict[str, Dims] = {n: tuple(q.shape[1:]) for n, q in tflite_tensors(str(path)).outputs.items()}
    moved = _onnx2tf.channels_last_names(source, outs)
    if moved:
        options[CHANNELS_LAST_OUTPUTS] = moved
    return finish(source, path, "tflite", quantize, CONVERTER, dist_version(DIST), options,
                  notes=_onnx2tf.layout_notes(source, outs))


def _float_files(source: Artifact, calibration: Feed | None) -> tuple[dict[str, Path], dict]:
    """The calibrated run's files when there is a calibration set (the int8 modes will ask for that run too),
    else, or when that run failed, an uncalibrated run's."""
    if calibration is not None and len(calibration):
        try:
            return _onnx2tf.shared_run(source, calibration_subset(calibration, "onnx2tf"))
        except Exception:  # the integer step may be what failed: the float files may still be made without it
            pass
    return _onnx2tf.shared_run(source, None)
