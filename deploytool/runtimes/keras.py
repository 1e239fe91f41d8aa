"""The PC baseline runtime for Keras-born models: a `.keras` file or a
SavedModel directory, run by TensorFlow itself through one traced function
(the serving path), batch 1 for latency and larger batches for outputs, with
the same intra-op and inter-op thread count as the PyTorch runtime (one by
default). TensorFlow sizes its pools once per process: a process where it ran
already with other counts runs with those, and the row's environment and notes
say so."""

from __future__ import annotations

from typing import Any


from deploytool.artifact import Artifact
from deploytool.data.feed import Feed
from deploytool.errors import BadModelFile, first_line_of
from deploytool.modelfiles.signature import flatten_outputs, match_names, serving_signature
from deploytool.modelfiles.tf_graph import check_graph_def
from deploytool.proc.quiet import import_tensorflow
from deploytool.proc.threads import not_pinned_note, pin_tensorflow
from deploytool.runtimes.base import HostOptions, Outputs, Runtime, per_sample


class KerasRuntime(Runtime):
    name = "keras"
    preload = ("tensorflow",)
    owner = "keras-team/keras"
    dist = "keras"

    @classmethod
    def owner_for(cls, fmt: str) -> str:
        return "tensorflow/tensorflow" if fmt == "saved_model" else cls.owner
    formats = ("keras", "saved_model")
    options: HostOptions

    @classmethod
    def import_framework(cls) -> None:
        import_tensorflow()
        import keras  # noqa: F401

    def _load(self, artifact: Artifact) -> None:
        tf = import_tensorflow()
        self._threads = pin_tensorflow(self.options.threads)

        try:
            if artifact.format == "keras":
                import keras

                model = keras.saving.load_model(artifact.path, compile=False)
            else:
                # Kept for the runtime's life: the signature only holds weak references to the
                # variables, which the loaded object owns; once it is collected, every call fails.
                self._loaded = tf.saved_model.load(str(artifact.path))
                serving_signature(self._loaded, str(artifact.path))  # refused in one line when it has none
        except Exception as e:  # a user's file can fail in many ways; all mean the same to them
            raise BadModelFile(f"{artifact.path}: cannot be loaded as a {artifact.format} model "
                               f"({first_line_of(str(e), 200)}); check the file or re-export it") from None
        self._tf = tf
        self._bind(artifact, model if artifact.format == "keras" else None)
        # the traced serving graph holds only what a model may (no file, I/O or native op) before its first call
        check_graph_def(self._fn.get_concrete_function().graph.as_graph_def(), str(artifact.path))

    def _bind(self, artifact: Artifact, model: Any) -> None:  # a keras.Model (untyped), or None: a SavedModel
        """One traced function taking every named input of the artifact's signature (Artifact.signature) at
        its dtype (open dimensions stay open) and returning every output by the source's names. The one load path."""
        tf, sig = self._tf, artifact.signature
        specs = {t.name: tf.TensorSpec([None, *t.sample_shape], tf.as_dtype(t.dtype), name=t.name) for t in sig.inputs}
        if model is not None:
            # source names, in the model's input order (one input needs no pairing: a model not yet built has none)
            order = list(sig.input_names) if len(sig.inputs) == 1 else \
                list(match_names(sig.input_names, [str(i.name).split(":")[0] for i in model.inputs]))
            names = list(sig.output_names)

            def call(**x: Any) -> Any:
                out = model([x[n] for n in order] if len(order) > 1 else x[order[0]], training=False)
                return dict(zip(names, flatten_outputs(out, names)))  # a dict, a list or one tensor
        else:
            serving = serving_signature(self._loaded, str(artifact.path))
            feeds = match_names(sig.input_names, list(serving.structured_input_signature[1]))
            fetches = match_names(sig.output_names, list(serving.structured_outputs))

            def call(**x: Any) -> Any:
                out = serving(**{feeds[n]: v for n, v in x.items()})
                return {n: out[fetches[n]] for n in fetches}
        # one output comes back as its tensor, not a dict of one: a call's packing is part of what is timed
        one = sig.output_names[0] if len(sig.outputs) == 1 else None
        self._fn = tf.function(lambda *args: call(**dict(zip(specs, args)))[one] if one else call(**dict(zip(specs, args))),
                               input_signature=list(specs.values()), reduce_retracing=True)
        self._names, self._one = list(specs), one

    def _predict(self, x: Feed) -> Feed:
        out = self._fn(*[self._tf.constant(x[n]) for n in self._names])
        return Feed({n: per_sample(n, v.numpy()) for n, v in ({self._one: out} if self._one else out).items()})

    def _run(self, inputs: Feed) -> Outputs:
        facts = self._threads
        env = {"runtime": "tensorflow", "version": self._tf.__version__, "intra_op_threads": facts["intra_op_threads"],
               "inter_op_threads": facts["inter_op_threads"], "threads_requested": facts["threads_requested"]}
        note = not_pinned_note(facts)
        return self._measure(inputs, self.options.batch_size, env,
                             [f"TensorFlow {note}"] if note else None)

    def _close(self) -> None:
        self._fn = self._loaded = None
