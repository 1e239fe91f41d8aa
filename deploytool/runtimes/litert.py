"""The LiteRT host runtime: a .tflite artifact in the `ai_edge_litert`
interpreter on this machine's CPU. Integer input/output tensors are quantized
and dequantized here with the tensors' own scale and zero point
(`deploytool.modelfiles.tflite_io`), so callers always pass and get float32. Models with a free
batch dimension are resized for the whole-set run; fixed-batch models (e.g.
litert-torch's) are fed at their own batch. It never compares or stores.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Mapping, Self

import numpy as np

from deploytool.artifact import Artifact
from deploytool.errors import StageFailed, first_line_of
from deploytool.data.feed import Feed
from deploytool.modelfiles.signature import match_names
from deploytool.modelfiles.tflite_io import TensorQuant, quantization_notes, signature_names, tensor_quant
from deploytool.runtimes.base import HostOptions, Outputs, Runtime, check_file_inputs
from deploytool.value import value

def _version() -> str:
    try:
        return metadata.version("ai-edge-litert")
    except metadata.PackageNotFoundError:
        return "unknown"


def _failed(e: BaseException, who: str, status: str = "runtime_failed") -> StageFailed:
    return StageFailed(status, f"{who}: {type(e).__name__}: {first_line_of(str(e))}")


@value
class LiteRTOptions(HostOptions):
    """The in-process options; `num_threads` (the interpreter's own word) is taken for `threads`."""

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> Self:
        if "threads" not in options and "num_threads" in options:
            options = {**options, "threads": options["num_threads"]}
        return super().from_dict(options)


class LiteRTRuntime(Runtime):
    name = "litert"
    owner = "google-ai-edge/LiteRT"
    dist = "ai-edge-litert"
    formats = ("tflite",)
    Options = LiteRTOptions
    options: LiteRTOptions

    @classmethod
    def import_framework(cls) -> None:
        from ai_edge_litert.interpreter import Interpreter  # noqa: F401

    def _interpreter(self, path: str, threads: int) -> Any:
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter(model_path=path, num_threads=threads)

    def _version(self) -> str:
        return _version()

    def _failed(self, e: BaseException, status: str = "runtime_failed") -> StageFailed:
        return _failed(e, f"{self.name} {self._version()}", status)

    def _load(self, artifact: Artifact) -> None:
        self._threads = self.options.threads
        try:
            self._it = self._interpreter(str(artifact.path), self._threads)
        except Exception as e:  # a corrupt flatbuffer: this combination's (final) result
            raise self._failed(e, "load_failed") from e
        self._bind(artifact)

    def _bind(self, artifact: Artifact) -> None:
        """Each named input of the artifact's signature (Artifact.signature) at its tensor (quantized where the
        tensor is), resized to each batch's shape (a sequence length the data decides); every output dequantized,
        by the source's names, its inputs checked against the signature's (check_file_inputs). The one load path."""
        signature = artifact.signature
        names = signature_names(self._it)
        ins, outs = self._it.get_input_details(), self._it.get_output_details()
        by_name_in = {names.get(int(d["index"]), d["name"]): d for d in ins}
        by_name_out = {names.get(int(d["index"]), d["name"]): d for d in outs}
        try:
            self._feeds = {src: by_name_in[m] for src, m in match_names(signature.input_names,
                                                                        list(by_name_in)).items()}
            self._fetches = {src: by_name_out[m] for src, m in match_names(signature.output_names,
                                                                           list(by_name_out)).items()}
        except KeyError as e:
            raise StageFailed("load_failed", f"{self.name} {self._version()}: {e.args[0]}") from None
        self._quant = {int(d["index"]): tensor_quant(d) for d in (*ins, *outs)}
        check_file_inputs(signature, {src: str(d["name"]) for src, d in self._feeds.items()},
                          {str(d["name"]): self._quant[int(d["index"])].spec() for d in ins})
        # what each call does, worked out once (a timed call spends nothing on it): per input, its source name, tensor
        # index, dtype and quantization (None: fed as it is); per output, its source name, index and quantization
        self._in_plan = [(src, index, np.dtype(q.dtype), q if q.quantized else None)
                         for src, index, q in self._plan(self._feeds)]
        self._out_plan = [(src, index, q if q.quantized else None) for src, index, q in self._plan(self._fetches)]
        first = next(iter(self._feeds.values()))
        open_shape = first.get("shape_signature")  # -1 where the file leaves a dimension open
        self._resizable = open_shape is not None and len(open_shape) > 0 and int(open_shape[0]) == -1
        self._fixed_batch = None if self._resizable else int(first["shape"][0])
        self._shapes: list[tuple[int, ...]] = []  # each input's shape the interpreter is allocated for now
        self._in, self._out = self._quant[self._in_plan[0][1]], self._quant[self._out_plan[0][1]]
        try:
            self._it.allocate_tensors()
        except Exception as e:
            raise self._failed(e, "load_failed") from e

    def _plan(self, tensors: dict[str, Any]) -> list[tuple[str, int, TensorQuant]]:
        return [(src, int(d["index"]), self._quant[int(d["index"])]) for src, d in tensors.items()]

    def _predict(self, x: Feed) -> Feed:
        n, it = len(x), self._it
        x = self._to_fixed_batch(x)
        arrays = [x[plan[0]] for plan in self._in_plan]
        shapes = [a.shape for a in arrays]
        if shapes != self._shapes:  # a new batch size or sequence length: resize every input, then allocate
            for (_, index, _, _), shape in zip(self._in_plan, shapes):
                it.resize_tensor_input(index, list(shape), strict=not self._resizable)
            it.allocate_tensors()
            self._shapes = shapes
        for (_, index, dtype, quant), a in zip(self._in_plan, arrays):
            it.set_tensor(index, quant.quantize(a) if quant is not None else np.ascontiguousarray(a, dtype))
        it.invoke()
        out = {src: quant.dequantize(it.get_tensor(index)) if quant is not None
               else np.asarray(it.get_tensor(index), np.float32) for src, index, quant in self._out_plan}
        return Feed(out if len(x) == n else {src: a[:n] for src, a in out.items()})

    def _run(self, inputs: Feed) -> Outputs:
        fixed = self._fixed_batch  # None exactly when the batch is resizable
        batch = self.options.batch_size if fixed is None else fixed
        notes = []
        if not self._resizable:
            notes.append(f"the model has a fixed batch of {self._fixed_batch}: the whole set ran "
                         f"{self._fixed_batch} sample(s) per invoke")
            if self._fixed_batch != 1:
                notes.append(f"latency is of a batch of {self._fixed_batch} holding one real sample")
        env = {"runtime": self.name, "version": self._version(), "num_threads": self._threads,
               "input_dtype": self._in.dtype, "output_dtype": self._out.dtype, "batch_resizable": self._resizable}
        if self._in.quantized:
            env["input_quantization"] = {"scale": self._in.scale, "zero_point": self._in.zero_point}
        if self._out.quantized:
            env["output_quantization"] = {"scale": self._out.scale, "zero_point": self._out.zero_point}
        notes += quantization_notes(*self._tensors())
        try:
            return self._measure(inputs, batch, env, notes)
        except Exception as e:
            raise self._failed(e) from e

    def _tensors(self) -> tuple[list[TensorQuant], list[TensorQuant]]:
        """(inputs, outputs) the model is fed and read by, every named one."""
        return ([self._quant[int(d["index"])] for d in self._feeds.values()],
                [self._quant[int(d["index"])] for d in self._fetches.values()])

    def _close(self) -> None:
        self._it = None
