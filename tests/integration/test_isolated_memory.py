"""Issue 10, "memory that means something": a host row's memory figure is
measured in its runtime's own (reused) worker, above that worker's idle RSS
after its imports, so the row measures the same alone and after other rows in
a matrix, and nothing depends on what the test process imported first. Uses
the contract tier's cached tiny models (.cache/test-models/); a few samples."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.runtimes.isolated import ISOLATED_DELTA, ISOLATED_IDLE, load_and_run, runtime_workers

pytestmark = pytest.mark.slow
OWN_WORKERS = True  # its workers learn a plugin from $DEPLOYTOOL_PLUGINS, or are counted (conftest.py)

OPTIONS = {"warmup_runs": 2, "latency_samples": 10, "threads": 1}
FLOOR_BYTES = 2**18  # RSS moves by pages and allocator blocks; this tiny model costs about 1 MiB


@pytest.fixture(scope="module")
def models():
    from tests.contract.model_cache import ModelCache

    cache = ModelCache()
    arts = {"onnx": cache.converted("keras", "onnx", "none"), "onnx-dynamic": cache.converted("keras", "onnx", "dynamic"),
            "tflite": cache.converted("keras", "tflite", "none")}
    yield {k: (a, np.repeat(cache.inputs(a, 400), 5, axis=0)) for k, a in arts.items()}  # 2,000 samples
    cache.close()


def figure(models, name: str) -> dict[str, float]:
    art, x = models[name]
    return load_and_run("host", art.format, "", art, x, **OPTIONS).memory_bytes


def test_a_rows_memory_is_the_same_alone_and_inside_a_matrix(models):
    import onnxruntime  # noqa: F401  (imported here first: it must not change any row's figure)

    with runtime_workers() as alone_workers:
        alone = figure(models, "onnx")
    assert alone_workers.started == 1
    with runtime_workers() as matrix:
        figure(models, "tflite")
        figure(models, "onnx-dynamic")
        inside = figure(models, "onnx")
        assert matrix.started == 2, "one worker per runtime, reused by its rows"
    assert "process_peak_rss_delta_bytes" not in inside, "the in-process figure's name keeps its old meaning"
    a, b = alone[ISOLATED_DELTA], inside[ISOLATED_DELTA]
    assert a > 0 and abs(a - b) <= max(0.05 * a, FLOOR_BYTES), (a / 2**20, b / 2**20)
    # the idle figure holds the framework and the inputs, the delta neither
    assert alone[ISOLATED_IDLE] > 50 * 2**20 and a < alone[ISOLATED_IDLE]
