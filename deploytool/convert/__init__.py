"""Conversion and quantization: which converter turns which source into which
format with which quantization (`plan`), and doing it (`convert`). The routes
live in one table, each converter in its own module; this module imports no
heavy library (the converter modules import theirs inside their functions).
It never caches, trains or runs models: the caller gives an empty directory
and gets back an `Artifact` written there.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import numpy as np

from deploytool.artifact import Artifact, content_hash
from deploytool.convert import (
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
from deploytool.convert._common import Mode
from deploytool.errors import StageFailed, UnknownOption

# "tflite-onnx2tf" is TFLite made by a second converter (onnx2tf, through ONNX), so that two converters of
# one source can be run side by side; for an ONNX model plain "tflite" is already onnx2tf's.
FORMATS = ("tflite", "tfjs", "onnx", "tfjs-layers", "tflite-onnx2tf")
QUANTIZE_WORDS = ("none", "fp16", "dynamic", "int8", "int8-io", "uint8", "uint16")
SOURCE_FORMATS = ("keras", "saved_model", "torch", "onnx", "tflite")
ARTIFACT_FORMAT = {"tflite": "tflite", "tfjs": "tfjs_graph", "onnx": "onnx", "tfjs-layers": "tfjs_layers",
                   "tflite-onnx2tf": "tflite"}

# (source format, user's format word) -> (exporter, quantizer). The exporter
# makes the fp32 model; the quantizer, when there is one, does every other
# mode on the exporter's output. A module alone does all of its modes itself.
_ROUTES: dict[tuple[str, str], tuple[ModuleType, ModuleType | None]] = {
    ("keras", "tflite"): (tflite_tf, None),
    ("saved_model", "tflite"): (tflite_tf, None),
    ("keras", "tfjs"): (tfjs, None),
    ("saved_model", "tfjs"): (tfjs, None),
    ("keras", "onnx"): (onnx_tf, onnx_quant),
    ("saved_model", "onnx"): (onnx_tf, onnx_quant),
    ("torch", "onnx"): (onnx_torch, onnx_quant),
    ("torch", "tflite"): (tflite_torch, None),
    ("onnx", "onnx"): (passthrough, onnx_quant),
    ("onnx", "tflite"): (tflite_onnx2tf, None),
    ("onnx", "tfjs"): (tfjs_onnx2tf, None),
    ("tflite", "tflite"): (passthrough, None),
}

# (source format, user's format word) -> (first, then): `first` makes an intermediate model at
# --quantize none, and `then` does every one of its modes from that model.
_THROUGH: dict[tuple[str, str], tuple[ModuleType, ModuleType]] = {
    ("torch", "tflite-onnx2tf"): (onnx_torch, tflite_onnx2tf),
}

# Where a pair has no route at all, the reason a user reads: for the pair, else for the source.
_NO_PAIR = {
    ("keras", "tflite-onnx2tf"): "tflite-onnx2tf is the second TFLite converter for PyTorch models; for Keras "
                                 "use tflite",
    ("saved_model", "tflite-onnx2tf"): "tflite-onnx2tf is the second TFLite converter for PyTorch models; for a "
                                       "SavedModel use tflite",
    ("onnx", "tflite-onnx2tf"): "for an ONNX model --format tflite is already made by onnx2tf; use tflite",
}
_NO_ROUTE = {
    "torch": "no converter here goes from PyTorch to TF.js; use tflite, tflite-onnx2tf or onnx",
    "tflite": "a .tflite model is already converted; only --format tflite --quantize none applies",
}


# Formats no source here can reach, and why (checked before the per-source reasons).
_NO_FORMAT = {
    "tfjs-layers": "TF.js layers models come only from tf.keras (Keras 2) models; the zoo and .keras files are "
                   "Keras 3, whose layers-model output TF.js 4.22 cannot load (it rejects `batch_shape`); "
                   "use --format tfjs (a graph model)",
}


@dataclass(frozen=True)
class Plan:
    """What `convert` will do for one (source, format, quantize) request."""

    source_format: str
    fmt: str  # the user's format word: tflite, tfjs, onnx
    quantize: str  # the user's quantize word
    artifact_format: str  # tflite, tfjs_graph, onnx
    steps: tuple[str, ...]  # converter modules run in order, e.g. ("onnx_tf", "onnx_quant")
    mode: str  # what is really done, in words
    note: str | None = None  # set when what is done differs from what the word asks for

    @property
    def converter(self) -> str:
        return "+".join(self.steps)


def _module_name(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[-1]


def _check_words(source_format: str, fmt: str, quantize: str | None) -> None:
    if source_format not in SOURCE_FORMATS:
        raise UnknownOption(f"unknown model format {source_format!r}; model formats are {', '.join(SOURCE_FORMATS)}")
    if fmt not in FORMATS:
        raise UnknownOption(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)} (or all)")
    if quantize is not None and quantize not in QUANTIZE_WORDS:
        raise UnknownOption(f"unknown quantization {quantize!r}; use one of {', '.join(QUANTIZE_WORDS)} (or all)")


def _route_modules(source_format: str, fmt: str) -> tuple[ModuleType, ...]:
    """The converter modules of one pair's route (none when there is no route)."""
    return tuple(m for m in _ROUTES.get((source_format, fmt)) or _THROUGH.get((source_format, fmt)) or ()
                 if m is not None)


