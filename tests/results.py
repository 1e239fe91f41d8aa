"""Factories for typed `Result`s in unit tests (store, report, bundles): real
value objects, with every number a test does not care about set to something
plausible."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deploytool.artifact import Artifact
from deploytool.result import Check, Comparison, Flip
from deploytool.result import Combo, Measurement, Result, Status

COMBO = Combo("keras", "tflite", "int8", "host")


def comparison(accuracy: float = 0.9, baseline_accuracy: float = 0.95, agreement: float = 0.99,
               flipped: tuple[int, ...] = (1,), verdict: str = "pass", checks: tuple[Check, ...] = (),
               **fields: Any) -> Comparison:
    values: dict[str, Any] = dict(
        accuracy=accuracy, baseline_accuracy=baseline_accuracy,
        accuracy_delta_points=100 * (accuracy - baseline_accuracy), agreement=agreement,
        flipped=[Flip(i, 0, 0, 1) for i in flipped], max_abs_error=0.01, mean_abs_error=0.001,
        latency_ratio_p50=1.1, latency_ratio_p90=1.2, memory_ratio=0.5,
        memory_figures=("process_peak_rss_delta_bytes", "process_peak_rss_delta_bytes"), size_ratio=0.25,
        checks=list(checks), verdict=verdict)
    values.update(fields)
    return Comparison(**values)


def measurement(**fields: Any) -> Measurement:
    values: dict[str, Any] = dict(p50_ms=0.1, p90_ms=0.12, p99_ms=0.2, mean_ms=0.11, latency_samples=100,
                                  memory_bytes={"process_peak_rss_delta_bytes": 1e6}, load_ms=10.0,
                                  first_inference_ms=1.0, throughput_sps=1000.0)
    values.update(fields)
    return Measurement(**values)


def artifact(path: Path | str = "/ws/artifacts/x/model.tflite", fmt: str = "tflite", **fields: Any) -> Artifact:
    values: dict[str, Any] = dict(path=Path(path), format=fmt, framework="keras", layout="NHWC",
                                  input_shape=(28, 28, 1), num_outputs=10, quantize="int8",
                                  converter="tf.lite.TFLiteConverter", converter_version="2.19.0",
                                  sha256="ab" * 32, size_bytes=1000)
    values.update(fields)
    return Artifact(**values)


def result(run_id: str = "r", key: str = "k", status: str = "measured", combo: Combo = COMBO, **fields: Any) -> Result:
    """A measured row (with comparison, measurement, artifact) unless `status` says otherwise."""
    if status == "measured":
        fields.setdefault("comparison", comparison())
        fields.setdefault("measurement", measurement())
        fields.setdefault("artifact", artifact())
    else:
        fields.setdefault("reason", "boom")
    return Result(run_id=run_id, combo_key=key, model=fields.pop("model", "m"), dataset=fields.pop("dataset", "d"),
                  combo=combo, status=Status(status), **fields)
