"""The onnxruntime host runtime: an .onnx artifact on the CPU execution
provider with an explicit intra-op thread count (one by default: on a busy
small machine more threads spin rather than help). Models with a symbolic
batch dimension run the whole set in large batches; fixed-batch models run
at their own batch. It never compares or stores.
"""

from __future__ import annotations

from typing import Any, Mapping, Self

import numpy as np

from deploytool.artifact import Artifact
from deploytool.data.feed import Feed
from deploytool.errors import StageFailed, first_line_of
from deploytool.modelfiles.signature import match_names, spec_of
from deploytool.runtimes.base import HostOptions, Outputs, Runtime, check_file_inputs, per_sample
from deploytool.value import value

_FLOAT_TYPES: dict[str, type[np.generic]] = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}
_TYPES: dict[str, type[np.generic]] = {**_FLOAT_TYPES, "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
          "tensor(uint8)": np.uint8, "tensor(int16)": np.int16, "tensor(bool)": np.bool_}


def _failed(version: str, e: BaseException, status: str = "runtime_failed") -> StageFailed:
    return StageFailed(status, f"onnxruntime {version}: {type(e).__name__}: {first_line_of(str(e))}")


@value
class OnnxRuntimeOptions(HostOptions):
    """The in-process options; `intra_op_num_threads` (its session's own word) is taken for `threads`."""

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> Self:
        if "threads" not in options and "intra_op_num_threads" in options:
            options = {**options, "threads": options["intra_op_num_threads"]}
        return super().from_dict(options)


def as_array(name: str, value: Any) -> np.ndarray:
    """An output as an array: a tensor as it is; a sequence of maps (scikit-learn's ZipMap: one {class:
    probability} per sample) as per-class scores in class order; anything else refused naming the output."""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            keys = sorted(value[0])
            if any(sorted(v) != keys for v in value):
                raise StageFailed("unsupported", f"output {name!r} is a sequence of maps whose keys differ between "
                                                 "samples; export the model without ZipMap (skl2onnx: options="
                                                 "{'zipmap': False})")
            return np.array([[v[k] for k in keys] for v in value], dtype=np.float32)
        raise StageFailed("unsupported", f"output {name!r} is a sequence, not a tensor; deploytool compares tensors "
                                         "(and ZipMap's per-class maps): export it as a tensor")
    return per_sample(name, value)


class OnnxRuntime(Runtime):
    name = "onnxruntime"
    owner = "microsoft/onnxruntime"
    dist = "onnxruntime"
    formats = ("onnx",)
    Options = OnnxRuntimeOptions
    options: OnnxRuntimeOptions

    @classmethod
    def import_framework(cls) -> None:
        import onnxruntime  # noqa: F401

    def _load(self, artifact: Artifact) -> None:
        import onnxruntime as ort

        self._version = ort.__version__
        self._threads = self.options.threads
        so = ort.SessionOptions()
        so.intra_op_num_threads = self._threads
        so.inter_op_num_threads = 1
        # fatal only: onnxruntime's own coloured error line would come before deploytool's, which carries its words
        ort.set_default_logger_severity(4)
        so.log_severity_level = 4
        self._so = so
        try:
            self._sess = ort.InferenceSession(str(artifact.path), so, providers=["CPUExecutionProvider"])
        except Exception as e:  # a corrupt model or an op it lacks: this combination's (final) result
            raise _failed(self._version, e, "load_failed") from e
        ins, outs = self._sess.get_inputs(), self._sess.get_outputs()
        self._bind(artifact, ins, outs)

    def _bind(self, artifact: Artifact, ins: list, outs: list) -> None:
        """Every named input of the artifact's signature (Artifact.signature) fed as its own dtype, every output
        returned by the source's names, its inputs checked against the signature's. The one load path."""
        sig = artifact.signature
        try:
            self._inputs = match_names(sig.input_names, [i.name for i in ins])
            self._outputs = match_names(sig.output_names, [o.name for o in outs])
        except KeyError as e:
            raise StageFailed("load_failed", f"onnxruntime {self._version}: {e.args[0]}") from None
        odd = [i for i in ins if i.type not in _TYPES]
        if odd:
            raise StageFailed("unsupported", f"input {odd[0].name} is {odd[0].type}; deploytool feeds float, "
                                             "integer and bool tensors")
        self._dtypes = {i.name: _TYPES[i.type] for i in ins}
        check_file_inputs(sig, self._inputs, {i.name: spec_of(i.name, self._dtypes[i.name], [
            d if isinstance(d, int) else None for d in (i.shape or ())], kind="") for i in ins})
        # what each call does, worked out once: (source name, the model's input, its dtype) per input
        self._in_plan = [(src, model, self._dtypes[model]) for src, model in self._inputs.items()]
        self._wanted = list(self._outputs.values())
        first = ins[0].shape
        self._fixed_batch = first[0] if first and isinstance(first[0], int) else None
        self._output = outs[0]
        self._dtype = _TYPES[ins[0].type]

    def _predict(self, x: Feed) -> Feed:
        n = len(x)
        x = self._to_fixed_batch(x)
        got = self._sess.run(self._wanted, {model: x[src].astype(dtype, copy=False) for src, model, dtype in self._in_plan})
        out = {src: as_array(src, a) for src, a in zip(self._outputs, got)}
        return Feed(out if len(x) == n else {src: a[:n] for src, a in out.items()})

    def _run(self, inputs: Feed) -> Outputs:
        batch = self._fixed_batch or self.options.batch_size
        notes = []
        if self._fixed_batch is not None:
            notes.append(f"the model has a fixed batch of {self._fixed_batch}: the whole set ran "
                         f"{self._fixed_batch} sample(s) per run")
        env = {"runtime": "onnxruntime", "version": self._version, "intra_op_num_threads": self._threads,
               "providers": self._sess.get_providers(), "input_dtype": np.dtype(self._dtype).name,
               "output_dtype": self._output.type, "batch_resizable": self._fixed_batch is None,
               # its own memory settings (it exposes no allocator statistics to Python)
               "cpu_mem_arena": self._so.enable_cpu_mem_arena, "mem_pattern": self._so.enable_mem_pattern}
        try:
            return self._measure(inputs, batch, env, notes)
        except Exception as e:
            raise _failed(self._version, e) from e

    def _close(self) -> None:
        self._sess = None
