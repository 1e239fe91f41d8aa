"""PyTorch (.pt2 ExportedProgram) -> ONNX with `torch.onnx.export` (the
dynamo exporter, which takes the ExportedProgram as it is, so the batch
dimension stays dynamic and the input stays NCHW). Only fp32 is made here;
ONNX quantization is `onnx_quant`'s job. Never runs the model it made.
A worker exports one source once: the ONNX modes and the onnx2tf ones all
start from the same fp32 file, so later ones get a copy of it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from deploytool.artifact import Artifact, content_hash
from deploytool.convert._common import (TORCH_SAMPLES_RECIPE, Mode, Recipe, check_onnx, dist_version, finish,
                                         torch_samples)
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import Feed
from deploytool.modelfiles import pt2

CONVERTER = "torch.onnx"
DIST = "torch"
# The dynamo exporter's own opset; asking for 17 makes it down-convert through
# a fallback path, which is one more place for a converter bug to hide.
OPSET = 18

MODES = {"none": Mode("float32, no quantization")}
# Which quantization words ONNX lacks, and why, is onnx_quant.UNSUPPORTED: one list for every ONNX exporter.


def load_program(path: Path) -> Any:
    """The ExportedProgram of a .pt2 file, read by deploytool.modelfiles.pt2: never torch.export.load, which
    unpickles the archive's sample inputs with weights_only=False."""

    return pt2.load_program(path)


# (source bytes, input shape, torch version) -> this worker's export of it (a temporary file, removed at exit)
_exports: dict[tuple, Path] = {}
_exports_dir: Any = None
_exports_lock = threading.Lock()


def _export(source: Artifact, path: Path, calibration: Any = None) -> None:
    import logging

    import torch

    # The exporter warns once per missing torchvision op on every export; it is noise for our models.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)

    program = load_program(source.path)
    sig = source.signature
    inputs, outputs = list(sig.input_names), list(sig.output_names)
    torch.onnx.export(program, torch_samples(source, calibration, 2), str(path), dynamo=True, opset_version=OPSET,
                      input_names=inputs, output_names=outputs, external_data=False, verbose=False)
    check_onnx(path)


def recipe(source: Artifact, quantize: str) -> Recipe:
    """torch.onnx.export of the ExportedProgram as `_export` calls it."""
    sig = source.signature
    inputs, outputs = list(sig.input_names), list(sig.output_names)
    code = (TORCH_SAMPLES_RECIPE + f"torch.onnx.export(program, samples(2), OUT, dynamo=True, opset_version={OPSET}, "
            f"input_names={inputs!r}, output_names={outputs!r}, external_data=False, verbose=False)\n")
    return Recipe(code, ("torch", "onnx", "onnxscript"), "model.onnx")


@register_converter("onnx_torch", converter=CONVERTER, dist=DIST, modes=MODES,
                    routes=(Route("torch", "onnx", then="onnx_quant"),), owner="pytorch/pytorch",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    global _exports_dir
    path = Path(out_dir) / "model.onnx"
    key = (content_hash(source.path), tuple(source.input_shape), dist_version(DIST))
    with _exports_lock:
        made = _exports.get(key)
        if made is None or not made.is_file():
            _export(source, path, calibration)
            if _exports_dir is None:
                _exports_dir = tempfile.TemporaryDirectory(prefix="deploytool-onnx-export-")  # removed at exit
            made = _exports[key] = Path(_exports_dir.name) / f"{key[0][:16]}-{len(_exports)}.onnx"
            shutil.copyfile(path, made)
        else:
            print(f"torch.onnx: using this worker's export of {key[0][:12]}", flush=True)
            shutil.copyfile(made, path)
    return finish(source, path, "onnx", quantize, CONVERTER, dist_version(DIST),
                  {"opset": OPSET, "dynamo": True, "input_names": list(source.signature.input_names),
                   "output_names": list(source.signature.output_names)})
