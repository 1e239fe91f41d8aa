"""The PC baseline: the trained model run in its own framework over the whole
test set. Every migrated model is compared against this. Saved beside the
model, one folder per test set and measurement settings (baselines/KEY/:
baseline.json + per-sample outputs and latencies as .npy), and reused while
the model, the data and the settings are unchanged: a user switching between
two test sets of one model measures each baseline once. baseline.json beside
the model is a copy of the latest one measured."""

from __future__ import annotations

import json
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import Artifact
from deploytool.data import Dataset
from deploytool.data.feed import OutputLayout, split
from deploytool.provenance import host_facts
from deploytool.run.compare import Costs
from deploytool.run.judge import Reference
from deploytool.runtimes.base import Outputs
from deploytool.runtimes.isolated import load_and_run
from deploytool.value import value
from deploytool.workspace import stable_hash

# How the baseline is measured; a cached one measured otherwise (in the migrate process) is measured again.
MEASURED_HOW = "own-process-v1"


@value(frozen=False)
class Baseline:
    model: str
    framework: str
    artifact_sha256: str
    dataset_sha256: str
    accuracy: float
    num_samples: int
    outputs_path: str
    latency_samples_path: str
    latency: dict[str, float]
    throughput_sps: float | None
    memory_bytes: dict[str, float]
    load_ms: float | None
    first_inference_ms: float | None
    size_bytes: int
    provenance: dict[str, Any] = field(default_factory=dict)
    settings_key: str = ""
    cached: bool = False
    # a model with a signature: its outputs side by side in outputs_path, [name, one sample's shape] each
    output_layout: list[list[Any]] | None = None

    def outputs(self) -> np.ndarray:
        return np.load(self.outputs_path, allow_pickle=False)

    @property
    def layout(self) -> OutputLayout | None:
        """The stored output layout as a value (JSON keeps it as lists)."""
        if self.output_layout is None:
            return None
        return tuple((str(name), tuple(int(d) for d in shape)) for name, shape in self.output_layout)

    def reference(self) -> Reference:
        """What the judge compares a row with, read here (the judge reads nothing): the outputs and the costs."""
        return Reference(self.outputs(), self.layout, Costs(self.latency["p50_ms"], self.latency["p90_ms"],
                                                           dict(self.memory_bytes), self.size_bytes))

    @property
    def predictions(self) -> np.ndarray:
        return self.outputs().argmax(1)


def _accuracy(out: Outputs, dataset: Dataset, scored: str = "") -> float:
    """Top-1 accuracy of the scored output (`scored`, else the first) against integer labels of one class per
    sample; NaN where there is none to take (no labels, regression targets, labels of a task of its own such as
    one class per pixel: that task scores the baseline beside each row, deploytool.tasks)."""
    y = dataset.y_test
    if not len(y) or y.dtype.kind not in "iu" or y.ndim != 1:
        return float("nan")
    named = split(out.outputs, out.output_layout) if out.output_layout is not None else None
    first = out.outputs if named is None else (named[scored] if scored in named else named.first)
    return float(np.mean(np.asarray(first).reshape(len(y), -1).argmax(1) == y.reshape(len(y))))


def _paths(artifact: Artifact, key: str) -> tuple[Path, Path, Path]:
    """(baseline.json, outputs .npy, latency .npy) of the baseline with settings `key`."""
    d = Path(artifact.path).parent / "baselines" / key
    return d / "baseline.json", d / "baseline_outputs.npy", d / "baseline_latency_ms.npy"


def _cached(meta: Path, key: str) -> Baseline | None:
    if not meta.exists():
        return None
    try:
        b = Baseline(**json.loads(meta.read_text()))
    except (ValueError, TypeError):  # a file an older version (or a crash mid-write) left: measure again
        return None
    if b.settings_key != key or not Path(b.outputs_path).exists() or not Path(b.latency_samples_path).exists():
        return None
    b.cached = True
    return b


def _settings_key(artifact: Artifact, dataset: Dataset, warmup_runs: int, latency_samples: int | None,
                  threads: int, scored: str = "") -> str:
    return stable_hash({"warmup_runs": warmup_runs, "latency_samples": latency_samples, "threads": threads,
                        "data": dataset.sha256, "artifact": artifact.sha256, "measured": MEASURED_HOW,
                        **({"scored": scored} if scored else {})})


def cached_baseline(artifact: Artifact, dataset: Dataset, *, warmup_runs: int = 10,
                    latency_samples: int | None = None, threads: int = 1, scored: str = "") -> Baseline | None:
    """The baseline measured before with these settings, or None."""
    return _cached_with(artifact, _settings_key(artifact, dataset, warmup_runs, latency_samples, threads, scored))


def _cached_with(artifact: Artifact, key: str) -> Baseline | None:
    # its own folder, else the latest beside the model (where versions before the folders kept it)
    return _cached(_paths(artifact, key)[0], key) or _cached(Path(artifact.path).parent / "baseline.json", key)


def run_baseline(model_name: str, artifact: Artifact, dataset: Dataset, *, warmup_runs: int = 10,
                 latency_samples: int | None = None, threads: int = 1, force: bool = False,
                 scored: str = "") -> Baseline:
    key = _settings_key(artifact, dataset, warmup_runs, latency_samples, threads, scored)
    meta, npy, lat_npy = _paths(artifact, key)
    latest = Path(artifact.path).parent / "baseline.json"
    if not force:
        b = _cached_with(artifact, key)
        if b is not None:
            return b
    meta.parent.mkdir(parents=True, exist_ok=True)
    x = dataset.feed_for(dataset.x_test, artifact)
    # Measured like every host row, in the runtime's own worker, so memory ratios compare like with like.
    out: Outputs = load_and_run("pc", artifact.format, "", artifact, x, warmup_runs=warmup_runs,
                                latency_samples=latency_samples, threads=threads)
    np.save(npy, out.outputs)
    np.save(lat_npy, out.latency_ms)
    b = Baseline(
        model=model_name, framework=artifact.framework, artifact_sha256=artifact.sha256,
        dataset_sha256=dataset.sha256, accuracy=_accuracy(out, dataset, scored),
        num_samples=len(x), outputs_path=str(npy), latency_samples_path=str(lat_npy), latency=asdict(out.latency),
        throughput_sps=out.throughput_sps, memory_bytes=out.memory_bytes, load_ms=out.load_ms,
        first_inference_ms=out.first_inference_ms, size_bytes=artifact.size_bytes,
        provenance={**host_facts(), "runtime": out.environment, "notes": list(out.notes), "dataset": dataset.name,
                    "dataset_origin": dataset.origin, "seed": artifact.options.get("seed")},
        settings_key=key,
        output_layout=[[n, list(s)] for n, s in out.output_layout] if out.output_layout is not None else None,
    )
    text = json.dumps(asdict(b), indent=2, default=float)
    meta.write_text(text)
    latest.write_text(text)
    return b
