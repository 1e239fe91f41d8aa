"""Large files (issue 38, part 5): a TF.js model whose weights outgrow one shard (the converter cuts them into
4 MB files, group1-shardKofN.bin) is served to the page whole and runs in headless Chromium like a one-shard one,
also with more shards than the 6 connections Chromium opens to one HTTP/1.1 host (TF.js reads no shard until every
shard has answered: with the row's model served no-store, such a model hung until the row's timeout)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_a_tfjs_model_of_several_weight_shards_runs_in_the_browser(tmp_path: Path):
    import keras

    inp = keras.Input((512,), name="features")
    x = keras.layers.Dense(2048, activation="relu")(inp)
    x = keras.layers.Dense(2048, activation="relu")(x)
    x = keras.layers.Dense(1024, activation="relu")(x)
    keras.Model(inp, keras.layers.Dense(10, name="scores")(x)).save(tmp_path / "big.keras")  # 28 MiB of weights
    np.savez(tmp_path / "big.npz", features=np.random.default_rng(0).normal(size=(24, 512)).astype(np.float32))
    r = run_cli("migrate", "--model", str(tmp_path / "big.keras"), "--data", str(tmp_path / "big.npz"),
                "--target", "web", "--format", "tfjs", "--quantize", "none", "--latency-samples", "5", "--warmup",
                "1", "--timeout", "120", "--workspace", str(tmp_path / "ws"), "--run-id", "big", "--quiet", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    shards = sorted((tmp_path / "ws" / "artifacts").rglob("group1-shard*of*.bin"))
    assert len(shards) >= 7, shards  # the weights really are split, over more files than Chromium's 6 connections
    (row,) = json.loads((tmp_path / "ws" / "reports" / "big" / "report.json").read_text())["results"]
    assert row["status"] == "measured" and row["verdict"] == "pass", row
    assert row["metrics"]["agreement"] == 1.0 and row["metrics"]["max_abs_error"] < 1e-4, row["metrics"]
