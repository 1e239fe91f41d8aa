"""The converter registries. Each converter module registers its step with `register_converter` on its
`convert` function, naming the routes it serves; the format words, source formats and quantization words a
user types are registered beside them (`formats.py` has the built-in ones). `deploytool.convert` plans and runs
conversions from these and nothing else, so a new converter, built in or from a plugin, is one module.

A route is (source format, format word) -> the steps run for each quantization word:

- `Route(source, fmt)`: the registering step does every one of its modes alone;
- `Route(source, fmt, then=Q)`: as above, and step Q does each of its other modes on this step's float32
  output (a step that `copies` its input is then left out: a user's own ONNX model needs no export);
- `Route(source, fmt, after=F)`: step F makes an intermediate model at --quantize none first, and the
  registering step does each of its modes from that.

Nothing here imports a framework: a step's function imports its own when it runs.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Callable, Mapping

from deploytool.artifact import Artifact
from deploytool.convert._common import Mode, Recipe
from deploytool.data.feed import Feed
from deploytool.registry import Registry, load_plugins
from deploytool.value import value

ConvertFn = Callable[[Artifact, str, Path, "Feed | None"], Artifact]


@value
class Step:
    """One converter step: a module's `convert(source, quantize, out_dir, calibration) -> Artifact`."""

    name: str  # as a plan's steps name it: the module's name, "tflite_tf"
    converter: str  # the tool, for people and error lines: "tf.lite.TFLiteConverter"
    dist: str  # the distribution whose version is the converter's
    modes: Mapping[str, Mode]  # quantization word -> what this step really does for it
    unsupported: Mapping[str, str]  # quantization word -> why this step has no such mode
    run: ConvertFn
    copies: bool = False  # the step copies its input unchanged (a user's file already in the asked format)
    owner: str = ""  # the project where the tool's faults are reported ("" for deploytool's own steps)
    # the step's call as standalone Python (a bundle's reproduce_convert.py), for a source and a quantization
    recipe: Callable[[Artifact, str], Recipe] | None = None


@value
class Route:
    source: str  # source format: keras, saved_model, torch, onnx, tflite
    fmt: str  # the user's format word
    then: str | None = None  # a quantizing step for this step's other modes (see the module docstring)
    after: str | None = None  # a step run first, at --quantize none


@value
class Format:
    """A format word a user types (--format), and the artifact format it makes."""

    word: str
    artifact: str  # tflite, tfjs_graph, onnx, ...
    help: str = ""  # a few words for --help, when the word alone does not say it
    unreachable: str | None = None  # why no source here reaches it (checked before any route)
    refused: Mapping[str, str] = field(default_factory=dict)  # source format -> why it has no route to it


@value
class SourceFormat:
    """A source model's format (an Artifact's format: a framework's own model or a user's file)."""

    name: str
    no_route: str | None = None  # why any format word it has no route to is refused, when there is one reason


@value
class _Routed:
    step: str  # the registering step
    route: Route


STEPS: Registry[Step] = Registry("converter")
FORMATS: Registry[Format] = Registry("format")
SOURCE_FORMATS: Registry[SourceFormat] = Registry("model format")
# quantization word -> what it asks for, in a few words; the order is the order --quantize lists them
QUANTIZE_WORDS: Registry[str] = Registry("quantization")
_ROUTES: dict[tuple[str, str], _Routed] = {}


def register_converter(name: str, *, converter: str, dist: str, modes: Mapping[str, Mode],
                       unsupported: Mapping[str, str] | None = None, routes: tuple[Route, ...] = (),
                       copies: bool = False, owner: str = "",
                       recipe: Callable[[Artifact, str], Recipe] | None = None) -> Callable[[ConvertFn], ConvertFn]:
    """The decorator a converter module puts on its `convert`: registers the step `name` and its routes.
    `owner`: the GitHub project where the tool's bugs are reported (findings address it)."""

    def decorate(fn: ConvertFn) -> ConvertFn:
        STEPS.add(name, Step(name=name, converter=converter, dist=dist, modes=dict(modes),
                             unsupported=dict(unsupported or {}), run=fn, copies=copies, owner=owner,
                             recipe=recipe))
        for r in routes:
            _ROUTES[(r.source, r.fmt)] = _Routed(name, r)
        return fn

    return decorate


def unregister_converter(name: str) -> None:
    """Remove step `name` and the routes it registered (a test's double)."""
    STEPS.unregister(name)
    for key in [k for k, v in _ROUTES.items() if v.step == name]:
        del _ROUTES[key]


def register_format(fmt: Format) -> Format:
    return FORMATS.add(fmt.word, fmt)


def register_source_format(source: SourceFormat) -> SourceFormat:
    return SOURCE_FORMATS.add(source.name, source)


def route(source_format: str, fmt: str) -> tuple[Step, ...] | None:
    """The steps of one pair's route in the order they run (`then`/`after` included), or None."""
    load_plugins()
    routed = _ROUTES.get((source_format, fmt))
    if routed is None:
        return None
    r, own = routed.route, STEPS[routed.step]
    if r.after is not None:
        return (STEPS[r.after], own)
    if r.then is not None:
        return (own, STEPS[r.then])
    return (own,)


def modes(source_format: str, fmt: str) -> dict[str, tuple[tuple[Step, ...], Mode]]:
    """quantization word -> (steps to run, mode) for one pair; empty when there is no route."""
    steps = route(source_format, fmt)
    if steps is None:
        return {}
    r = _ROUTES[(source_format, fmt)].route
    if r.after is not None:
        return {word: (steps, mode) for word, mode in steps[1].modes.items()}
    table: dict[str, tuple[tuple[Step, ...], Mode]] = {word: ((steps[0],), mode) for word, mode in steps[0].modes.items()}
    if r.then is not None:
        exporter, quantizer = steps
        for word, mode in quantizer.modes.items():
            if word != "none":
                table[word] = ((quantizer,) if exporter.copies else (exporter, quantizer), mode)
    return table


__all__ = ["FORMATS", "QUANTIZE_WORDS", "SOURCE_FORMATS", "STEPS", "ConvertFn", "Format", "Route", "SourceFormat",
           "Step", "modes", "register_converter", "register_format", "register_source_format", "route",
           "unregister_converter"]
