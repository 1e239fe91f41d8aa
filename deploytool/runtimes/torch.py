"""The PC baseline runtime for PyTorch-born models: a `.pt2` ExportedProgram
read by deploytool.modelfiles.pt2 (no pickled code is executed), run in eager mode under
inference_mode with an explicit intra-op thread count (one by default: on a
busy small machine OpenMP spinning makes more threads slower)."""

from __future__ import annotations

from typing import Any


from deploytool.artifact import Artifact
from deploytool.data.feed import Feed, pad_batch
from deploytool.modelfiles.pt2 import fixed_batch, import_reader, load_program
from deploytool.modelfiles.signature import flatten_outputs
from deploytool.runtimes.base import HostOptions, Outputs, Runtime, per_sample


def load_exported(path: str) -> Any:
    """The nn.Module of a .pt2 file, read by deploytool.modelfiles.pt2 (never unpickles code or sample inputs)."""

    return load_program(path).module()


class TorchRuntime(Runtime):
    name = "torch"
    preload = ("torch",)
    owner = "pytorch/pytorch"
    dist = "torch"
    formats = ("torch",)
    options: HostOptions

    @classmethod
    def import_framework(cls) -> None:
        import_reader()

    def _load(self, artifact: Artifact) -> None:
        import torch

        self._torch = torch
        self._threads = self.options.threads
        torch.set_num_threads(self._threads)
        program = load_program(str(artifact.path))
        self._module = program.module()
        self._fixed_batch = fixed_batch(program)  # exported at one batch size (torch.export's default)
        sig = artifact.signature  # its named inputs, in the program's order, and outputs
        self._in_names, self._out_names = list(sig.input_names), list(sig.output_names)

    def _predict(self, x: Feed) -> Feed:
        n, fixed = len(x), self._fixed_batch
        if fixed is not None and n < fixed:  # the last batch of a set, padded to the exported size
            return self._predict(pad_batch(x, fixed))[:n]
        with self._torch.inference_mode():
            out = self._module(*[self._torch.from_numpy(x[name]) for name in self._in_names])
            outs = flatten_outputs(out, self._out_names)  # a dict, a list or one tensor
            return Feed({name: per_sample(name, o.numpy()) for name, o in zip(self._out_names, outs)})

    def _run(self, inputs: Feed) -> Outputs:
        env = {"runtime": "torch", "version": self._torch.__version__, "intra_op_threads": self._threads}
        batch, notes = self.options.batch_size, []
        if self._fixed_batch is not None:
            batch = self._fixed_batch
            notes.append(f"the program was exported at a fixed batch of {batch}: the whole set ran {batch} "
                         "sample(s) per call")
        return self._measure(inputs, batch, env, notes)
