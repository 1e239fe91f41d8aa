"""runner.runtimes_ahead: the runtime workers a run starts while its conversions finish (so no row pays a
framework's import): the rows' in-process runtimes, and the PC baseline's only when it is not measured yet."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from deploytool.artifact import Artifact
from deploytool.result import Combo
from deploytool.run.runner import runtimes_ahead
from deploytool.runtimes import runtime_class


def _ctx():
    return SimpleNamespace(req=SimpleNamespace(warmup_runs=10, latency_samples=None, threads=1),
                           dataset=SimpleNamespace(sha256="d" * 64), spec=SimpleNamespace(scored_output=""))


def _source(tmp_path: Path) -> Artifact:
    return Artifact(format="keras", framework="keras", path=tmp_path / "model.keras", sha256="0" * 64, size_bytes=1,
                    input_shape=(28, 28, 1), num_outputs=10, layout="NHWC")


COMBOS = [Combo("keras", "tflite", "none", "host"), Combo("keras", "tflite", "int8", "host"),
          Combo("keras", "onnx", "none", "host"), Combo("keras", "tfjs", "none", "host"),  # refused: not here
          Combo("keras", "tflite", "none", "web", backend="wasm"), Combo("torch", "onnx", "none", "host")]


def test_the_rows_runtimes_once_each_and_the_baseline_runtime_when_not_measured(tmp_path):
    got = runtimes_ahead(_ctx(), COMBOS, "keras", _source(tmp_path))
    assert got[0] is runtime_class("pc", "keras")  # no baseline measured yet
    assert runtime_class("host", "tflite") in got and runtime_class("host", "onnx") in got
    assert len(got) == len(set(got))  # one worker per runtime class
    assert runtime_class("pc", "torch") not in got  # another framework's rows and baseline are its own


def test_a_measured_baseline_needs_no_worker(tmp_path, monkeypatch):
    import deploytool.run.runner

    monkeypatch.setattr(deploytool.run.runner, "cached_baseline", lambda *a, **k: object())
    got = runtimes_ahead(_ctx(), COMBOS, "keras", _source(tmp_path))
    assert runtime_class("pc", "keras") not in got and runtime_class("host", "tflite") in got


def test_a_users_own_file_on_the_baselines_runtime_starts_no_worker(tmp_path, monkeypatch):
    """A user's .onnx on the host reuses its baseline's measurement (baseline_reusable): once that is
    measured, nothing runs, so no worker starts (it cost a user-model run 0.2 s)."""
    import deploytool.run.runner

    monkeypatch.setattr(deploytool.run.runner, "cached_baseline", lambda *a, **k: object())
    ctx = _ctx()
    ctx.runtime_options = lambda combo: {"threads": 1, "warmup_runs": 10, "latency_samples": None}
    onnx = Artifact(format="onnx", framework="onnx", path=tmp_path / "m.onnx", sha256="0" * 64, size_bytes=1,
                    input_shape=(28, 28, 1), num_outputs=10, layout="NHWC")
    same = [Combo("onnx", "onnx", "none", "host")]
    assert runtimes_ahead(ctx, same, "onnx", onnx) == []
    ctx.runtime_options = lambda combo: {"threads": 2, "warmup_runs": 10, "latency_samples": None}
    assert runtimes_ahead(ctx, same, "onnx", onnx) == [runtime_class("host", "onnx")]  # other settings: it runs
