"""Keras / SavedModel -> TFLite with `tf.lite.TFLiteConverter`: fp32, fp16
weights, dynamic-range int8, and full int8 calibrated on the training split
with float or int8 input/output tensors. It writes one .tflite file into the
directory it is given and never runs the model it made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterator

from deploytool.artifact import Artifact
from deploytool.convert._common import (Mode, Recipe, calibration_subset, dist_version, fallback, fallback_note,
                                         finish, refuse_integer_io_for_integer_inputs, saved_model_recipe)
from deploytool.convert._tf import saved_model_dir, unrolled_saved_model
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import Feed
from deploytool.errors import first_line_of
from deploytool.modelfiles.signature import SERVING, match_names, serving_signature

CONVERTER = "tf.lite.TFLiteConverter"
DIST = "tensorflow"

MODES = {
    "none": Mode("float32, no quantization"),
    "fp16": Mode("float16 weights (CPU kernels compute in float32)"),
    "dynamic": Mode("dynamic-range quantization: int8 weights, float32 input/output, activations "
                    "quantized at run time"),
    "int8": Mode("full integer int8 (weights and activations, calibrated on the training split), "
                 "float32 input/output"),
    "int8-io": Mode("full integer int8 (weights and activations, calibrated on the training split) "
                    "with int8 input/output tensors"),
}

UNSUPPORTED = {
    "uint8": "uint8/uint16 weight quantization is a TF.js mode; for TFLite use fp16, dynamic, int8 or int8-io",
    "uint16": "uint8/uint16 weight quantization is a TF.js mode; for TFLite use fp16, dynamic, int8 or int8-io",
}


def recipe(source: Artifact, quantize: str) -> Recipe:
    """TFLiteConverter.from_saved_model on the source's serving signature with `_configure`'s options."""
    lines = ["import tensorflow as tf", saved_model_recipe(source).rstrip(),
             "converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=['serving_default'])"]
    if quantize != "none":
        lines.append("converter.optimizations = [tf.lite.Optimize.DEFAULT]")
    if quantize == "fp16":
        lines.append("converter.target_spec.supported_types = [tf.float16]")
    if quantize in ("int8", "int8-io"):
        lines += ["serving = tf.saved_model.load(saved).signatures['serving_default']",
                  "names = list(serving.structured_input_signature[1])",
                  "arrays = [CALIBRATION[name] for name, _, _ in INPUTS]",
                  "def representative_dataset():",
                  "    for i in range(len(arrays[0])):",
                  "        yield dict(zip(names, [a[i:i + 1] for a in arrays]))",
                  "converter.representative_dataset = representative_dataset",
                  "converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]"]
    if quantize == "int8-io":
        lines += ["converter.inference_input_type = tf.int8", "converter.inference_output_type = tf.int8"]
    lines.append("open(OUT, 'wb').write(converter.convert())")
    return Recipe("\n".join(lines) + "\n", ("tensorflow", "keras") if source.format == "keras" else ("tensorflow",),
                  "model.tflite")


@register_converter("tflite_tf", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("keras", "tflite"), Route("saved_model", "tflite")), owner="tensorflow/tensorflow",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    import tensorflow as tf

    refuse_integer_io_for_integer_inputs(source.signature, quantize)
    options: dict = {"from": "saved_model"}
    notes: tuple[str, ...] = ()
    with tempfile.TemporaryDirectory(prefix="deploytool-tflite-") as tmp:
        saved_model = saved_model_dir(source, Path(tmp))
        loaded = tf.saved_model.load(str(saved_model))
        serving = serving_signature(loaded, str(saved_model))
        # the serving signature only: a SavedModel's other signatures would make a multi-signature file
        converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model), signature_keys=[SERVING])
        _configure(converter, quantize, source, calibration, serving, options)
        try:
            flatbuffer = converter.convert()
        except Exception as e:
            if "TensorList" not in str(e):
                raise
            flatbuffer, notes = _tensor_list_alternative(e, source, Path(tmp), saved_model, quantize, calibration,
                                                         serving, options)
        del loaded
    path = Path(out_dir) / "model.tflite"
    path.write_bytes(flatbuffer)
    return finish(source, path, "tflite", quantize, CONVERTER, dist_version(DIST), options, notes)


def _tensor_list_alternative(e: Exception, source: Artifact, tmp: Path, saved_model: Path, quantize: str,
                             calibration: Any, serving: Any, options: dict[str, Any]) -> tuple[bytes, tuple[str, ...]]:
    """A recurrent loop over TensorLists, which TFLite's converter lowers only with SELECT_TF_OPS. A Keras model of
    fixed steps is unrolled (the same weights, no loop: runs everywhere); otherwise the TFLite guide's way for
    TensorList ops, SELECT_TF_OPS with the lists not lowered: the file then needs the Flex delegate (LiteRT's
    Python wheel and TensorFlow's own interpreter have it; tfjs-tflite and a benchmark_model without Flex lack
    it), and the row says so. The first failure is recorded as the fallback's (a coverage gap TFLite documents)."""
    import tensorflow as tf

    unrolled = unrolled_saved_model(source, tmp)
    if unrolled is not None:
        converter = tf.lite.TFLiteConverter.from_saved_model(str(unrolled))
        options["recurrent_layers"] = "unrolled"
        _configure(converter, quantize, source, calibration, serving, options)
        return converter.convert(), ("TFLite's converter cannot lower Keras 3's recurrent loop without SELECT_TF_OPS "
                                     f"({first_line_of(str(e))[:140]}); converted with the recurrent layers unrolled "
                                     "over their fixed steps (the same weights, no loop)",)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model), signature_keys=[SERVING])
    _configure(converter, quantize, source, calibration, serving, options)
    base = list(converter.target_spec.supported_ops or [tf.lite.OpsSet.TFLITE_BUILTINS])
    converter.target_spec.supported_ops = [*base, tf.lite.OpsSet.SELECT_TF_OPS]
    converter._experimental_lower_tensor_list_ops = False
    try:
        flatbuffer = converter.convert()
    except Exception:
        raise e from None  # the alternative fails too: the row fails with the first error
    ops = [o.name for o in base] + ["SELECT_TF_OPS"]
    options.update(supported_ops=ops, lower_tensor_list_ops=False, needs_flex=True,
                   fallback=fallback("tflite_tf", "TFLiteConverter.convert() with builtin ops only", e,
                                     f"supported_ops = {ops} and _experimental_lower_tensor_list_ops = False"))
    return flatbuffer, ("the model's TensorList loop needs TensorFlow ops (SELECT_TF_OPS): the file needs the Flex "
                        "delegate, which LiteRT's Python wheel and TensorFlow's own interpreter have and tfjs-tflite "
                        "lacks", fallback_note(options["fallback"]))


