"""TensorFlow's own TFLite interpreter (`tf.lite.Interpreter`) on the host: a
second runtime for .tflite beside LiteRT, so the two can run side by side
(`--runtime litert,tensorflow-lite`) and a difference between them tells an
interpreter fault from a converter fault. Same I/O handling as LiteRT."""

from __future__ import annotations

from typing import Any

from deploytool.proc.quiet import import_tensorflow
from deploytool.runtimes.litert import LiteRTRuntime


class TensorFlowLiteRuntime(LiteRTRuntime):
    name = "tensorflow-lite"
    preload = ("tensorflow",)
    owner = "tensorflow/tensorflow"
    dist = "tensorflow"

    @classmethod
    def import_framework(cls) -> None:
        import_tensorflow().lite.Interpreter  # noqa: B018 (tf.lite is imported lazily)

    def _interpreter(self, path: str, threads: int) -> Any:
        import warnings

        tf = import_tensorflow()
        with warnings.catch_warnings():  # its deprecation notice (in favour of LiteRT) is not the user's to act on
            warnings.simplefilter("ignore", UserWarning)
            return tf.lite.Interpreter(model_path=path, num_threads=threads)

    def _version(self) -> str:
        from importlib import metadata

        return metadata.version("tensorflow")