def _modes(source_format: str, fmt: str) -> dict[str, tuple[tuple[ModuleType, ...], Mode]]:
    """user word -> (modules to run, mode) for one pair; empty when there is no route."""
    through = _THROUGH.get((source_format, fmt))
    if through is not None:
        return {word: (through, mode) for word, mode in through[1].MODES.items()}
    route = _ROUTES.get((source_format, fmt))
    if route is None:
        return {}
    exporter, quantizer = route
    table: dict[str, tuple[tuple[ModuleType, ...], Mode]] = {}
    for word, mode in exporter.MODES.items():
        table[word] = ((exporter,), mode)
    if quantizer is not None:
        for word, mode in quantizer.MODES.items():
            if word != "none":
                # A user's own ONNX model needs no export step before quantization.
                table[word] = ((exporter, quantizer) if exporter is not passthrough else (quantizer,), mode)
    return table


def plan(source_format: str, fmt: str, quantize: str) -> Plan:
    _check_words(source_format, fmt, quantize)
    table = _modes(source_format, fmt)
    if not table:
        why = _NO_FORMAT.get(fmt) or _NO_PAIR.get((source_format, fmt)) or \
            _NO_ROUTE.get(source_format, f"no converter from {source_format} to {fmt}")
        raise StageFailed("unsupported", why)
    if quantize not in table:
        why = {k: v for m in _route_modules(source_format, fmt) for k, v in getattr(m, "UNSUPPORTED", {}).items()
               }.get(quantize)
        have = ", ".join(w for w in QUANTIZE_WORDS if w in table)
        raise StageFailed("unsupported", f"--quantize {quantize} does not exist for {source_format} -> {fmt}"
                                         + (f": {why}" if why else "") + f" (available: {have})")
    modules, mode = table[quantize]
    return Plan(source_format=source_format, fmt=fmt, quantize=quantize, artifact_format=ARTIFACT_FORMAT[fmt],
                steps=tuple(_module_name(m) for m in modules), mode=mode.description, note=mode.note)


def quantize_modes(source_format: str, fmt: str) -> tuple[str, ...]:
    """The words `--quantize all` expands to for this pair: each distinct mode once,
    never a word that only maps onto another word's mode."""
    _check_words(source_format, fmt, None)
    table = _modes(source_format, fmt)
    return tuple(w for w in QUANTIZE_WORDS if w in table and not table[w][1].alias)


def _version(dist: str) -> str:
    from importlib import metadata  # here: a run that converts nothing does not pay its import

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _failed(module: ModuleType, e: BaseException) -> StageFailed:
    lines = [s for s in str(e).strip().splitlines() if s.strip()]
    first = lines[0].strip()[:300] if lines else ""
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    return StageFailed("conversion_failed", f"{module.CONVERTER} {_version(module.DIST)}: {text}")


def _run_step(module: ModuleType, source: Artifact, quantize: str, out_dir: Path,
              calibration: np.ndarray | None) -> Artifact:
    try:
        return module.convert(source, quantize, out_dir, calibration)
    except StageFailed:
        raise
    except Exception as e:  # any converter error is this combination's result, not a crash of the run
        raise _failed(module, e) from e


def convert(source: Artifact, fmt: str, quantize: str, out_dir: Path,
            calibration: np.ndarray | None = None) -> Artifact:
    """Convert `source` to `fmt` with `quantize` into `out_dir`; writes out_dir/artifact.json.

    `calibration`: float32 training-split samples in the source's layout; the
    int8 modes need it (a few hundred spread over it are used).
    """
    p = plan(source.format, fmt, quantize)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    modules = _modes(source.format, fmt)[quantize][0]
    if len(modules) == 1:
        art = _run_step(modules[0], source, quantize, out_dir, calibration)
    else:
        exporter, quantizer = modules
        with tempfile.TemporaryDirectory(prefix="deploytool-export-") as tmp:
            fp32 = _run_step(exporter, source, "none", Path(tmp), None)
            art = _run_step(quantizer, fp32, quantize, out_dir, calibration)
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


__all__ = ["ARTIFACT_FORMAT", "FORMATS", "Plan", "QUANTIZE_WORDS", "SOURCE_FORMATS", "convert", "plan",
           "quantize_modes"]
