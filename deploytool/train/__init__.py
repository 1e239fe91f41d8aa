"""Training on the PC: builds the manifest's architecture in Keras or PyTorch,
trains it seeded with the manifest's hyperparameters in a spawned process
pinned to a thread count (the same for both frameworks: deploytool.proc.threads),
measures what the seed studies measured on the training side (seconds per
epoch, peak RSS, CPU utilisation, the threads used, per-epoch loss and
accuracy, final test accuracy) and saves the model as an `Artifact` in the
workspace, cached by a content hash of everything that affects it.

It never converts, compares or reports.
"""

from __future__ import annotations

import json
from dataclasses import asdict, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.data import Dataset
from deploytool.errors import UnknownOption
from deploytool.proc.threads import cpu_percent
from deploytool.provenance import host_facts, package_version
from deploytool.spec import FRAMEWORKS, ModelSpec
from deploytool.train.worker import TrainWorker
from deploytool.value import value
from deploytool.workspace import Workspace, fresh_dir, stable_hash

if TYPE_CHECKING:
    from deploytool.train.worker import TrainWorker

FRAMEWORK_PACKAGES = {"keras": ("tensorflow", "keras"), "torch": ("torch",)}
FILE_NAMES = {"keras": "model.keras", "torch": "model.pt2"}


@value(frozen=False)
class TrainResult:
    model: str
    framework: str
    key: str
    epochs: int
    seconds_per_epoch: list[float]
    test_accuracy: float
    peak_rss_bytes: float  # the training process's peak during the fit
    cpu_utilisation_percent: float  # process CPU time / wall time; 100 = one core busy
    artifact: dict[str, Any]
    dataset_sha256: str
    provenance: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    # per epoch: {"loss", "accuracy" (training, running over the epoch), "test_accuracy"}; [] in older train.json
    history: list[dict[str, float]] = field(default_factory=list)
    peak_rss_delta_bytes: float | None = None  # the peak above the process's RSS when the fit began
    busy_threads: int | None = None  # threads that each did >= 1% of the fit's CPU time (deploytool.proc.threads)

    def get_artifact(self) -> Artifact:
        return Artifact.from_json(self.artifact)


def train_key(spec: ModelSpec, framework: str, dataset: Dataset, epochs: int, threads: int = 1) -> str:
    versions = {p: package_version(p) for p in FRAMEWORK_PACKAGES[framework]}
    # Thread counts change the order of float reductions: another count is another model. (Models trained
    # before threads were pinned, Keras with TF's default of one thread per core, have keys without it.)
    # The training data alone: the same model serves any test set or subset (--test-samples) of it.
    return stable_hash({"spec": spec.content_hash(), "data": dataset.train_sha256 or dataset.sha256, "framework": framework,
                        "epochs": epochs, "seed": spec.train.seed, "versions": versions, "threads": threads})


def find_trained(spec: ModelSpec, framework: str, dataset: Dataset, ws: Workspace,
                 epochs: int | None = None, threads: int = 1) -> TrainResult | None:
    epochs = epochs or spec.train.epochs
    meta = ws.model_dir(spec.name, framework, train_key(spec, framework, dataset, epochs, threads)) / "train.json"
    if not meta.exists():
        return None
    result = TrainResult(**json.loads(meta.read_text()))
    result.cached = True
    # the model file beside train.json, wherever the workspace now is (a moved or copied workspace still works)
    result.artifact = {**result.artifact, "path": str(meta.parent / FILE_NAMES[framework])}
    return result


def train(spec: ModelSpec, framework: str, dataset: Dataset, ws: Workspace, epochs: int | None = None,
          progress: bool = True, threads: int = 1, worker: "TrainWorker | None" = None) -> TrainResult:
    """Train (or reuse the cached model for exactly these inputs) in a spawned process pinned to `threads`
    intra-op and inter-op threads; `worker` (same framework and threads) trains several models in one process."""

    if framework not in FRAMEWORKS:
        raise UnknownOption(f"unknown framework {framework!r}; choose one of {', '.join(FRAMEWORKS)}")
    if framework not in spec.frameworks:
        raise UnknownOption(f"{spec.source}: model {spec.name} is not declared for {framework} "
                            f"(model.frameworks = {list(spec.frameworks)})")
    if worker is not None and (worker.framework, worker.threads) != (framework, threads):
        raise ValueError(f"a {worker.framework} worker with {worker.threads} threads cannot train {framework} "
                         f"with {threads}")
    epochs = epochs or spec.train.epochs
    cached = find_trained(spec, framework, dataset, ws, epochs, threads)
    if cached is not None:
        return cached
    key = train_key(spec, framework, dataset, epochs, threads)
    out = fresh_dir(ws.model_dir(spec.name, framework, key))
    if worker is None:
        with TrainWorker(framework, threads) as one_off:
            fitted = one_off.fit(spec, dataset, epochs, out / FILE_NAMES[framework], progress)
    else:
        fitted = worker.fit(spec, dataset, epochs, out / FILE_NAMES[framework], progress)
    path = Path(fitted["path"])
    artifact = Artifact(path=path, format=framework, framework=framework, layout=fitted["layout"],
                        input_shape=tuple(fitted["input_shape"]), num_outputs=spec.num_classes, converter=framework,
                        converter_version=package_version(FRAMEWORK_PACKAGES[framework][-1]) or "",
                        options={"epochs": epochs, **asdict(spec.train)},
                        sha256=content_hash(path), size_bytes=size_on_disk(path))
    artifact.save(out / "artifact.json")
    memory = fitted["memory"]
    result = TrainResult(
        model=spec.name, framework=framework, key=key, epochs=epochs, seconds_per_epoch=fitted["seconds"],
        test_accuracy=float(np.mean(fitted["test_logits"].argmax(1) == dataset.y_test)),
        peak_rss_bytes=max(v for k, v in memory.items() if "delta" not in k) if memory else 0.0,
        cpu_utilisation_percent=cpu_percent(fitted["cpu_seconds"], fitted["wall_seconds"]),
        artifact=artifact.to_json(), dataset_sha256=dataset.sha256,
        provenance={**host_facts(), "seed": spec.train.seed, "dataset": dataset.name, "dataset_origin": dataset.origin,
                    "threads": fitted["threads"], "training_process": "spawned"},
        history=fitted["history"], peak_rss_delta_bytes=memory.get("process_peak_rss_delta_bytes"),
        busy_threads=fitted["busy_threads"],
    )
    (out / "train.json").write_text(json.dumps(asdict(result), indent=2, default=float))
    return result
