"""Adversarial examples crafted on a PC model with the Adversarial Robustness Toolbox (ART), in pixel space.

The model is wrapped with the manifest's preprocessing, so an attack perturbs pixels on the [0, 1] scale and its
ε means the same on every model: x_model = (pixel * hi * scale - mean) / std, where hi is 255 for byte images
(scale < 0.5) and 1/scale otherwise (the same convention as `Dataset.images`). Crafted sets are saved in the
workspace as .npz under a key that names every input by content (model file, clean samples, attack, its
parameters, ART's version), so a set is crafted once. It never converts, runs targets or stores rows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import Artifact, array_sha256
from deploytool.errors import UnknownOption
from deploytool.modelfiles.pt2 import load_program
from deploytool.proc.quiet import import_tensorflow
from deploytool.provenance import package_version
from deploytool.spec import Preprocess
from deploytool.value import value
from deploytool.workspace import Workspace, stable_hash

# attack name -> whether it is bounded by an L∞ budget ε (the optimisation attack finds its own, minimal, L2 step)
ATTACKS = {"fgsm": True, "pgd": True, "deepfool": False}
DEFAULT_EPS = (0.05, 0.1, 0.2, 0.3)
PGD_STEPS = 10
DEEPFOOL_STEPS = 20
DEEPFOOL_CANDIDATES = 3  # DeepFool's gradients per sample: the top classes only (TF's class gradients are slow)


@value
class AttackSpec:
    attack: str
    eps: float | None  # None for the unbounded optimisation attack

    @property
    def name(self) -> str:
        return self.attack if self.eps is None else f"{self.attack}@{self.eps:g}"

    def params(self) -> dict[str, Any]:
        if self.attack == "fgsm":
            return {"eps": self.eps, "norm": "inf"}
        if self.attack == "pgd":
            assert self.eps is not None  # pgd is bounded
            return {"eps": self.eps, "eps_step": self.eps / 4, "max_iter": PGD_STEPS, "norm": "inf",
                    "num_random_init": 0}
        return {"max_iter": DEEPFOOL_STEPS, "nb_grads": DEEPFOOL_CANDIDATES, "epsilon": 1e-6}


def attack_grid(attacks: tuple[str, ...], eps: tuple[float, ...]) -> list[AttackSpec]:
    unknown = [a for a in attacks if a not in ATTACKS]
    if unknown:
        raise UnknownOption(f"unknown attack {unknown[0]!r}; attacks: {', '.join(ATTACKS)}")
    bad = [e for e in eps if not 0 < e <= 1]
    if bad:
        raise UnknownOption(f"--eps {bad[0]:g}: a budget on the [0, 1] pixel scale must be in (0, 1]")
    return [AttackSpec(a, e) for a in attacks for e in (sorted(set(eps)) if ATTACKS[a] else (None,))]


def pixel_range(p: Preprocess) -> float:
    """The raw value of a white pixel: 255 for byte images, 1/scale otherwise."""
    return 255.0 if p.scale < 0.5 else 1.0 / p.scale


def to_model_input(x01: np.ndarray, p: Preprocess) -> np.ndarray:
    """Pixels in [0, 1] (NHWC) -> the model's preprocessed float32 input (NHWC)."""
    raw = np.asarray(x01, np.float32) * np.float32(pixel_range(p) * p.scale)
    return ((raw - np.asarray(p.mean, np.float32)) / np.asarray(p.std, np.float32)).astype(np.float32)


def craft_key(artifact: Artifact, clean_sha256: str, spec: AttackSpec) -> str:
    return stable_hash({"model": artifact.sha256, "clean": clean_sha256, "attack": spec.attack,
                        "params": spec.params(), "art": package_version("adversarial-robustness-toolbox")}, 16)


