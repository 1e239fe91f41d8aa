"""ONNX -> quantized ONNX with `onnxruntime.quantization`: dynamic int8
(weights int8, activations quantized at run time) and static int8 (QDQ,
per-channel weights, activations calibrated with MinMax on the training
split), each after `quant_pre_process` (shape inference and graph
optimization, as onnxruntime recommends). Inputs and outputs stay float32.
Never runs the model it made beyond the calibration pass.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert._common import (Mode, Recipe, calibration_subset, fallback, fallback_note, check_onnx, dist_version, finish,
                                         onnx_input_names)
from deploytool.convert.registry import register_converter
from deploytool.data.feed import Feed
from deploytool.modelfiles.signature import match_names

CONVERTER = "onnxruntime.quantization"
DIST = "onnxruntime"
CALIBRATION_BATCH = 32

MODES = {
    "dynamic": Mode("dynamic quantization: int8 weights, uint8 activations quantized at run time "
                    "(ConvInteger/MatMulInteger), float32 input/output"),
    "int8": Mode("static int8 QDQ: per-channel int8 weights, int8 activations calibrated (MinMax) on the "
                 "training split, float32 input/output"),
}

UNSUPPORTED = {
    "fp16": "no fp16 ONNX conversion is implemented (onnxconverter-common is not installed); use none, dynamic or int8",
    "int8-io": "ONNX QDQ int8 models keep float32 inputs and outputs; use int8",
    "uint8": "uint8/uint16 weight quantization is a TF.js mode; for ONNX use dynamic or int8",
    "uint16": "uint8/uint16 weight quantization is a TF.js mode; for ONNX use dynamic or int8",
}


# A model this large keeps its weights as external data through quantization: quant_pre_process writes its float
# copy as one protobuf otherwise, which cannot pass 2 GiB (a 2.15 GiB model: "Protobuf parsing failed").
EXTERNAL_DATA_FROM_BYTES = 2**30


def _external(source: Artifact) -> tuple[dict[str, Any], dict[str, Any]]:
    """quant_pre_process's and the quantizer's keywords that keep a large model's weights beside it."""
    if (source.size_bytes or 0) < EXTERNAL_DATA_FROM_BYTES:
        return {}, {}
    return ({"save_as_external_data": True, "all_tensors_to_one_file": True},
            {"use_external_data_format": True})


def recipe(source: Artifact, quantize: str) -> Recipe:
    """quant_pre_process, then quantize_dynamic or quantize_static (QDQ, per-channel, MinMax) as `convert` calls
    them (the documented alternative, skip_symbolic_shape=True, is not tried: the reproducer shows the fault)."""
    pre_kw, quant_kw = _external(source)
    lines = ["from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, "
             "QuantType, quantize_dynamic, quantize_static)",
             "from onnxruntime.quantization.shape_inference import quant_pre_process",
             "quant_pre_process(SOURCE, 'pre.onnx'" + _kwargs(pre_kw) + ")"]
    big = _kwargs(quant_kw)
    if quantize == "dynamic":
        lines.append(f"quantize_dynamic('pre.onnx', OUT, weight_type=QuantType.QInt8, per_channel=False{big})")
    else:
        lines += ["import onnx",
                  "graph = onnx.load('pre.onnx', load_external_data=False).graph",
                  "names = [i.name for i in graph.input if i.name not in {t.name for t in graph.initializer}]",
                  "arrays = [CALIBRATION[name] for name, _, _ in INPUTS]",
                  "class Reader(CalibrationDataReader):",
                  "    def __init__(self):",
                  f"        self.starts = iter(range(0, len(arrays[0]), {CALIBRATION_BATCH}))",
                  "    def get_next(self):",
                  "        i = next(self.starts, None)",
                  f"        return None if i is None else {{n: a[i:i + {CALIBRATION_BATCH}] for n, a in zip(names, arrays)}}",
                  "quantize_static('pre.onnx', OUT, Reader(), quant_format=QuantFormat.QDQ, per_channel=True, "
                  "activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, "
                  f"calibrate_method=CalibrationMethod.MinMax{big})"]
    return Recipe("\n".join(lines) + "\n", ("onnxruntime", "onnx"), "model.onnx")


def _kwargs(kw: dict[str, Any]) -> str:
    return "".join(f", {k}={v!r}" for k, v in kw.items())


def _pre_process(source: Artifact, pre: Path, pre_kw: dict, options: dict) -> tuple[str, ...]:
    """onnxruntime's quant_pre_process of the source into `pre`; where its symbolic shape inference gives up on a
    graph (a Reshape, ids), the documented way around it (without symbolic shape inference), said in `options` and
    in the note it returns. The alternative failing too fails the row with the first error."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(str(source.path), str(pre), **pre_kw)
    except Exception as e:
        try:
            quant_pre_process(str(source.path), str(pre), skip_symbolic_shape=True, **pre_kw)
        except Exception:
            raise e from None
        options["pre_process"] = "quant_pre_process(skip_symbolic_shape=True)"
        options["fallback"] = fallback("onnx_quant", "quant_pre_process(model, 'pre.onnx')", e,
                                       "quant_pre_process(model, 'pre.onnx', skip_symbolic_shape=True)")
        return (fallback_note(options["fallback"]),)
    return ()


@register_converter("onnx_quant", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED, owner="microsoft/onnxruntime",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    path = Path(out_dir) / "model.onnx"
    options: dict = {"pre_process": "quant_pre_process"}
    pre_kw, quant_kw = _external(source)
    if quant_kw:
        options["external_data"] = True
    with tempfile.TemporaryDirectory(prefix="deploytool-onnxq-") as tmp:
        pre = Path(tmp) / "pre.onnx"
        notes = _pre_process(source, pre, pre_kw, options)
        if quantize == "dynamic":
            quantize_dynamic(str(pre), str(path), weight_type=QuantType.QInt8, per_channel=False, **quant_kw)
            options.update(weight_type="QInt8", per_channel=False)
        elif quantize == "int8":
            samples = calibration_subset(calibration, "ONNX static int8")
            names = onnx_input_names(pre)
            # every model input from the user's data (by the source's names); one image array feeds the one input
            feeds = match_names(samples.names, names)

            def batch(i: int) -> dict[str, np.ndarray]:
                return {model: samples[src][i : i + CALIBRATION_BATCH] for src, model in feeds.items()}

            class Reader(CalibrationDataReader):
                def __init__(self) -> None:
                    self._batches = iter(range(0, len(samples), CALIBRATION_BATCH))

                def get_next(self) -> Any:
                    i = next(self._batches, None)
                    return None if i is None else batch(i)

            quantize_static(str(pre), str(path), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax, **quant_kw)
            options.update(quant_format="QDQ", per_channel=True, activation_type="QInt8", weight_type="QInt8",
                           calibrate_method="MinMax", calibration_samples=len(samples))
        else:
            raise ValueError(f"onnx_quant has no mode {quantize!r}")
    check_onnx(path)
    return finish(source, path, "onnx", quantize, CONVERTER, dist_version(DIST), options, notes)
