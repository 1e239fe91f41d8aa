"""The fit itself, run inside the training worker (deploytool.train.worker): the manifest's architecture built
in Keras or PyTorch, trained seeded with the manifest's hyperparameters, its per-epoch seconds, loss and
accuracy, peak memory and CPU measured, and the model saved (a PyTorch model as a torch.export `.pt2`).
TensorFlow and torch are imported here, inside the functions, never by the caller."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from deploytool import zoo
from deploytool.data import Dataset
from deploytool.kinds import get_kind
from deploytool.proc.quiet import import_tensorflow
from deploytool.proc.threads import busy_threads, thread_cpu_seconds
from deploytool.runtimes.measure import PeakRss
from deploytool.spec import ModelSpec


def fit_measured(spec: ModelSpec, framework: str, dataset: Dataset, epochs: int, path: Path, progress: bool,
                 threads: dict[str, Any]) -> dict[str, Any]:
    """In the training process (deploytool.train.worker): fit and save the model, measuring the fit alone —
    wall and CPU time, peak RSS, the threads that did the work."""
    fit = fit_keras if framework == "keras" else fit_torch
    peak = PeakRss().start()
    per_thread0 = thread_cpu_seconds()
    cpu0, wall0 = os.times(), time.perf_counter()
    path, layout, input_shape, seconds, history, test_logits = fit(spec, dataset, epochs, path, progress)
    cpu1, wall = os.times(), time.perf_counter() - wall0
    return {"path": str(path), "layout": layout, "input_shape": list(input_shape), "seconds": seconds,
            "history": history, "test_logits": test_logits, "wall_seconds": wall,
            "cpu_seconds": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system), "memory": peak.stop(),
            "busy_threads": busy_threads(per_thread0, thread_cpu_seconds()), "threads": threads}


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="batch", disable=not enabled, leave=False, dynamic_ncols=True)


# before_epoch(epoch index): called just before an epoch's clock starts; after_epoch(epoch index, predict): once
# its time is taken, predict(x NHWC) -> logits. The sweep study uses them for CPU time and accuracy per epoch;
# what they do is outside the epoch's seconds.
BeforeEpoch = Callable[[int], None]
AfterEpoch = Callable[[int, Callable[[np.ndarray], np.ndarray]], None]


KERAS_STEPS_PER_CALL = 25


def fit_keras(spec: ModelSpec, ds: Dataset, epochs: int, path: Path, progress: bool,
               after_epoch: AfterEpoch | None = None, before_epoch: BeforeEpoch | None = None) -> Any:
    import_tensorflow()
    import keras

    keras.utils.set_random_seed(spec.train.seed)
    model = zoo.build_keras(spec.architecture, spec.hwc, spec.num_classes)
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
        def on_epoch_begin(self, epoch: Any, logs: Any=None) -> None:
            self.bar = _progress(steps, f"train {spec.name} keras epoch {epoch + 1}/{epochs}", progress)
            if before_epoch is not None:
                before_epoch(epoch)
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, batch: Any, logs: Any=None) -> None:  # once per call: `batch` is its last step
            self.bar.update(batch + 1 - self.bar.n)
            if logs and "loss" in logs:
                self.bar.set_postfix(loss=f"{float(logs['loss']):.3f}", refresh=False)
        def on_epoch_end(self, epoch: Any, logs: Any=None) -> None:
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
    return path, "NHWC", tuple(spec.model_input_shape), seconds, history, logits


def fit_torch(spec: ModelSpec, ds: Dataset, epochs: int, path: Path, progress: bool,
               after_epoch: AfterEpoch | None = None, threads: int | None = None,
               before_epoch: BeforeEpoch | None = None) -> Any:
    import torch

    torch.manual_seed(spec.train.seed)
    if threads is not None:  # the sweep's points; migrate's training is pinned by its worker (deploytool.proc.threads)
        torch.set_num_threads(threads)
    model = zoo.build_torch(spec.architecture, spec.hwc, spec.num_classes)
    opt = (torch.optim.Adam(model.parameters(), lr=spec.train.learning_rate) if spec.train.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=spec.train.learning_rate, momentum=0.9))
    layout = get_kind(spec.input_kind).torch_layout  # an image channels first; a sequence or features as stored
    x = torch.from_numpy(ds.in_layout(ds.x_train, layout).first)
    y = torch.from_numpy(ds.y_train)
    gen = torch.Generator().manual_seed(spec.train.seed)
    bs = spec.train.batch_size
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = -(-len(x) // bs) * epochs
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if spec.train.schedule == "cosine" else None
    seconds: list[float] = []
    history: list[dict[str, float]] = []
    x_test = ds.in_layout(ds.x_test, layout).first

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
            after_epoch(epoch, lambda xs: _torch_logits(model, ds.in_layout(xs, layout).first))
        logits = _torch_logits(model, x_test)
        history.append({"loss": loss_sum / len(x), "accuracy": correct / len(x),
                        "test_accuracy": float(np.mean(logits.argmax(1) == ds.y_test))})
    if not epochs:
        logits = _torch_logits(model, x_test)
    h, w, c = spec.hwc
    sample = (c, h, w) if layout == "NCHW" else spec.model_input_shape
    export_torch(model, sample, path)
    torch.save(model.state_dict(), path.with_name("weights.pt"))
    return path, layout, sample, seconds, history, logits


def _torch_logits(model: Any, x_nchw: np.ndarray) -> np.ndarray:
    import torch

    model.eval()
    x = torch.from_numpy(np.ascontiguousarray(x_nchw))
    with torch.inference_mode():
        return torch.cat([model(x[i : i + 512]) for i in range(0, len(x), 512)]).numpy()


def export_torch(model: Any, input_chw: tuple[int, ...], path: Path) -> None:
    """Save an nn.Module as a .pt2 ExportedProgram with a dynamic batch dimension."""
    import torch

    example = torch.zeros(2, *input_chw)
    batch = torch.export.Dim("batch", min=1, max=65536)
    ep = torch.export.export(model.eval(), (example,), dynamic_shapes=({0: batch},))
    torch.export.save(ep, str(path))