def _configure(converter: Any, quantize: str, source: Artifact, calibration: Any, serving: Any,
               options: dict[str, Any], positional: bool = False) -> None:
    """The quantization `quantize` asks for, on either kind of converter; what was set goes into `options`.
    `positional`: a converter of a traced function takes its calibration inputs as a list, in the source's
    input order (a SavedModel's signature takes them by name)."""
    import tensorflow as tf

    if quantize != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        options["optimizations"] = ["DEFAULT"]
    if quantize == "fp16":
        converter.target_spec.supported_types = [tf.float16]
        options["supported_types"] = ["float16"]
    if quantize in ("int8", "int8-io"):
        samples = calibration_subset(calibration, f"TFLite {quantize}")
        if positional or len(samples.names) == 1:  # one input needs no names
            def representative_dataset() -> Iterator[Any]:
                for i in range(len(samples)):
                    yield [a[i : i + 1] for a in samples.arrays()]
        else:  # every input from the user's data, by the serving signature's names
            names = match_names(samples.names, list(serving.structured_input_signature[1]))

            def representative_dataset() -> Iterator[Any]:
                for i in range(len(samples)):
                    yield {names[n]: a[i : i + 1] for n, a in samples.items()}

        converter.representative_dataset = representative_dataset
        # Only integer kernels: a float fallback op would silently make it a hybrid model.
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        options.update(supported_ops=["TFLITE_BUILTINS_INT8"], calibration_samples=len(samples))
    if quantize == "int8-io":
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
        options.update(inference_input_type="int8", inference_output_type="int8")
