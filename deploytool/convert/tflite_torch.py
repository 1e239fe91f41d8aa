"""PyTorch (.pt2 ExportedProgram) -> TFLite with litert-torch: fp32, fp16 and
dynamic-range int8 weights (litert-torch's ai-edge-quantizer recipes), and
full int8 through PT2E static quantization calibrated on the training split.
The input stays NCHW. litert-torch cannot lower a free batch dimension
through `flatten`, so the model is converted at batch 1 (the runtime then
runs it one sample at a time). Never runs the model it made beyond the
calibration pass.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from deploytool.artifact import Artifact
from deploytool.convert._common import (
    TORCH_SAMPLES_RECIPE, Mode, Recipe, calibration_subset, dist_version, finish, torch_calibration_batches, torch_samples,
)
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import Feed
from deploytool.modelfiles.pt2 import load_program

CONVERTER = "litert-torch"
DIST = "litert-torch"

_INT8 = ("full integer int8 through PT2E static quantization (per-channel symmetric weights, activations "
         "calibrated on the training split) with int8 input/output tensors")

MODES = {
    "none": Mode("float32, no quantization"),
    "fp16": Mode("float16 weights (ai-edge-quantizer fp16 recipe)"),
    "dynamic": Mode("dynamic-range quantization: int8 per-channel weights, float32 input/output "
                    "(ai-edge-quantizer dynamic recipe)"),
    "int8": Mode(_INT8, note="litert-torch's static int8 model has int8 input and output tensors (there is no "
                             "float-I/O variant), so it is the int8-io model; the runtime quantizes inputs and "
                             "dequantizes outputs with the tensors' scale and zero point"),
    "int8-io": Mode(_INT8, alias=True),
}

UNSUPPORTED = {
    "uint8": "uint8/uint16 weight quantization is a TF.js mode; for TFLite use fp16, dynamic or int8",
    "uint16": "uint8/uint16 weight quantization is a TF.js mode; for TFLite use fp16, dynamic or int8",
}


def _pt2e_int8(module: Any, sample: Any, samples: Feed) -> Any:
    import torch
    from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
    from litert_torch.quantize.quant_config import QuantConfig
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True,
                                                                             is_dynamic=False))
    prepared = prepare_pt2e(torch.export.export(module, sample).module(), quantizer)
    with torch.no_grad():
        # The batch-1 export guards its batch size: calibrate one sample at a time.
        for i in range(len(samples)):
            prepared(*torch_calibration_batches(samples, i))
    return convert_pt2e(prepared, fold_quantize=False), QuantConfig(pt2e_quantizer=quantizer)


def recipe(source: Artifact, quantize: str) -> Recipe:
    """litert_torch.convert at batch 1 with the quantization `convert` uses for `quantize`."""
    lines = ["import os", "os.environ.setdefault('LITERT_TORCH_SHOW_PROGRESS', 'n')", TORCH_SAMPLES_RECIPE.rstrip(),
             "import litert_torch", "from litert_torch.generative.quantize import quant_recipes",
             "module, sample = program.module(), samples(1)"]
    if quantize == "none":
        lines.append("edge = litert_torch.convert(module, sample)")
    elif quantize in ("fp16", "dynamic"):
        fn = "full_fp16_recipe" if quantize == "fp16" else "full_dynamic_recipe"
        lines.append(f"edge = litert_torch.convert(module, sample, quant_config=quant_recipes.{fn}())")
    else:
        lines += ["from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config",
                  "from litert_torch.quantize.quant_config import QuantConfig",
                  "from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e",
                  "quantizer = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, "
                  "is_dynamic=False))",
                  "prepared = prepare_pt2e(torch.export.export(module, sample).module(), quantizer)",
                  "arrays = [CALIBRATION[name] for name, _, _ in INPUTS]",
                  "with torch.no_grad():",
                  "    for i in range(len(arrays[0])):",
                  "        prepared(*(torch.from_numpy(a[i:i + 1]) for a in arrays))",
                  "edge = litert_torch.convert(convert_pt2e(prepared, fold_quantize=False), sample, "
                  "quant_config=QuantConfig(pt2e_quantizer=quantizer))"]
    lines.append("edge.export(OUT)")
    return Recipe("\n".join(lines) + "\n", ("litert-torch", "torch", "torchao", "ai-edge-litert"), "model.tflite")


@register_converter("tflite_torch", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("torch", "tflite"),), owner="google-ai-edge/litert-torch",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    os.environ.setdefault("LITERT_TORCH_SHOW_PROGRESS", "n")
    import litert_torch
    from litert_torch.generative.quantize import quant_recipes

    module = load_program(source.path).module()
    sample = torch_samples(source, calibration, 1)
    options: dict = {"batch": 1}
    if quantize == "none":
        edge = litert_torch.convert(module, sample)
    elif quantize == "fp16":
        edge = litert_torch.convert(module, sample, quant_config=quant_recipes.full_fp16_recipe())
        options["recipe"] = "full_fp16_recipe"
    elif quantize == "dynamic":
        edge = litert_torch.convert(module, sample, quant_config=quant_recipes.full_dynamic_recipe())
        options["recipe"] = "full_dynamic_recipe (int8, channelwise)"
    else:
        samples = calibration_subset(calibration, f"litert-torch {quantize}")
        quantized, quant_config = _pt2e_int8(module, sample, samples)
        edge = litert_torch.convert(quantized, sample, quant_config=quant_config)
        options.update(quantizer="PT2EQuantizer symmetric per-channel static", calibration_samples=len(samples),
                       inference_input_type="int8", inference_output_type="int8")
    path = Path(out_dir) / "model.tflite"
    edge.export(str(path))
    return finish(source, path, "tflite", quantize, CONVERTER, dist_version(DIST), options)
