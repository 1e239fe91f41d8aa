"""A finished run re-run with the same request launches nothing: every row is
final, including a browser row whose model the page cannot load (a
deterministic fault, `load_failed`). Only a time-out, a lost device or a crash
is tried again. The model is a user's dynamic-range .tflite, which LiteRT on
the host runs and tfjs-tflite 0.0.1-alpha.10 refuses to load (FULLY_CONNECTED
version 12)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def dynamic_range_tflite(path: Path) -> Path:
    """A tiny Dense classifier on 8x8x1 images, dynamic-range quantized by today's converter."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from deploytool.proc.quiet import import_tensorflow

    tf = import_tensorflow()
    import keras

    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                          keras.layers.Dense(64, activation="relu", name="fc1"), keras.layers.Dense(10)])
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    path.write_bytes(conv.convert())
    return path


def user_inputs(folder: Path, n: int = 64) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    np.savez(folder / "t.npz", x=rng.integers(0, 255, (n, 8, 8, 1)).astype(np.uint8), y=rng.integers(0, 10, n))
    return dynamic_range_tflite(folder / "dyn.tflite"), folder / "t.npz"


def test_a_rerun_of_a_finished_run_with_a_failing_browser_row_launches_nothing(tmp_path, monkeypatch):
    from deploytool import runtimes
    from deploytool.devices.browser import Chromium
    from deploytool.migrate import MigrateRequest, migrate
    from deploytool.proc.worker import Worker
    from deploytool.runtimes import isolated

    model, data = user_inputs(tmp_path / "in")
    req = MigrateRequest(model=str(model), test_npz=data, scale=1 / 255, targets=("host", "web"),
                         quantize=("none",), latency_samples=20)
    first = migrate(req, tmp_path / "ws", progress=False, log=lambda s: None)
    by_target = {r.combo.target: r for r in first.results}
    assert by_target["host"].status == "measured"
    web = by_target["web"]
    assert web.status == "load_failed" and web.status.final and web.failing, (web.status, web.reason)
    assert "FULLY_CONNECTED" in web.reason

    launched: list[str] = []
    real_make, real_spawn, real_launch = runtimes.make_runtime, Worker._spawn, Chromium.launch
    real_measure = isolated.measure_in_own_process

    def counting_make(*a, **k):
        launched.append(f"runtime {a}")
        return real_make(*a, **k)

    def counting_measure(*a, **k):
        launched.append(f"runtime worker {a[0].name}")
        return real_measure(*a, **k)

    def counting_spawn(self):
        launched.append("worker process")
        return real_spawn(self)

    def counting_launch(self):
        launched.append("chromium")
        return real_launch(self)

    monkeypatch.setattr(runtimes, "make_runtime", counting_make)
    monkeypatch.setattr(isolated, "measure_in_own_process", counting_measure)
    # any child process: a converter, a runtime's measuring worker, a training
    monkeypatch.setattr(Worker, "_spawn", counting_spawn)
    monkeypatch.setattr(Chromium, "launch", counting_launch)
    again = migrate(req, tmp_path / "ws", progress=False, log=lambda s: None)
    assert again.run_id == first.run_id and again.reused == 2 and launched == []
    assert [r.status for r in again.results] == [r.status for r in first.results]
    assert again.failing, "a final failing row still fails the run"
