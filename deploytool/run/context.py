"""`RunContext`: everything one run's combinations share, built once and
complete from the start — the request, the model spec, the dataset, the
workspace, each target's typed options and preflight, the sources and their
PC baselines (cached), the calibration set and the tolerances. The combination
runner, localize, bug bundles and the report read it; none of them reaches
into another's state.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, NoReturn

import numpy as np

from deploytool.artifact import Artifact, implied_signature
from deploytool.data import Dataset, load_dataset
from deploytool.data.feed import feed_sha256
from deploytool.errors import BadModelFile, DataError, DeploytoolError, Raised, StageFailed, first_line_of
from deploytool.modelfiles.signature import Signature
from deploytool.result import Combo
from deploytool.run import usermodel
from deploytool.run.baseline import Baseline, run_baseline
from deploytool.run.judge import Reference
from deploytool.run.request import MigrateRequest
from deploytool.runtimes import runtime_implementation
from deploytool.runtimes.isolated import runtime_workers
from deploytool.spec import ModelSpec, load_spec
from deploytool.tasks import get_task, infer_task
from deploytool.tolerances import source_tolerances
from deploytool.targets import Position, Preflight, RunSettings, get_target
from deploytool.value import value
from deploytool.workspace import Workspace, stable_hash

CALIBRATION_FROM_TEST = 200


@value(frozen=False)
class Source:
    framework: str
    artifact: Artifact
    baseline: Baseline

    @cached_property
    def reference(self) -> Reference:
        """The baseline as the judge takes it, read from disk once for every row of the run."""
        return self.baseline.reference()


def check_labels_fit(task: str, y: np.ndarray, scored_shape: tuple[int, ...], where: str) -> None:
    """Labels that cannot mean what the task does (float labels for a classifier, a classifier of one value,
    regression targets of another width than the output) would judge every row wrongly: one line instead (each
    task's own rule, deploytool.tasks)."""
    if any(d <= 0 for d in scored_shape):
        return  # a dimension the signature leaves open: the rows' own shape checks judge it
    get_task(task).check_labels(y, int(np.prod(scored_shape)) if scored_shape else 1, where)


def model_signature(spec: ModelSpec, user_artifact: Artifact | None) -> Signature:
    """The model's inputs and outputs before a source exists: a user's file's own (read where it entered), else the
    one a zoo model's sample shape and classes imply (its layout is each framework's; the dtypes and the output's
    size, what planning and judging ask of it, are the same)."""
    if user_artifact is not None:
        return user_artifact.signature
    return implied_signature(spec.model_input_shape, spec.num_classes)


def _task_decided(spec: ModelSpec, dataset: Dataset, sig: Signature, where: str) -> ModelSpec:
    """The spec with its task and tolerances, now that the labels are seen: a task the spec leaves open (a user's
    model without --task) is inferred from the labels and the scored output (deploytool.tasks), labels that cannot
    mean what the task does are refused in one line, and tolerances the spec leaves open are the task's (the
    quantized ones for a model computing in integers). A zoo model's manifest names both."""
    first = tuple(d or 0 for d in sig.scored_output(spec.scored_output or None).sample_shape)
    task = spec.task or infer_task(dataset.y_test if len(dataset.y_test) else None, first)
    check_labels_fit(task, dataset.y_test, first, where)
    return replace(spec, task=task,
                   tolerances=spec.tolerances or source_tolerances(get_task(task).tolerances, sig.quantized))


def _refuse_non_finite(model: str, framework: str, out: np.ndarray) -> None:
    """A user's model whose own outputs on the PC hold NaN or infinity gives every row nothing to be compared with:
    one line naming the samples, before any row is judged (and a finding filed) against them."""
    if out.dtype.kind != "f" or not len(out):
        return
    bad = np.flatnonzero(~np.isfinite(out.reshape(len(out), -1)).all(1))
    if len(bad):
        raise BadModelFile(f"{model}: your model's own outputs on the PC ({framework}) hold NaN or infinity for "
                           f"{len(bad)} of {len(out)} samples (first: sample {int(bad[0])}); rows cannot be compared "
                           "with them: check the test data against the model's inputs (ranges), or the model")


@value(frozen=False)
class RunContext:
    req: MigrateRequest
    spec: ModelSpec
    dataset: Dataset
    ws: Workspace
    user_artifact: Artifact | None  # a user's own model file (its own baseline), or None for a zoo model
    target_options: dict[str, Any]  # target name -> typed options
    preflight: dict[str, Preflight]  # target name -> what its preflight found
    calibration_set: np.ndarray
    calibration_sha256: str
    calibration_note: str
    tolerances: dict[str, dict[str, tuple[float, float]]]  # "none" / "quantized" -> metric -> (pass, fail)
    progress: bool = False
    sources: dict[str, Source] = field(default_factory=dict)
    _trained: dict[str, Artifact] = field(default_factory=dict, repr=False)
    # framework -> the exception its PC baseline raised in deploytool's own code: every row of it fails with it
    # (triaged a deploytool bug), once
    failed_sources: dict[str, BaseException] = field(default_factory=dict, repr=False)
    # target name -> runtime options its open session adds (None: no session is open)
    _session_options: dict[str, dict[str, Any]] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, req: MigrateRequest, ws: Workspace, *, targets: list[str], run: bool = True,
              progress: bool = False, stored_identity: dict[str, dict[str, str]] | None = None) -> "RunContext":
        """`run=False`: for a stored run (report, localize) — no device or browser is looked for;
        `stored_identity` then gives each target's identity as it was recorded."""

        user_artifact = None
        if usermodel.is_model_file(req.model):
            if req.test_npz is None:
                raise DataError(f"{req.model}: a model file needs its test set: pass --data test.npz "
                                "(arrays x (N,H,W,C) and y (N,)) and its preprocessing (--scale/--mean/--std)")
            opts = usermodel.UserModelOptions(req.layout, tuple(req.labels), req.scale, tuple(req.mean), tuple(req.std),
                                              req.task, req.output)
            spec, user_artifact = usermodel.resolve(Path(req.model), opts, ws)
        else:
            spec = load_spec(req.model)
        dataset = load_dataset(spec, req.data_dir, req.test_npz, limit_test=req.limit_test,
                               data_layout=req.data_layout)
        options = {t: req.options_for(t) for t in targets}
        preflight = {t: get_target(t).preflight(options[t], run=run) for t in targets}
        for t, ident in (stored_identity or {}).items():
            if t in preflight:
                preflight[t].identity = dict(ident)
        if len(dataset.x_train):
            calib, note = dataset.calibration(), ""
        else:  # a user's npz without a training split: calibrate on test samples, and say so
            calib = dataset.x_test[:CALIBRATION_FROM_TEST]
            note = (f"int8 calibrated on the first {CALIBRATION_FROM_TEST} test samples: the .npz has no x_train; "
                    "add x_train (or <input>_train for each named input) and y_train to calibrate on data the model "
                    "is not scored on")
        spec = _task_decided(spec, dataset, model_signature(spec, user_artifact), str(req.test_npz or spec.dataset))
        tolerances = {g: {**spec.tolerance_for(g), **req.tolerances} for g in ("none", "quantized")}
        return cls(req, spec, dataset, ws, user_artifact, options, preflight, calib,
                   feed_sha256(calib), note, tolerances, progress)

    # -- what rows share -----------------------------------------------------------
    def tolerance_for(self, combo: Combo) -> dict[str, tuple[float, float]]:
        return self.tolerances["quantized" if combo.quantized else "none"]

    def source_id(self, framework: str) -> str:
        """The content identity of a source model before it exists: a user's file by its bytes, a zoo
        model by everything its training depends on (manifest, data, epochs, seed, framework versions)."""

        if self.user_artifact is not None:
            return self.user_artifact.sha256
        from deploytool.train import train_key  # the zoo's training machinery: loaded for a zoo model only

        return train_key(self.spec, framework, self.dataset, self.req.epochs or self.spec.train.epochs)

    @property
    def signature(self) -> Signature:
        """The model's inputs and outputs before a source exists (model_signature)."""
        return model_signature(self.spec, self.user_artifact)

    def source_model(self, framework: str) -> Artifact:
        """The source model alone (trained once, cached), without its baseline: what conversions start from."""
        if self.user_artifact is not None:
            return self.user_artifact
        if framework not in self._trained:
            from deploytool.train import train

            self._trained[framework] = train(self.spec, framework, self.dataset, self.ws, epochs=self.req.epochs,
                                             progress=self.progress).get_artifact()
        return self._trained[framework]

    def source(self, framework: str) -> Source:
        """The source model (trained once, cached) and its PC baseline (measured once, cached)."""
        if framework in self.failed_sources:
            raise self.failed_sources[framework]
        if framework not in self.sources:
            art = self.source_model(framework)
            try:
                b = run_baseline(self.spec.name, art, self.dataset, warmup_runs=self.req.warmup_runs,
                                 latency_samples=self.req.latency_samples, threads=self.req.threads,
                                 scored=self.spec.scored_output)
            except StageFailed as e:
                self._baseline_failed(e)
            except DeploytoolError:
                raise
            except Exception as e:
                raised = Raised.of(e)
                if self.user_artifact is not None and not raised.in_own_code:
                    # the user's model raising in its own framework on this test set: the file's or the data's
                    raise BadModelFile(f"{self.req.model}: your model does not run on this test set in its own "
                                       f"runtime ({raised.name}: {raised.first_line[:200]}); check the test data "
                                       "against the model's inputs (ranges, shapes), or the model") from None
                self.failed_sources[framework] = e
                raise
            src = Source(framework, art, b)
            if self.user_artifact is not None:
                _refuse_non_finite(self.req.model, framework, src.reference.outputs)
            self.sources[framework] = src
        return self.sources[framework]

    def _baseline_failed(self, e: StageFailed) -> NoReturn:
        """A baseline that failed in its runtime: a zoo model's is that framework's rows' result (raised again); the
        user's own file failing in its own runtime is the file's problem, not a converter's or a runtime's bug: no
        row, no finding; one line with the runtime's words."""
        if self.user_artifact is None:
            raise e
        if e.status == "unsupported":  # outside what deploytool compares (a rank-0 output): the file's shape
            raise BadModelFile(f"{self.req.model}: {first_line_of(e.reason)}") from None
        if e.status == "load_failed":  # before any data: the file itself
            raise BadModelFile(f"{self.req.model}: your model does not load in its own runtime on this machine "
                               f"({first_line_of(e.reason)}); fix the model (an op the runtime lacks, a tensor too "
                               "large) and run again") from None
        raise BadModelFile(f"{self.req.model}: your model does not run on this test set in its own runtime "
                           f"({first_line_of(e.reason)}); check the test data against the model's inputs (token "
                           "ids below its vocabulary, lengths and value ranges it takes), or the model") from None

    def identity(self, target: str) -> dict[str, str]:
        pf = self.preflight.get(target)
        return dict(pf.identity) if pf else {}

    def position(self, combo: Combo) -> Position:
        return Position(device=combo.device, backend=combo.backend)

    @contextmanager
    def sessions(self) -> Iterator[None]:
        """Each target's session (what its rows share: one browser for the web rows) open around a run's
        rows, and the workers that measure in-process runtimes (one per runtime, host rows and baselines).
        Re-entrant: inside an open one (localize within migrate) the open sessions are used."""
        if self._session_options is not None:
            yield
            return

        with ExitStack() as stack:
            stack.enter_context(runtime_workers())
            opened = {}
            for name in self.preflight:
                t = get_target(name)
                opened[name] = dict(stack.enter_context(t.session(self.target_options[name], self.preflight[name])))
            self._session_options = opened
            try:
                yield
            finally:
                self._session_options = None

    def target_runtime_options(self, target: str, position: Position,
                               settings: RunSettings | None = None) -> dict[str, Any]:
        """A target's runtime options at one position, with what its open session shares. `settings` (threads,
        warm-up, latency samples) default to the request's; the sweep passes each grid point's."""
        t = get_target(target)
        options = self.target_options.get(target) or t.options()
        shared = (self._session_options or {}).get(target, {})
        return {**t.runtime_options(options, settings or self.req.settings, position), **shared}

    def runtime_options(self, combo: Combo) -> dict[str, Any]:
        return self.target_runtime_options(combo.target, self.position(combo))

    def combo_key(self, combo: Combo, host_id: str) -> str:
        """Everything the row's numbers depend on: source model and data by content, calibration set,
        the combination, and where it runs (host; the target's identity, e.g. the browser build)."""
        from dataclasses import asdict

        combo_fields = {k: v for k, v in asdict(combo).items() if v or k != "runtime"}
        ref = runtime_implementation(combo.target, combo.runtime) if combo.runtime else ""
        if ref and not ref.startswith("deploytool."):
            # which implementation measures: a plugin's runtime of this name in another run may be another one
            combo_fields["runtime_implementation"] = ref
        identity = get_target(combo.target).row_identity(self.identity(combo.target), self.position(combo))
        return stable_hash({"model": self.spec.name, "data": self.dataset.sha256,
                            "source": self.source_id(combo.framework), "calibration": self.calibration_sha256,
                            "host": host_id, "browser": identity.get("browser", ""),
                            **{k: v for k, v in identity.items() if k != "browser"},
                            **combo_fields})
