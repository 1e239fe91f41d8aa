"""The robustness study's sets as one test set per row: the clean samples and every crafted set a row still
needs are stacked into one dataset (in the order of the plan), run in ONE runtime call per row (one model load,
one browser page, one latency reading), and the outputs split back by offsets into one answer per set. Rows
that still need the same sets share one stack (a resumed run may leave several); the PC models' baselines are
measured once per stack. This module builds stacks and splits outputs; it never crafts, converts or stores.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.run.baseline import Baseline
from deploytool.runtimes import make_runtime
from deploytool.study.attacks import AttackSpec
from deploytool.value import value
from deploytool.workspace import stable_hash

# Runtimes answer a set in batches (host runtimes 256 samples, the browser 64), and some answers depend on the
# batch: ONNX dynamic quantization takes each batch's activation range. So each set is padded to a multiple of
# BATCH_SPAN with copies of its own last BATCH_UNIT-block: every batch then holds the samples it held when the
# set ran alone, plus copies of them (which change no range), and the stacked answers are the per-set ones.
BATCH_UNIT, BATCH_SPAN = 64, 256


def padded_index(n: int) -> np.ndarray:
    """Indices of one set's samples as stacked: 0..n-1, then its last partial BATCH_UNIT-block repeated."""
    tail = np.arange(n - (n % BATCH_UNIT or min(n, BATCH_UNIT)), n)
    return np.concatenate([np.arange(n), np.resize(tail, (-n) % BATCH_SPAN)])


@value
class SetPlan:
    set_id: str  # "clean", or "<crafted_on>/<attack>[@eps]"
    crafted_on: str | None
    attack: AttackSpec | None


@value
class CraftedSet:
    """One set's samples: pixels in [0, 1] (NHWC, for the gallery) and the model's preprocessed input (NHWC)."""
    plan: SetPlan
    x01: np.ndarray
    x_model: np.ndarray
    facts: dict[str, Any]  # sha256, path, seconds, cached


@value
class Stack:
    """Sets run together: set i's answers are rows [i * m, i * m + n) of the stacked outputs (m: n padded)."""
    sets: tuple[CraftedSet, ...]
    n: int  # samples per set

    @property
    def index(self) -> np.ndarray:
        return padded_index(self.n)

    def split(self, preds: np.ndarray) -> dict[str, np.ndarray]:
        m = len(self.index)
        if len(preds) != m * len(self.sets):
            raise ValueError(f"{len(preds)} answers for {len(self.sets)} sets of {m}")
        return {s.plan.set_id: preds[i * m:i * m + self.n] for i, s in enumerate(self.sets)}

    def dataset(self, base: Any, y: np.ndarray, layout: str) -> Any:
        """`base` with these sets as its test set; held like Dataset.x_test: indexed NHWC, stored in the
        model's layout (apply_preprocess's contract). Its sha256 names the sets by content."""

        idx = self.index
        x = np.concatenate([s.x_model[idx] for s in self.sets])
        x_store = np.array(x.transpose(0, 3, 1, 2), order="C").transpose(0, 2, 3, 1) if layout == "NCHW" \
            else np.ascontiguousarray(x)
        sha = stable_hash({"base": base.sha256, "sets": [s.facts["sha256"] for s in self.sets], "n": self.n,
                           "stacked": len(idx)}, 32)
        return replace(base, x_test=x_store, y_test=np.tile(y[idx], len(self.sets)), sha256=sha,
                       name=f"{base.name}:{len(self.sets)} sets")


def group_by_sets(needed: dict[Any, tuple[str, ...]], pc_needed: tuple[str, ...]) -> dict[tuple[str, ...], list]:
    """Rows grouped by the sets they still need (one stack each, usually one for a whole run); sets only the PC
    models still need (a run stopped between a set's PC point and its rows) form a group without rows."""
    groups: dict[tuple[str, ...], list] = {}
    for row, sets in needed.items():
        if sets:
            groups.setdefault(sets, []).append(row)
    covered = {s for sets in groups for s in sets}
    rest = tuple(s for s in pc_needed if s not in covered)
    if rest:
        groups.setdefault(rest, [])
    return groups


def pc_baseline(ctx: Any, framework: str, artifact: Any, dataset: Any, out_dir: Path) -> Any:
    """The PC model on a stack, in its own framework's runtime: the baseline of that stack's rows."""
    from dataclasses import asdict

    out_dir.mkdir(parents=True, exist_ok=True)
    with make_runtime("pc", artifact.format, warmup_runs=0, latency_samples=1, threads=ctx.req.threads) as rt:
        rt.load(artifact)
        out = rt.run(dataset.feed_for(dataset.x_test, artifact))
    npy, lat = out_dir / f"pc-{framework}.npy", out_dir / f"pc-{framework}.latency.npy"
    np.save(npy, out.outputs)
    np.save(lat, out.latency_ms)
    return Baseline(model=ctx.spec.name, framework=framework, artifact_sha256=artifact.sha256,
                    dataset_sha256=dataset.sha256, accuracy=float(np.mean(out.outputs.argmax(1) == dataset.y_test)),
                    num_samples=len(dataset.x_test), outputs_path=str(npy), latency_samples_path=str(lat),
                    latency=asdict(out.latency), throughput_sps=out.throughput_sps, memory_bytes=out.memory_bytes,
                    load_ms=out.load_ms, first_inference_ms=out.first_inference_ms, size_bytes=artifact.size_bytes,
                    provenance={"runtime": out.environment})