class Crafter:
    """One PC model wrapped as an ART classifier in pixel space; `craft` returns an adversarial NHWC set."""

    def __init__(self, artifact: Artifact, p: Preprocess, num_classes: int, threads: int = 1):
        self.artifact, self.p = artifact, p
        self.nchw = artifact.layout == "NCHW"
        self.classifier = (self._torch if artifact.format == "torch" else self._keras)(artifact, p, num_classes,
                                                                                       threads)

    @staticmethod
    def _keras(artifact: Artifact, p: Preprocess, num_classes: int, threads: int) -> Any:
        tf = import_tensorflow()
        import keras
        from art.estimators.classification import TensorFlowV2Classifier

        if artifact.format != "keras":
            raise UnknownOption(f"{artifact.path}: attacks are crafted on .keras and .pt2 models, not {artifact.format}")
        model = keras.saving.load_model(artifact.path, compile=False)
        k = np.float32(pixel_range(p) * p.scale)
        mean, std = np.asarray(p.mean, np.float32), np.asarray(p.std, np.float32)

        @tf.function(reduce_retracing=True)  # ART calls the model eagerly per step: traced once, many times faster
        def forward(x: Any, training: Any=False) -> Any:
            return model((x * k - mean) / std, training=False)

        @tf.function(reduce_retracing=True)
        def class_gradients(x: Any) -> Any:
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(x)
                logits = forward(x)
                picked = [logits[:, i] for i in range(num_classes)]
            return tf.stack([tape.gradient(p, x) for p in picked], axis=1)

        class Classifier(TensorFlowV2Classifier):
            """ART's classifier, with every class's gradient from one traced call per batch: DeepFool asks for
            one class at a time (each of its candidate classes, every step, on the same batch), and ART's eager
            tape per call was most of DeepFool's time. Each is the same gradient as ART's (the class's logit
            summed over the batch), differing from it by float rounding only (~1e-7)."""

            _last: tuple[np.ndarray, np.ndarray] | None = None

            def class_gradient(self, x: Any, label: Any=None, training_mode: Any=False, **kwargs: Any) -> Any:
                if not isinstance(label, (int, np.integer)) or training_mode:
                    return super().class_gradient(x, label=label, training_mode=training_mode, **kwargs)
                if self._last is None or not np.array_equal(self._last[0], x):  # DeepFool edits its batch in place
                    self._last = (np.array(x, copy=True),
                                  class_gradients(tf.convert_to_tensor(x, tf.float32)).numpy())
                return self._last[1][:, int(label): int(label) + 1]
        h, w, c = artifact.input_shape
        return Classifier(model=forward, nb_classes=num_classes, input_shape=(h, w, c),
                          loss_object=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          clip_values=(0.0, 1.0))

    @staticmethod
    def _torch(artifact: Artifact, p: Preprocess, num_classes: int, threads: int) -> Any:
        import torch
        from art.estimators.classification import PyTorchClassifier

        torch.set_num_threads(threads)

        module = load_program(artifact.path).module()  # read without unpickling (deploytool.modelfiles.pt2)
        k = float(pixel_range(p) * p.scale)
        mean = torch.tensor(p.mean, dtype=torch.float32).reshape(1, -1, 1, 1)
        std = torch.tensor(p.std, dtype=torch.float32).reshape(1, -1, 1, 1)

        class PixelSpace(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = module

            def forward(self, x: Any) -> Any:
                return self.inner((x * k - mean) / std)

            def train(self, mode: bool = True) -> Any:  # an exported program has no training mode; ART asks for eval
                return self

        return PyTorchClassifier(model=PixelSpace(), loss=torch.nn.CrossEntropyLoss(), input_shape=artifact.input_shape,
                                 nb_classes=num_classes, clip_values=(0.0, 1.0), device_type="cpu")

    def _attack(self, spec: AttackSpec, batch: int) -> Any:
        from art.attacks.evasion import DeepFool, FastGradientMethod, ProjectedGradientDescent

        params = {k: v for k, v in spec.params().items() if k != "norm"}
        if spec.attack == "fgsm":
            return FastGradientMethod(self.classifier, norm=np.inf, batch_size=batch, **params)
        if spec.attack == "pgd":
            return ProjectedGradientDescent(self.classifier, norm=np.inf, batch_size=batch, verbose=False, **params)
        return DeepFool(self.classifier, batch_size=batch, verbose=False, **params)

    def craft(self, x01: np.ndarray, y: np.ndarray, spec: AttackSpec, batch: int = 128) -> np.ndarray:
        x = np.ascontiguousarray(x01.transpose(0, 3, 1, 2)) if self.nchw else x01
        adv = self._attack(spec, batch).generate(x.astype(np.float32), y=y.astype(np.int64))
        adv = np.clip(adv, 0.0, 1.0).astype(np.float32)
        return np.ascontiguousarray(adv.transpose(0, 2, 3, 1)) if self.nchw else adv


def load_or_craft(ws: Workspace, crafters: dict[str, Crafter], make_crafter: Any, framework: str, artifact: Artifact,
                  x01: np.ndarray, y: np.ndarray, clean_sha256: str, spec: AttackSpec) -> tuple[np.ndarray, dict]:
    """The adversarial set for (model, clean samples, attack), from the workspace or crafted and saved there.
    Returns (pixels NHWC in [0, 1], facts: path, sha256, seconds, cached)."""
    key = craft_key(artifact, clean_sha256, spec)
    path = ws.inside(ws.root / "adversarial" / f"{key}.npz")
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            adv = z["x01"]
        return adv, {"path": str(path), "key": key, "sha256": array_sha256(adv), "seconds": 0.0, "cached": True}
    if framework not in crafters:
        crafters[framework] = make_crafter(framework)
    t = time.perf_counter()
    adv = crafters[framework].craft(x01, y, spec)
    seconds = time.perf_counter() - t
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp.npz")
    np.savez_compressed(tmp, x01=adv, y=y)
    tmp.replace(path)
    return adv, {"path": str(path), "key": key, "sha256": array_sha256(adv), "seconds": seconds, "cached": False}
