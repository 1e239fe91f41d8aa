"""Training on the PC: builds the manifest's architecture in Keras or PyTorch,
trains it seeded with the manifest's hyperparameters in a spawned process
pinned to a thread count (the same for both frameworks: deploytool.threads),
measures what the seed studies measured on the training side (seconds per
epoch, peak RSS, CPU utilisation, the threads used, per-epoch loss and
accuracy, final test accuracy) and saves the model as an `Artifact` in the
workspace, cached by a content hash of everything that affects it.

It never converts, compares or reports.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.data import Dataset
from deploytool.errors import UnknownOption
from deploytool.provenance import host_facts, package_version
from deploytool.runtimes.measure import PeakRss
from deploytool.spec import FRAMEWORKS, ModelSpec
from deploytool.threads import busy_threads, cpu_percent, thread_cpu_seconds
from deploytool.workspace import Workspace, fresh_dir, stable_hash

if TYPE_CHECKING:
    from deploytool.train_worker import TrainWorker

FRAMEWORK_PACKAGES = {"keras": ("tensorflow", "keras"), "torch": ("torch",)}
FILE_NAMES = {"keras": "model.keras", "torch": "model.pt2"}


@dataclass
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
    busy_threads: int | None = None  # threads that each did >= 1% of the fit's CPU time (deploytool.threads)

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
    from deploytool.train_worker import TrainWorker

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


def fit_measured(spec: ModelSpec, framework: str, dataset: Dataset, epochs: int, path: Path, progress: bool,
                 threads: dict[str, Any]) -> dict[str, Any]:
    """In the training process (deploytool.train_worker): fit and save the model, measuring the fit alone —
    wall and CPU time, peak RSS, the threads that did the work."""
    fit = _fit_keras if framework == "keras" else _fit_torch
    peak = PeakRss().start()
    per_thread0 = thread_cpu_seconds()
    cpu0, wall0 = os.times(), time.perf_counter()
    path, layout, input_shape, seconds, history, test_logits = fit(spec, dataset, epochs, path, progress)
    cpu1, wall = os.times(), time.perf_counter() - wall0
    return {"path": str(path), "layout": layout, "input_shape": list(input_shape), "seconds": seconds,
            "history": history, "test_logits": test_logits, "wall_seconds": wall,
            "cpu_seconds": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system), "memory": peak.stop(),
            "busy_threads": busy_threads(per_thread0, thread_cpu_seconds()), "threads": threads}


def _progress(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="batch", disable=not enabled, leave=False, dynamic_ncols=True)


# before_epoch(epoch index): called just before an epoch's clock starts; after_epoch(epoch index, predict): once
# its time is taken, predict(x NHWC) -> logits. The sweep study uses them for CPU time and accuracy per epoch;
# what they do is outside the epoch's seconds.
BeforeEpoch = Callable[[int], None]
AfterEpoch = Callable[[int, Callable[[np.ndarray], np.ndarray]], None]


KERAS_STEPS_PER_CALL = 25


def _fit_keras(spec: ModelSpec, ds: Dataset, epochs: int, path: Path, progress: bool,
               after_epoch: AfterEpoch | None = None, before_epoch: BeforeEpoch | None = None):
    from deploytool.quiet import import_tensorflow

    import_tensorflow()
    import keras

    from deploytool import zoo

    keras.utils.set_random_seed(spec.train.seed)
    model = zoo.build_keras(spec.architecture, spec.input_shape, spec.num_classes)
    steps = -(-len(ds.x_train) // spec.train.batch_size)
    lr = spec.train.learning_rate
    if spec.train.schedule == "cosine":
        lr = keras.optimizers.schedules.CosineDecay(lr, decay_steps=steps * epochs)
    opt = (keras.optimizers.Adam(lr) if spec.train.optimizer == "adam"
           else keras.optimizers.SGD(lr, momentum=0.9))
    # Several steps per call of the compiled train function: the same updates in the same order (the same
    # weights, checked) with a third less time per epoch on a small model, whose steps are mostly call overhead.
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=KERAS_STEPS_PER_CALL)
    seconds: list[float] = []
    history: list[dict[str, float]] = []

    class Measure(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.bar = _progress(steps, f"train {spec.name} keras epoch {epoch + 1}/{epochs}", progress)
            if before_epoch is not None:
                before_epoch(epoch)
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):  # once per call: `batch` is its last step
            self.bar.update(batch + 1 - self.bar.n)
            if logs and "loss" in logs:
                self.bar.set_postfix(loss=f"{float(logs['loss']):.3f}", refresh=False)

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.t0)
            self.bar.close()
            if after_epoch is not None:  # first: its CPU time must not include the test evaluation below
                after_epoch(epoch, lambda x: self.model.predict(x, batch_size=512, verbose=0))
            logits = self.model.predict(ds.x_test, batch_size=512, verbose=0)
            history.append({"loss": float(logs["loss"]), "accuracy": float(logs["accuracy"]),
                            "test_accuracy": float(np.mean(logits.argmax(1) == ds.y_test))})

    model.fit(ds.x_train, ds.y_train, batch_size=spec.train.batch_size, epochs=epochs, shuffle=True,
              verbose=0, callbacks=[Measure()])
    model.save(path)
    logits = model.predict(ds.x_test, batch_size=512, verbose=0)
    return path, "NHWC", tuple(spec.input_shape), seconds, history, logits


def _fit_torch(spec: ModelSpec, ds: Dataset, epochs: int, path: Path, progress: bool,
               after_epoch: AfterEpoch | None = None, threads: int | None = None,
               before_epoch: BeforeEpoch | None = None):
    import torch

    from deploytool import zoo

    torch.manual_seed(spec.train.seed)
    if threads is not None:  # the sweep's points; migrate's training is pinned by its worker (deploytool.threads)
        torch.set_num_threads(threads)
    model = zoo.build_torch(spec.architecture, spec.input_shape, spec.num_classes)
    opt = (torch.optim.Adam(model.parameters(), lr=spec.train.learning_rate) if spec.train.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=spec.train.learning_rate, momentum=0.9))
    x = torch.from_numpy(ds.in_layout(ds.x_train, "NCHW"))
    y = torch.from_numpy(ds.y_train)
    gen = torch.Generator().manual_seed(spec.train.seed)
    bs = spec.train.batch_size
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = -(-len(x) // bs) * epochs
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if spec.train.schedule == "cosine" else None
    seconds: list[float] = []
    history: list[dict[str, float]] = []
    x_test = ds.in_layout(ds.x_test, "NCHW")

    for epoch in range(epochs):
        model.train()
        loss_sum, correct = 0.0, 0
        perm = torch.randperm(len(x), generator=gen)
        bar = _progress(-(-len(x) // bs), f"train {spec.name} torch epoch {epoch + 1}/{epochs}", progress)
        if before_epoch is not None:
            before_epoch(epoch)
        t0 = time.perf_counter()
        for i in range(0, len(x), bs):
            idx = perm[i : i + bs]
            opt.zero_grad()
            out = model(x[idx])
            loss = loss_fn(out, y[idx])
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            loss_sum += loss.item() * len(idx)  # weighted by batch size, as Keras averages its epoch loss
            correct += int((out.argmax(1) == y[idx]).sum())
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        seconds.append(time.perf_counter() - t0)
        bar.close()
        if after_epoch is not None:  # first: its CPU time must not include the test evaluation below
            after_epoch(epoch, lambda xs: _torch_logits(model, ds.in_layout(xs, "NCHW")))
        logits = _torch_logits(model, x_test)
        history.append({"loss": loss_sum / len(x), "accuracy": correct / len(x),
                        "test_accuracy": float(np.mean(logits.argmax(1) == ds.y_test))})
    if not epochs:
        logits = _torch_logits(model, x_test)
    export_torch(model, (spec.input_shape[2], spec.input_shape[0], spec.input_shape[1]), path)
    torch.save(model.state_dict(), path.with_name("weights.pt"))
    return path, "NCHW", (spec.input_shape[2], spec.input_shape[0], spec.input_shape[1]), seconds, history, logits


def _torch_logits(model, x_nchw: np.ndarray) -> np.ndarray:
    import torch

    model.eval()
    x = torch.from_numpy(np.ascontiguousarray(x_nchw))
    with torch.inference_mode():
        return torch.cat([model(x[i : i + 512]) for i in range(0, len(x), 512)]).numpy()


def export_torch(model, input_chw: tuple[int, int, int], path: Path) -> None:
    """Save an nn.Module as a .pt2 ExportedProgram with a dynamic batch dimension."""
    import torch

    example = torch.zeros(2, *input_chw)
    batch = torch.export.Dim("batch", min=1, max=65536)
    ep = torch.export.export(model.eval(), (example,), dynamic_shapes=({0: batch},))
    torch.export.save(ep, str(path))
