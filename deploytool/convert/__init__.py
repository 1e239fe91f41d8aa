"""Conversion and quantization: which converter turns which source into which
format with which quantization (`plan`), and doing it (`convert`). Each
converter is its own module, registering its step and routes with
`register_converter` (registry.py); the words a user types are registered in
formats.py. This module imports every converter module and no heavy library
(the converter modules import theirs inside their functions). It never
caches, trains or runs models: the caller gives an empty directory and gets
back an `Artifact` written there.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import numpy as np

from deploytool.artifact import Artifact, Plan, content_hash

# the built-in words (formats.py) and every converter module: importing one registers what it has (registry.py)
from deploytool.convert import (  # noqa: F401
    formats,
    onnx_quant,
    onnx_tf,
    onnx_torch,
    passthrough,
    tfjs,
    tfjs_onnx2tf,
    tflite_onnx2tf,
    tflite_tf,
    tflite_torch,
)
from deploytool.convert._common import Mode, refuse_integer_io_for_integer_inputs  # noqa: F401 (the planner's)
from deploytool.convert.registry import (
    FORMATS,
    QUANTIZE_WORDS,
    SOURCE_FORMATS,
    Format,
    Route,
    SourceFormat,
    Step,
    modes,
    register_converter,
    register_format,
    register_source_format,
    route,
    unregister_converter,
)
from deploytool.data.feed import Feed, as_feed
from deploytool.errors import Raised, StageFailed, ToolFailed, UnknownOption, first_line_of


class Converter(Protocol):
    """What the pipeline calls to convert: this module's `convert` in a worker (`isolated.IsolatedConverter`),
    the run's per-framework workers (`lanes.ConversionLanes`), or in-process."""

    def convert(self, source: Artifact, fmt: str, quantize: str, out_dir: Path,
                calibration: Feed | None = None) -> Artifact: ...


def artifact_format(fmt: str) -> str:
    """The artifact format a format word makes: tflite-onnx2tf -> tflite, tfjs -> tfjs_graph."""
    return FORMATS[fmt].artifact


def _check_words(source_format: str, fmt: str, quantize: str | None) -> None:
    if source_format not in SOURCE_FORMATS:
        raise UnknownOption(f"unknown model format {source_format!r}; model formats are {', '.join(SOURCE_FORMATS)}")
    if fmt not in FORMATS:
        raise UnknownOption(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)} (or all)")
    if quantize is not None and quantize not in QUANTIZE_WORDS:
        raise UnknownOption(f"unknown quantization {quantize!r}; use one of {', '.join(QUANTIZE_WORDS)} (or all)")


def plan(source_format: str, fmt: str, quantize: str) -> Plan:
    _check_words(source_format, fmt, quantize)
    table = modes(source_format, fmt)
    if not table:
        f = FORMATS[fmt]
        why = f.unreachable or f.refused.get(source_format) or SOURCE_FORMATS[source_format].no_route or \
            f"no converter from {source_format} to {fmt}"
        raise StageFailed("unsupported", why)
    if quantize not in table:
        detail = {k: v for step in route(source_format, fmt) or () for k, v in step.unsupported.items()}.get(quantize)
        have = ", ".join(w for w in QUANTIZE_WORDS if w in table)
        raise StageFailed("unsupported", f"--quantize {quantize} does not exist for {source_format} -> {fmt}"
                                         + (f": {detail}" if detail else "") + f" (available: {have})")
    steps, mode = table[quantize]
    return Plan(source_format=source_format, fmt=fmt, quantize=quantize, artifact_format=artifact_format(fmt),
                steps=tuple(step.name for step in steps), mode=mode.description, note=mode.note)


def quantize_modes(source_format: str, fmt: str) -> tuple[str, ...]:
    """The words `--quantize all` expands to for this pair: each distinct mode once,
    never a word that only maps onto another word's mode."""
    _check_words(source_format, fmt, None)
    table = modes(source_format, fmt)
    return tuple(w for w in QUANTIZE_WORDS if w in table and not table[w][1].alias)


def _version(dist: str) -> str:
    from importlib import metadata  # here: a run that converts nothing does not pay its import

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _failed(step: Step, e: BaseException) -> StageFailed:
    """The row's result for step `step` raising `e`: the tool's words, and `e` itself as evidence for triage."""
    first = first_line_of(str(e))
    # deploytool's reading of a tool's failure speaks in the tool's words; anything else keeps its class
    text = first if isinstance(e, ToolFailed) and first else f"{type(e).__name__}: {first}" if first else type(e).__name__
    return StageFailed("conversion_failed", f"{step.converter} {_version(step.dist)}: {text}", Raised.of(e))


