"""Build atlas architectures into the workspace: the model file a user would hand to `deploytool migrate` (`.keras`
for keras.applications, a torch.export `.pt2` for torchvision and transformers) and its test set (`test.npz`, one
array per model input, and a calibration split), cached by what makes them (architecture, tier, sizes, library
versions). A randomly initialised classifier predicts one class for every input; its final layer is centred and
scaled (`inputs.rescale_for_spread`) so the test set's samples get different answers, and the build records how
informative the test set is (distinct classes predicted, std of the outputs across samples).

Builds run in one spawned worker process (deploytool.proc.worker): Keras, PyTorch and transformers never load into
the caller, and a build that crashes or hangs is that architecture's failure."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from deploytool.atlas import inputs, keras_io, torch_io
from deploytool.atlas.architecture import ATLAS, Architecture, Built, Size
from deploytool.errors import exception_name, first_line_of
from deploytool.proc.worker import Worker, WorkerLost, WorkerTimedOut
from deploytool.workspace import Workspace, safe_segment, stable_hash

BUILD_TIMEOUT_S = 1800.0
_LIBRARIES = {"keras": ("keras", "tensorflow"), "torchvision": ("torch", "torchvision"),
              "transformers": ("torch", "transformers")}


def model_suffix(arch: Architecture) -> str:
    return ".keras" if arch.provider == "keras" else ".pt2"


def cache_key(arch: Architecture, tier: str) -> str:
    """What makes a built architecture: its name, tier, size and the versions of the libraries that build it."""
    from importlib import metadata

    versions = {}
    for dist in _LIBRARIES.get(arch.provider, ()):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "missing"
    size = arch.size(tier)
    return stable_hash({"name": arch.name, "tier": tier, "params": size.params, "shape": size.input_shape,
                        "samples": size.samples, "pixels": arch.pixels, "versions": versions, "recipe": 2}, 12)


def built_dir(ws: Workspace, arch: Architecture, tier: str) -> Path:
    return ws.inside(ws.root / "atlas" / tier / f"{safe_segment(arch.name.replace('/', '-'), 60)}-"
                                                f"{cache_key(arch, tier)}")


def build_all(names: list[str], tier: str, ws: Workspace, log: Callable[[str], None] = print,
              timeout_s: float = BUILD_TIMEOUT_S) -> dict[str, Built | str]:
    """Each architecture built (or taken from the cache): name -> Built, or the one-line reason it failed."""
    out: dict[str, Built | str] = {}
    worker: Worker | None = None
    try:
        for name in names:
            arch = ATLAS[name]
            folder = built_dir(ws, arch, tier)
            done = folder / "built.json"
            if done.exists():
                out[name] = Built.from_json(json.loads(done.read_text()))
                continue
            if worker is None:
                worker = Worker(log_path=ws.root / "logs" / "atlas-build.log")
            log(f"atlas: building {name} ({tier})")
            try:
                built = Built.from_json(worker.call(build_one, name, tier, str(folder), timeout=timeout_s))
            except (WorkerLost, WorkerTimedOut) as e:
                out[name] = f"build failed: {first_line_of(str(e), 300)}"
                continue
            except Exception as e:  # the library's constructor or torch.export refused it: this one's cells
                out[name] = f"build failed: {exception_name(e)}: {first_line_of(str(e), 300)}"
                continue
            done.write_text(json.dumps(built.to_json(), indent=1))
            out[name] = built
    finally:
        if worker is not None:
            worker.close()
    return out


# ---- in the worker process ------------------------------------------------------------------------------------


def build_one(name: str, tier: str, folder: str) -> dict[str, Any]:
    """Build `name` at `tier` into `folder` (model file, test.npz); returns the Built as JSON."""
    arch = ATLAS[name]
    size = arch.size(tier)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    io: Any = keras_io if arch.provider == "keras" else torch_io
    io.seed(inputs.SEED)  # the same random weights on every build: a cached build is the one a new one would make
    model = arch.build(size)
    test, train = test_set(arch, size, inputs.SEED), test_set(arch, size, inputs.SEED + 1)
    # statistics and scale from the calibration split; the test set stays unseen
    norms = io.calibrate_batch_norm(model, train)
    # only a classifier's final layer (one score per class: (N, K)) is centred and scaled
    classifier = np.ndim(io.predict(model, train)) == 2
    rescaled = io.rescale_final_layer(model, train) if classifier else ""
    rescaled = "; ".join(filter(None, (f"{norms} batch norms' statistics set on the calibration split" if norms
                                       else "", rescaled)))
    outputs = io.predict(model, test)
    classes, std = inputs.spread_of(outputs)
    path = out / f"{safe_segment(name.replace('/', '-'), 60)}{model_suffix(arch)}"  # the run's name comes from it
    io.save(model, test, path)
    np.savez(out / "test.npz", **test, **{f"{k}_train": v for k, v in train.items()})
    return Built(name=name, tier=tier, model=path, data=out / "test.npz", params=io.count_params(model),
                 classes_predicted=classes, output_std=std, rescaled=rescaled,
                 seconds=round(time.perf_counter() - t0, 1)).to_json()


def test_set(arch: Architecture, size: Size, seed: int) -> dict[str, np.ndarray]:
    """The architecture's inputs for `size.samples` samples: `x` for one input, else one array per input name."""
    n = size.samples
    if arch.input_kind == "image":
        x = inputs.images(n, size.input_shape, channels_first=arch.provider != "keras", seed=seed)  # type: ignore[arg-type]
        return {"x": (x + 2.5) * 51.0 if arch.pixels == "0-255" else x}
    if arch.input_kind == "tokens":
        vocab = int(size.params.get("vocab_size") or size.params["vocab"])
        ids, mask = inputs.tokens(n, size.input_shape[0], vocab, seed=seed)
        return {"input_ids": ids, "attention_mask": mask}
    if arch.input_kind == "audio-features":
        return {"x": inputs.audio_features(n, size.input_shape[0], size.input_shape[1], seed=seed)}
    return {"x": inputs.waveform(n, size.input_shape[0], seed=seed)}
