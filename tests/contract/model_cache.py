"""Tiny models for the contract tests, built with the real trainers and
converters once and kept under ~/.cache/deploytool/tests/test-models/ (outside
the checkout: a fresh clone starts warm), so the edit loop does not retrain or
reconvert. An entry's key is the content it is made
from (the source model's sha256, the route), the code that makes it
(tests/integration/tiny_models.py, deploytool/convert/*.py) and the installed
versions of every package that could change the bytes: edit a converter or
upgrade TensorFlow and the entry is rebuilt. A conversion that fails is cached
too, as its StageFailed, so a known failure costs nothing on the next run.
Conversions run in `IsolatedConverter`'s child process, as in the product:
a converter that crashes becomes a failure, not the end of the test run.
This module only builds and caches; the tests judge.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import replace
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.data.feed import Feed
from deploytool.errors import StageFailed
from tests.kept import CACHE_HOME

if TYPE_CHECKING:
    from deploytool.convert.isolated import IsolatedConverter

ROOT = Path(__file__).resolve().parents[2]
CACHE_ENV = "DEPLOYTOOL_TEST_MODELS"  # another cache folder (a CI cache volume); default: see cache_root()
DISTS = ("numpy", "scikit-learn", "tensorflow", "keras", "torch", "onnx", "onnxruntime", "tf2onnx",
         "tensorflowjs", "ai-edge-litert", "litert-torch", "onnx2tf")
N_TRAIN = 1000  # tiny_models.N_TRAIN: the calibration split; the rest is test input

# Artifact format a runtime runs -> the cached model that stands for it: a source kind, or (source, format word).
FOR_FORMAT: dict[str, str | tuple[str, str]] = {
    "keras": "keras", "saved_model": "saved_model", "torch": "torch",
    "onnx": ("keras", "onnx"), "tflite": ("keras", "tflite"), "tfjs_graph": ("keras", "tfjs"),
}


STALE_AFTER_S = 24 * 3600  # an entry under an older key is removed once unused for this long


def _unused_for(entry: Path) -> float:
    """Seconds since `entry` was made or last read (its entry.json's mtime, touched on every use)."""
    try:
        return time.time() - (entry / "entry.json").stat().st_mtime
    except OSError:
        return float("inf")


def test_cache_home() -> Path:
    """Where the test tiers keep what they build once (tiny models, the trained LeNet-5): outside the checkout,
    so a fresh clone (CI) starts warm; every entry is keyed by what it is made from, so nothing stale is used.
    Read once, when the tests start (tests/kept.py)."""
    return CACHE_HOME


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or test_cache_home() / "test-models")


def _versions() -> dict[str, str]:
    out = {}
    for dist in DISTS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "-"
    return out