def _run_step(step: Step, source: Artifact, quantize: str, out_dir: Path,
              calibration: Feed | None) -> Artifact:
    try:
        return step.run(source, quantize, out_dir, calibration)
    except StageFailed:
        raise
    except Exception as e:  # any converter error is this combination's result, not a crash of the run
        raise _failed(step, e) from e


# Where a two-step conversion keeps the input of its second step when that step failed (or fell back to an
# alternative): the bug bundle's reproduce_convert.py calls the step on it.
KEPT_STEP_INPUT = "failed-step-input"


def _keep_step_input(art: Artifact, out_dir: Path) -> None:
    from deploytool.modelfiles.onnx_external import copy_with_external

    keep = Path(out_dir) / KEPT_STEP_INPUT
    keep.mkdir(parents=True, exist_ok=True)
    path = Path(art.path)
    if path.is_dir():
        shutil.copytree(path, keep / path.name, dirs_exist_ok=True)
        kept = keep / path.name
    else:
        kept = copy_with_external(path, keep)
    replace(art, path=kept).save(keep / "artifact.json")


# A TFLite file is a FlatBuffer, which its 32-bit offsets hold to 2 GiB; and what a float32 model's weights take in a
# file at each quantization (fp16 halves them; dynamic-range and int8 keep one byte a weight).
FLATBUFFER_LIMIT_BYTES = 2**31
WEIGHT_SHARE = {"none": 1.0, "fp16": 0.5, "dynamic": 0.25, "int8": 0.25, "int8-io": 0.25}


def refuse_oversized(source: Artifact, fmt: str, quantize: str) -> None:
    """A TFLite file the source's weights cannot fit in (a 2.15 GiB ONNX model at float32: onnx2tf took 22 GB of
    memory before the kernel killed it) is refused before any converter runs, in one line naming what would fit."""
    if artifact_format(fmt) != "tflite" or not source.size_bytes:
        return
    estimate = source.size_bytes * WEIGHT_SHARE.get(quantize, 1.0)
    if estimate <= FLATBUFFER_LIMIT_BYTES:
        return
    fits = [q for q, share in WEIGHT_SHARE.items() if source.size_bytes * share <= FLATBUFFER_LIMIT_BYTES]
    raise StageFailed("unsupported", f"a TFLite file is a FlatBuffer of at most 2 GiB; this model's "
                                     f"{source.size_bytes / 2**30:.3g} GiB make about {estimate / 2**30:.3g} GiB at "
                                     f"--quantize {quantize}" + (f": --quantize {' or '.join(fits)} would fit, or run it as ONNX"
                                                                 if fits else ": run it as ONNX"))


def convert(source: Artifact, fmt: str, quantize: str, out_dir: Path,
            calibration: Feed | np.ndarray | None = None) -> Artifact:
    """Convert `source` to `fmt` with `quantize` into `out_dir`; writes out_dir/artifact.json.

    `calibration`: training-split samples in the source's layout, the model's named inputs (one array: a
    single-array model's, data.feed.as_feed); the int8 modes need it (a few hundred spread over it are used).
    """
    calibration = None if calibration is None else as_feed(calibration)
    p = plan(source.format, fmt, quantize)
    refuse_oversized(source, fmt, quantize)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = modes(source.format, fmt)[quantize][0]
    if len(steps) == 1:
        art = _run_step(steps[0], source, quantize, out_dir, calibration)
    else:
        exporter, quantizer = steps
        with tempfile.TemporaryDirectory(prefix="deploytool-export-") as tmp:
            fp32 = _run_step(exporter, source, "none", Path(tmp), None)
            try:
                art = _run_step(quantizer, fp32, quantize, out_dir, calibration)
            except StageFailed:
                _keep_step_input(fp32, out_dir)  # a bug bundle reproduces the failing step from its own input
                raise
            if art.options.get("fallback"):
                _keep_step_input(fp32, out_dir)
        art = replace(art, converter=f"{fp32.converter} + {art.converter}",
                      converter_version=f"{fp32.converter_version} + {art.converter_version}",
                      options={**art.options, "exported_with": {"converter": fp32.converter,
                                                                "version": fp32.converter_version,
                                                                **fp32.options}})
    notes = tuple(art.notes) + ((p.note,) if p.note and p.note not in art.notes else ())
    art = replace(art, quantize=quantize, source_sha256=source.sha256 or content_hash(source.path), notes=notes,
                  options={"mode": p.mode, **art.options})
    art.save(out_dir / "artifact.json")
    return art


__all__ = ["KEPT_STEP_INPUT", "FORMATS", "QUANTIZE_WORDS", "SOURCE_FORMATS", "Converter", "Format", "Mode", "Plan", "Route", "SourceFormat",
           "Step", "artifact_format", "convert", "plan", "quantize_modes", "register_converter", "register_format",
           "register_source_format", "unregister_converter"]
