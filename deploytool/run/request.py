"""`MigrateRequest`: what the user asked `migrate` for, as a value. It is
stored with the run (`to_json`) and read back for `report`/`localize`
(`from_json`, which also upgrades requests stored before targets had their own
options)."""

from __future__ import annotations

import math
from dataclasses import asdict, field, fields
from pathlib import Path
from typing import Any

from deploytool import tasks
from deploytool.errors import UnknownOption
from deploytool.run.usermodel import is_model_file
from deploytool.targets import RunSettings, get_target
from deploytool.value import value


@value(frozen=False)
class MigrateRequest:
    model: str = "lenet5"
    frameworks: tuple[str, ...] = ("all",)
    formats: tuple[str, ...] = ("all",)
    quantize: tuple[str, ...] = ("all",)
    targets: tuple[str, ...] = ("host",)
    # target name -> that target's options (checked by the target's typed Options), e.g.
    # {"web": {"backends": ["wasm", "cpu"]}, "android": {"devices": ["emulator-5554"], "delegate": "xnnpack"}}
    target_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    runtimes: tuple[str, ...] = ()  # runtime names, or "all"; empty = each (target, format)'s default
    data_dir: Path | None = None
    test_npz: Path | None = None
    epochs: int | None = None
    threads: int = 1
    warmup_runs: int = 10
    latency_samples: int | None = None
    timeout_s: float = 600.0
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    run_id: str | None = None
    fresh: bool = False
    limit_test: int | None = None
    localize: bool = False  # cut failing rows layer by layer to find where they go wrong
    # a user's own model file: what the model cannot tell about its input
    layout: str | None = None
    data_layout: str | None = None  # how the .npz stores x: NHWC / NCHW; None = NHWC, or NCHW when unambiguous
    labels: tuple[str, ...] = ()
    scale: float = 1.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    task: str | None = None  # classification / regression / raw; None: from the manifest, or the labels and outputs
    output: str | None = None  # the output a classifier is scored on; None: the one of per-class scores
    # the model's weights are random (an untrained export, an atlas architecture): a quantized row's drift from
    # the baseline is then what quantizing such a model does, noted and not filed (deploytool.bugs.triage)
    random_weights: bool = False

    def __post_init__(self) -> None:
        # Files by absolute path: a stored request means the same from any directory.

        for name in ("data_dir", "test_npz"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, Path(value).expanduser().absolute())
        if is_model_file(self.model) or self.model.endswith(".toml"):
            self.model = str(Path(self.model).expanduser().absolute())
        self.check()

    @property
    def settings(self) -> RunSettings:
        return RunSettings(self.threads, self.warmup_runs, self.latency_samples, self.timeout_s)

    def options_for(self, target: str) -> Any:
        """The target's typed options (unknown keys refused)."""

        return get_target(target).options(self.target_options.get(target))

    def check(self) -> None:
        """Numbers a run cannot mean anything with; the CLI refuses them first, a library caller here."""
        problems = []
        if self.threads < 1:
            problems.append(f"threads={self.threads} (must be >= 1)")
        if self.task not in (None, *tasks.names()):
            problems.append(f"task={self.task!r} (must be one of {', '.join(tasks.names())}, or None to infer it)")
        if self.data_layout not in (None, "NHWC", "NCHW"):
            problems.append(f"data_layout={self.data_layout!r} (must be NHWC, NCHW or None)")
        if self.warmup_runs < 0:
            problems.append(f"warmup_runs={self.warmup_runs} (must be >= 0)")
        if self.latency_samples is not None and self.latency_samples < 1:
            problems.append(f"latency_samples={self.latency_samples} (must be >= 1, or None for all)")
        if self.epochs is not None and self.epochs < 1:
            problems.append(f"epochs={self.epochs} (must be >= 1, or None for the manifest's)")
        if not (self.timeout_s > 0 and self.timeout_s != float("inf")):
            problems.append(f"timeout_s={self.timeout_s} (must be a positive number of seconds)")
        if self.limit_test is not None and self.limit_test < 1:
            problems.append(f"limit_test={self.limit_test} (must be >= 1)")
        if not (math.isfinite(self.scale) and self.scale != 0):
            problems.append(f"scale={self.scale} (must be a finite non-zero number)")
        if not all(math.isfinite(v) for v in self.mean):
            problems.append(f"mean={list(self.mean)} (must be finite)")
        if not all(math.isfinite(v) and v != 0 for v in self.std):
            problems.append(f"std={list(self.std)} (must be finite and non-zero)")
        if len(set(self.labels)) != len(self.labels):
            problems.append(f"labels={list(self.labels)} (class names must differ)")
        if problems:
            raise UnknownOption("invalid request: " + "; ".join(problems))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}

    describe = to_json

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "MigrateRequest":
        d = _upgrade(dict(d))
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("data_dir", "test_npz"):
            if kw.get(k):
                kw[k] = Path(kw[k])
        for k in ("frameworks", "formats", "quantize", "targets", "runtimes", "labels", "mean", "std"):
            if k in kw:
                kw[k] = tuple(kw[k])
        if "tolerances" in kw:
            kw["tolerances"] = {m: tuple(v) for m, v in kw["tolerances"].items()}
        return cls(**kw)


def _upgrade(d: dict[str, Any]) -> dict[str, Any]:
    """A request stored before targets had their own options: web/android flags move under target_options."""
    opts = {t: dict(v) for t, v in (d.get("target_options") or {}).items()}
    if "backends" in d:
        opts.setdefault("web", {})["backends"] = list(d.pop("backends"))
    android = {k: d.pop(k) for k in ("devices", "delegate", "benchmark_binary") if k in d}
    if android:
        opts.setdefault("android", {}).update(android)
    d["target_options"] = opts
    return d
