"""A test double of a *converter*, not of any real part: "fake_onnx" is a second Keras -> ONNX converter that lets
the real tf2onnx (the `onnx_tf` step) export the model and then, like a buggy converter, adds `OFFSET` to the first
value of the graph's output (an Add node in front of it), in its "none" and "int8" modes alike. It shows that a new converter is one module: its step
and route are registered by the decorator and its format word, "onnx-fake" (an ONNX artifact, so every target that
runs ONNX runs it), by `register_format`; no file of deploytool names it. Importing it registers it; a subprocess
(the conversion worker a run starts included) gets it with `DEPLOYTOOL_PLUGINS=tests.fake_converter`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from deploytool.data.feed import Feed
from deploytool import __version__
from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.convert import FORMATS, Format, Mode, Route, register_converter, register_format, unregister_converter

OFFSET = 100.0
NAME = "fake_onnx"
FORMAT = Format("onnx-fake", "onnx", help="a test double: tf2onnx's ONNX with 100 added to output 0")

_registration = register_converter(
    NAME, converter="fake-onnx", dist="deploytool",
    modes={"none": Mode(f"float32, with {OFFSET:g} added to output 0 (a test double's bug)"),
           # an int8 route far off the real int8 routes: the peers rule (deploytool.bugs.triage.peer_outliers)
           "int8": Mode(f"float32 still (it quantizes nothing), with {OFFSET:g} added to output 0 (a test double's "
                        "bug)")},
    routes=(Route("keras", FORMAT.word, after="onnx_tf"),))


@_registration
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source.path))
    graph = model.graph
    out = graph.output[0]
    width = out.type.tensor_type.shape.dim[-1].dim_value
    if not width:
        raise ValueError(f"fake-onnx: the last dimension of output {out.name!r} is not known")
    inner = f"{out.name}_before_fake"
    for node in graph.node:  # whatever wrote the output now writes `inner`; the Add writes the output
        node.output[:] = [inner if name == out.name else name for name in node.output]
        node.input[:] = [inner if name == out.name else name for name in node.input]
    offset = np.zeros(width, np.float32)
    offset[0] = OFFSET
    graph.initializer.append(numpy_helper.from_array(offset, "fake_offset"))
    graph.node.append(helper.make_node("Add", [inner, "fake_offset"], [out.name], name="fake_offset_add"))
    path = Path(out_dir) / "model.onnx"
    onnx.save(model, str(path))
    return replace(source, path=path, format="onnx", quantize=quantize, converter="fake-onnx",
                   converter_version=__version__, options={"offset": OFFSET}, source_sha256=source.sha256,
                   sha256=content_hash(path),
                   size_bytes=size_on_disk(path), notes=())


def register() -> None:
    """Register it again (after `unregister`); importing the module has registered it once."""
    register_format(FORMAT)
    _registration(convert)


def unregister() -> None:
    unregister_converter(NAME)
    FORMATS.unregister(FORMAT.word)


register_format(FORMAT)
