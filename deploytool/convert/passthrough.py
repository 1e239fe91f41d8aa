"""A user's model that is already in the asked format (a .tflite, an .onnx at
--quantize none): copied as it is, so every artifact lives in its own
directory with its own artifact.json (an .onnx with the external weight files
it names). Nothing is converted or checked here;
the runtime that loads it is the judge.
"""

from __future__ import annotations

from pathlib import Path

from deploytool import __version__
from deploytool.artifact import Artifact
from deploytool.convert._common import Mode, finish
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import Feed
from deploytool.modelfiles.onnx_external import copy_with_external

CONVERTER = "copy"
DIST = "deploytool"

MODES = {"none": Mode("the given model, unchanged")}

UNSUPPORTED = {
    "fp16": "a .tflite model is already converted; it cannot be re-quantized here",
    "dynamic": "a .tflite model is already converted; it cannot be re-quantized here",
    "int8": "a .tflite model is already converted; it cannot be re-quantized here",
    "int8-io": "a .tflite model is already converted; it cannot be re-quantized here",
}


@register_converter("passthrough", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("onnx", "onnx", then="onnx_quant"), Route("tflite", "tflite")), copies=True)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    src = Path(source.path)
    if not src.is_file():
        raise FileNotFoundError(f"{src} does not exist or is not a file")
    path = copy_with_external(src, Path(out_dir), f"model{src.suffix}")  # an .onnx keeps its external weights
    return finish(source, path, source.format, quantize, CONVERTER, __version__, {"copied_from": str(src)})