def _code_sha256(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(f for path in paths for f in ([path] if path.is_file() else path.glob("*.py"))):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


@cache
def digits_in(layout: str) -> np.ndarray:
    """scikit-learn's 8x8 digits, float32 in [0, 1], in `layout` (NHWC or NCHW); shared: do not write to it."""
    from tests.integration.tiny_models import digits

    x, _ = digits()
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if layout == "NCHW" else x


class ModelCache:
    """`source(kind)`, `converted(kind, fmt, quantize)` and `for_format(artifact_format)`, each built once."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or cache_root())
        self._versions = _versions()
        self._convert_code = _code_sha256(ROOT / "deploytool" / "convert", ROOT / "deploytool" / "artifact.py",
                                          ROOT / "deploytool" / "modelfiles" / "onnx_external.py")
        self._converter: IsolatedConverter | None = None
        self._memo: dict[tuple, Artifact | StageFailed] = {}
        self.built: list[str] = []  # entries made (not found) in this session: cold vs warm

    # ---- entries on disk
    def _key(self, *parts: object) -> str:
        text = json.dumps([*map(str, parts), self._versions], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def _entry(self, name: str, key: str, build) -> Artifact:
        """The cached artifact (or StageFailed) under name-key; `build` makes it in an empty folder."""
        final = self.root / f"{name}-{key}"
        meta = final / "entry.json"
        if not meta.is_file():
            partial = self.root / f"{name}-{key}.partial-{os.getpid()}"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            try:
                art = build(partial)
                record = {"artifact": {**art.to_json(), "path": str(Path(art.path).relative_to(partial))}}
            except StageFailed as e:
                if e.status == "timeout":  # a busy machine, not a property of the route: try again next run
                    shutil.rmtree(partial, ignore_errors=True)
                    raise
                record = {"failed": {"status": e.status, "reason": e.reason}}
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            (partial / "entry.json").write_text(json.dumps(record, indent=1, sort_keys=True))
            for stale in self.root.glob(f"{name}-*"):  # the same entry under an older key, unused for a day:
                # a younger one may belong to another checkout's test run going on now (a branch, a CI clone)
                if stale != final and re.fullmatch(re.escape(name) + r"-[0-9a-f]{20}", stale.name) \
                        and _unused_for(stale) > STALE_AFTER_S:
                    shutil.rmtree(stale, ignore_errors=True)
            try:
                partial.rename(final)
                self.built.append(final.name)
            except OSError:  # another test process (an xdist worker) made the same entry first: use theirs
                shutil.rmtree(partial, ignore_errors=True)
                if not meta.is_file():
                    raise
        record = json.loads(meta.read_text())
        try:
            meta.touch()  # in use: not stale for another checkout's run
        except OSError:
            pass
        if "failed" in record:
            raise StageFailed(record["failed"]["status"], record["failed"]["reason"])
        art = Artifact.from_json({**record["artifact"], "path": str(final / record["artifact"]["path"])})
        return art

    def _memoized(self, key: tuple, make) -> Artifact:
        if key not in self._memo:
            try:
                self._memo[key] = make()
            except StageFailed as e:
                self._memo[key] = e
        found = self._memo[key]
        if isinstance(found, StageFailed):
            raise StageFailed(found.status, found.reason)
        return found

    # ---- what the tests ask for
    def source(self, kind: str) -> Artifact:
        """A tiny trained source model of `kind` (convert.SOURCE_FORMATS)."""
        return self._memoized(("source", kind), lambda: self._source(kind))

    def _source(self, kind: str) -> Artifact:
        from tests.integration import tiny_models

        code = _code_sha256(Path(tiny_models.__file__))
        if kind == "keras":
            return self._entry("keras", self._key("keras", code), lambda d: tiny_models.build_keras(d).artifact)
        if kind == "torch":
            return self._entry("torch", self._key("torch", code), lambda d: tiny_models.build_torch(d).artifact)
        if kind == "saved_model":
            keras_art = self.source("keras")
            return self._entry("saved_model", self._key("saved_model", keras_art.sha256),
                               lambda d: _export_saved_model(keras_art, d))
        if kind in ("onnx", "tflite"):
            # A user's own .onnx / .tflite: the Keras model converted at --quantize none.
            return self.converted("keras", kind, "none")
        raise ValueError(f"no tiny source model of kind {kind!r}; add one to tests/contract/model_cache.py")

    def converted(self, kind: str, fmt: str, quantize: str) -> Artifact:
        """The tiny `kind` source converted to `fmt` at `quantize`; raises its StageFailed when it fails."""
        return self._memoized(("converted", kind, fmt, quantize), lambda: self._converted(kind, fmt, quantize))

    def _converted(self, kind: str, fmt: str, quantize: str) -> Artifact:
        src = self.source(kind)
        key = self._key("converted", src.sha256, fmt, quantize, self._convert_code)
        calibration = Feed.one("input", digits_in(src.layout)[:N_TRAIN])
        return self._entry(f"{kind}-{fmt}-{quantize}", key,
                           lambda d: self._isolated().convert(src, fmt, quantize, d / "out", calibration))

    def for_format(self, artifact_format: str) -> Artifact:
        """A tiny artifact of `artifact_format` for a runtime to load."""
        made_from = FOR_FORMAT.get(artifact_format)
        if made_from is None:
            raise LookupError(f"no tiny {artifact_format} model: add a route for it to "
                              "tests/contract/model_cache.py FOR_FORMAT")
        if isinstance(made_from, str):
            return self.source(made_from)
        return self.converted(*made_from, "none")

    def inputs(self, artifact: Artifact, n: int) -> np.ndarray:
        """`n` test samples (not in the calibration split) in the artifact's layout."""
        return digits_in(artifact.layout)[N_TRAIN : N_TRAIN + n]

    # ---- the converter process
    def _isolated(self):
        if self._converter is None:
            from deploytool.convert.isolated import IsolatedConverter

            self._converter = IsolatedConverter(self.root / "convert.log", timeout_s=900)
        return self._converter

    def close(self) -> None:
        if self._converter is not None:
            self._converter.close()
            self._converter = None


def _export_saved_model(keras_art: Artifact, out: Path) -> Artifact:
    """The Keras model as a user's SavedModel directory (model.export), like tiny_models does."""
    import keras

    path = out / "tiny_saved_model"
    keras.saving.load_model(keras_art.path).export(str(path), verbose=False)
    return replace(keras_art, path=path, format="saved_model", sha256=content_hash(path),
                   size_bytes=size_on_disk(path))
