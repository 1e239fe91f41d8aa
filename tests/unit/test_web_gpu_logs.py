"""WebGPU rows' pure logic: onnxruntime-web's node placement read from its verbose log (lines as Chromium 156
printed them for a tf2onnx LeNet-5 on the WebGPU EP), the adapter's label, which backends each format's rows
get, which rows' keys carry the adapter, and a backend that departs from its wasm twin."""

from __future__ import annotations

import pytest

from deploytool.errors import SpecError, UnknownOption
from deploytool.report.pairs import PairRow, backend_pairs
from deploytool.runtimes.web_gpu import adapter_label, is_software_adapter, ort_placement
from deploytool.targets import Position, get_target
from deploytool.targets.web import WebOptions, backends_for

V = "2026-12-04 05:19:05.073613 [V:onnxruntime:, session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp]"
INFO = "2026-12-04 05:18:48.160040 [I:onnxruntime:, webgpu_execution_provider.cc:688 GetCapability]"
LOG = [
    f"{INFO} webgpu kernel not found in registries for Op type: Gather node name: Gather__41",
    f"{INFO} webgpu kernel not found in registries for Op type: Cast node name: flatten_1/Shape__22",
    "2026-12-04 05:18:48.166075 [I:onnxruntime:, fallback_cpu_capability.cc:167 GetCpuPreferredNodes] ORT "
    "optimization- Force fallback to CPU execution for node: flatten_1/Reshape__33 because the CPU execution path "
    "is deemed faster than overhead involved with execution on other EPs capable of executing this node",
    f"{V.replace('1584', '1578')} Node placements",
    f"{V}  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 3",
    f"{V}   Gather (Gather__41)",
    f"{V}   Cast (flatten_1/Shape__22)",
    f"{V}   Gather (Gather)",
    f"{V}  Node(s) placed on [WebGpuExecutionProvider]. Number of nodes: 4",
    f"{V}   Conv (conv1_1/BiasAdd_token_1)",
    f"{V}   Cast (flatten_1/Reshape__33)",
    f"{V}   MemcpyFromHost (Memcpy)",
    f"{V}   MemcpyToHost (Memcpy_token_16)",
    "\x1b[0;93m2026-12-04 05:19:05.084858 [W:onnxruntime:, session_state.cc:1598 VerifyEachNodeIsAssignedToAnEp] "
    "Some nodes were not assigned to the preferred execution providers",
]


def test_the_placement_names_the_nodes_that_fell_back_and_why():
    p = ort_placement(LOG)
    assert p.known and p.webgpu_count == 2  # ORT's own Memcpy nodes are not the model's
    assert p.fallback == [("Gather", "Gather__41"), ("Cast", "flatten_1/Shape__22"), ("Gather", "Gather")]
    assert p.fallback_ops() == {"Cast": 1, "Gather": 2}
    assert p.unsupported_ops() == ["Cast", "Gather"]  # both named by "kernel not found"
    assert p.cpu_preferred == ("flatten_1/Reshape__33",)
    s = p.sentence()
    assert "2 nodes on WebGPU and 3 fell back" in s and "Cast, Gather x2" in s and "no WebGPU kernel for Cast, Gather" in s
    assert p.to_json()["fallback_nodes"][0] == "Gather (Gather__41)"


def test_all_nodes_on_webgpu_and_a_log_without_placement():
    p = ort_placement([f"{V}  All nodes placed on [WebGpuExecutionProvider]. Number of nodes: 17"])
    assert p.known and p.fallback == [] and p.webgpu_count == 17
    assert p.sentence() == "onnxruntime-web ran all 17 nodes on its WebGPU execution provider"
    nothing = ort_placement(["some other line"])
    assert not nothing.known and "unknown" in nothing.sentence()


