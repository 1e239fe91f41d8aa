"""PyTorch (.pt2 ExportedProgram) -> ONNX with `torch.onnx.export` (the
dynamo exporter, which takes the ExportedProgram as it is, so the batch
dimension stays dynamic and the input stays NCHW). Only fp32 is made here;
ONNX quantization is `onnx_quant`'s job. Never runs the model it made.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert._common import Mode, check_onnx, dist_version, finish

CONVERTER = "torch.onnx"
DIST = "torch"
# The dynamo exporter's own opset; asking for 17 makes it down-convert through
# a fallback path, which is one more place for a converter bug to hide.
OPSET = 18

MODES = {"none": Mode("float32, no quantization")}
# Which quantization words ONNX lacks, and why, is onnx_quant.UNSUPPORTED: one list for every ONNX exporter.


def load_program(path: Path):
    """The ExportedProgram of a .pt2 file, read by deploytool.pt2: never torch.export.load, which
    unpickles the archive's sample inputs with weights_only=False."""
    from deploytool import pt2

    return pt2.load_program(path)


def convert(source: Artifact, quantize: str, out_dir: Path, calibration: np.ndarray | None) -> Artifact:
    import logging

    import torch

    # The exporter warns once per missing torchvision op on every export; it is noise for our models.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)

    program = load_program(source.path)
    sample = torch.zeros((2, *source.input_shape), dtype=torch.float32)
    path = Path(out_dir) / "model.onnx"
    torch.onnx.export(program, (sample,), str(path), dynamo=True, opset_version=OPSET,
                      input_names=["input"], output_names=["output"], external_data=False, verbose=False)
    check_onnx(path)
    return finish(source, path, "onnx", quantize, CONVERTER, dist_version(DIST),
                  {"opset": OPSET, "dynamo": True, "input_name": "input", "output_name": "output"})
