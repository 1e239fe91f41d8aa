"""The typed Result at its JSON boundary, the one label and the one tolerance
formatter, and stored requests from before targets had options."""

from __future__ import annotations

import json

import pytest

from deploytool.artifact import Plan
from deploytool.result import format_tolerance
from deploytool.errors import UnknownOption
from deploytool.run.request import MigrateRequest
from deploytool.result import SCHEMA_VERSION, Combo, LabPlace, Result, StageTimes
from tests import results as factory

PLAN = Plan(source_format="keras", fmt="onnx", quantize="int8", artifact_format="onnx",
            steps=("onnx_tf", "onnx_quant"), mode="static int8 QDQ")


def test_a_result_survives_json_exactly():
    r = factory.result(environment={"runtime": "litert"}, notes=["n"], tolerances={"agreement": (0.99, 0.97)},
                       times=StageTimes(1.0, 2.0, 0.1, 0.01), plan=PLAN, bundle="b", latency_path="l")
    doc = json.loads(json.dumps(r.to_json(), allow_nan=False))
    assert doc["schema"] == SCHEMA_VERSION and doc["status"] == "measured"
    assert Result.from_json(doc) == r


def test_deploytools_own_facts_are_typed_fields_and_older_rows_keeping_them_in_environment_are_upgraded():
    r = factory.result(environment={"runtime": "litert"}, lab=LabPlace("c1", "lenet5 x", "h", "w"),
                       measurement=factory.measurement(not_paired="timed alone: a lab cell", is_baselines=True))
    assert Result.from_json(json.loads(json.dumps(r.to_json()))) == r
    old = r.to_json()
    old.pop("lab")
    old["measurement"] = {k: v for k, v in old["measurement"].items() if k not in ("not_paired", "is_baselines")}
    old["environment"] = {"runtime": "litert", "lab_cell": "c1", "lab_label": "lenet5 x", "lab_host": "h",
                          "lab_worker": "w", "latency_not_paired": "timed alone: a lab cell", "latency_is_baselines": True}
    assert Result.from_json(old) == r  # the runtime's own facts stay in environment, deploytool's are fields
    assert "timed alone: a lab cell" in r.latency_how and Result.from_json(factory.result().to_json()).lab == LabPlace()


def test_the_plan_is_stored_as_its_fields_and_none_as_an_empty_object():
    """The stored JSON of a row's plan is what it always was (the dataclass's fields, steps a list)."""
    doc = json.loads(json.dumps(factory.result(plan=PLAN).to_json()))
    assert doc["plan"] == {"source_format": "keras", "fmt": "onnx", "quantize": "int8", "artifact_format": "onnx",
                           "steps": ["onnx_tf", "onnx_quant"], "mode": "static int8 QDQ", "note": None}
    plan = Result.from_json(doc).plan
    assert plan == PLAN and plan is not None and plan.converter == "onnx_tf+onnx_quant"
    bare = factory.result().to_json()
    assert bare["plan"] == {} and Result.from_json(bare).plan is None


def test_labels():
    assert Combo("keras", "tflite", "int8", "host").label == "keras->tflite/int8 on host"
    assert Combo("torch", "tfjs", "none", "web", backend="webgl").where == "web:webgl"
    assert Combo("keras", "tflite", "int8", "android", "emu-1", "xnnpack").where == "android:xnnpack@emu-1"
    assert Combo("keras", "tflite", "int8", "host", runtime="tensorflow-lite").where == "host[tensorflow-lite]"


def test_one_tolerance_formatter():
    assert format_tolerance("agreement", (0.99, 0.97)) == "pass if >= 0.99, fail below 0.97"
    assert format_tolerance("max_abs_error", (0.001, 0.01)) == "pass if <= 0.001, fail above 0.01"
    from deploytool.run.compare import judge

    assert judge("agreement", 0.98, (0.99, 0.97)).describe() == "agreement = 0.98 (degraded; pass if >= 0.99, fail below 0.97)"


def test_a_request_stored_before_targets_had_options_is_upgraded():
    old = {"model": "lenet5", "targets": ["web", "android"], "backends": ["wasm,webgl"], "devices": ["emu-1"],
           "delegate": "xnnpack", "benchmark_binary": None, "threads": 2}
    req = MigrateRequest.from_json(old)
    assert req.target_options == {"web": {"backends": ["wasm,webgl"]},
                                  "android": {"devices": ["emu-1"], "delegate": "xnnpack", "benchmark_binary": None}}
    assert req.options_for("web").backends == ("wasm", "webgl")
    assert req.options_for("android").delegate == "xnnpack" and req.threads == 2
    assert MigrateRequest.from_json(req.to_json()) == req


def test_target_options_refuse_unknown_keys_and_values():
    with pytest.raises(UnknownOption, match="web target has no option colour"):
        MigrateRequest(target_options={"web": {"colour": 1}}).options_for("web")
    with pytest.raises(UnknownOption, match="unknown web backend 'webgpu2'"):
        MigrateRequest(target_options={"web": {"backends": ["webgpu2"]}}).options_for("web")
    with pytest.raises(UnknownOption, match="unknown delegate"):
        MigrateRequest(target_options={"android": {"delegate": "npu"}}).options_for("android")