def test_adapter_labels_say_software():
    swift = {"vendor": "google", "architecture": "swiftshader", "device": "", "is_fallback_adapter": True}
    assert adapter_label(swift) == "google swiftshader (fallback adapter)" and is_software_adapter(swift)
    assert adapter_label({**swift, "is_fallback_adapter": False}) == "google swiftshader (software)"
    real = {"vendor": "nvidia", "architecture": "ampere", "is_fallback_adapter": False}
    assert adapter_label(real) == "nvidia ampere" and not is_software_adapter(real)


def test_each_format_gets_the_chosen_backends_its_library_offers():
    both = WebOptions(backends=("wasm,webgpu",)).backends
    assert backends_for(both, "tfjs_graph") == ["wasm", "webgpu"]
    assert backends_for(both, "onnx") == ["wasm", "webgpu"]
    assert backends_for(both, "tflite") == ["wasm"]
    only_ort = WebOptions(backends=("ort:webgpu", "cpu")).backends
    assert backends_for(only_ort, "onnx") == ["webgpu"] and backends_for(only_ort, "tfjs_graph") == ["cpu"]
    assert backends_for(WebOptions(backends=("webgl",)).backends, "onnx") == ["wasm"]  # as before: ONNX on wasm
    assert WebOptions(backends=("all",)).webgpu and not WebOptions().webgpu
    with pytest.raises(UnknownOption, match="unknown web backend 'ort:webgl'"):
        WebOptions(backends=("ort:webgl",))


def test_only_webgpu_rows_carry_the_adapter_in_their_key():
    web = get_target("web")
    identity = {"browser": "Chromium 156", "webgpu_adapter": "google swiftshader (fallback adapter)"}
    assert web.row_identity(identity, Position(backend="webgpu")) == identity
    assert web.row_identity(identity, Position(backend="wasm")) == {"browser": "Chromium 156"}


def _row(backend, agreement, max_abs, status="measured", failing=False):
    return PairRow(label=f"keras/onnx/none/web:{backend}", framework="keras", format="onnx", quantize="none",
                   where=f"web:{backend}", artifact={"sha256": "abc", "format": "onnx"}, status=status,
                   failing=failing, verdict="fail" if failing else "pass", agreement=agreement, accuracy=None,
                   max_abs_error=max_abs)


def test_a_backend_departs_from_its_wasm_twin():
    pairs = backend_pairs([_row("wasm", 1.0, 1e-6), _row("webgpu", 0.885, 1.47, failing=True)])
    assert len(pairs) == 1 and pairs[0].departs == ["webgpu"]
    assert "webgpu (88.5% agreement, max |error| 1.47) departs from the same file on wasm" in pairs[0].sentence
    close = backend_pairs([_row("wasm", 1.0, 1e-6), _row("webgpu", 1.0, 2e-6)])
    assert close[0].departs == [] and close[0].sentence == ""
    assert backend_pairs([_row("webgpu", 1.0, 2e-6)]) == []  # no wasm twin: nothing to compare


def test_a_lab_file_and_the_sweep_take_the_webgpu_words(tmp_path):
    import argparse

    from deploytool.lab.labfile import load_lab
    from deploytool.study.sweep import add_cli

    lab_file = tmp_path / "lab.toml"
    lab_file.write_text('[lab]\nname = "gpu"\n[[models]]\nname = "lenet5"\n[matrix]\nformats = ["onnx", "tfjs"]\n'
                        'targets = ["web"]\n[target_options.web]\nbackends = ["wasm", "ort:webgpu", "tfjs:webgpu"]\n')
    web = get_target("web")
    options = web.options(load_lab(lab_file).target_options["web"])
    assert backends_for(options.backends, "onnx") == ["wasm", "webgpu"]
    bad = tmp_path / "bad.toml"
    bad.write_text(lab_file.read_text().replace("tfjs:webgpu", "tfjs:vulkan"))
    with pytest.raises(SpecError, match="tfjs:vulkan"):  # refused as the lab file is read
        load_lab(bad)
    p = argparse.ArgumentParser()
    add_cli(p)
    assert web.options(web.options_from_cli(p.parse_args(["--backend", "ort:webgpu"]))).backends == ("ort:webgpu",)
