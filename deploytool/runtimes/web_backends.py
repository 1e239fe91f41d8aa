"""The backends the browser page offers, per format's library: constants the web target's flags and help need,
in a module that imports nothing (deploytool.runtimes.web, which runs them, starts an HTTP server and a browser)."""

from __future__ import annotations

BACKENDS = ("wasm", "cpu", "webgl", "webgpu")
# the backends each format's library offers in the page (TFLite: tfjs-tflite's own wasm)
FORMAT_BACKENDS = {"tfjs_graph": BACKENDS, "onnx": ("wasm", "webgpu"), "tflite": ("wasm",)}

__all__ = ["BACKENDS", "FORMAT_BACKENDS"]
