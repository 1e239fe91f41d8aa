"""Findings: signatures leave out what varies between runs, so one bug is one
finding across nights and models; the store counts sightings and notices when a
bug stops occurring after an upgrade; each finding writes an issue.md for the
project that owns the faulty part."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deploytool.bugs import findings
from deploytool.result import Combo
from deploytool.store import SqlAlchemyStore
from deploytool.store.sqlite import SqliteStore
from deploytool.bugs.upstream import write_finding
from tests import results as factory

TFJS_LOAD = ("browser: Failed to create TFLiteWebModelRunner: INVALID_ARGUMENT: Can't initialize model (console: "
             "ERROR: Didn't find op for builtin opcode 'FULLY_CONNECTED' version '{v}'. An older version of this "
             "builtin might be supported.)")
WEB = Combo("keras", "tflite", "dynamic", "web", backend="wasm")


def _load_failure(version: int = 12, model: str = "lenet5", run: str = "r1"):
    art = factory.artifact(fmt="tflite", quantize="dynamic", converter="tf.lite.TFLiteConverter",
                           converter_version="2.19.0", path=f"/ws/{run}/artifacts/{version}/model.tflite")
    return factory.result(run, f"k-{model}", "runtime_failed", combo=WEB, reason=TFJS_LOAD.format(v=version),
                          artifact=art, model=model)


def test_normalise_strips_what_varies():
    a = findings.normalise("tf2onnx 1.17.0: KeyError: 'x' at /tmp/ws-123/artifacts/ab12cd34ef56ab12/model.onnx "
                           "shape [1, 28, 28, 1] 0xdeadbeef")
    b = findings.normalise("tf2onnx 1.18.2: KeyError: 'x' at /home/u/runs/artifacts/99ffee0011aabbcc/model.onnx "
                           "shape [4, 32, 32, 3] 0x1234")
    assert a == b and "<path>" in a and "<shape>" in a and "1.17" not in a


def test_the_same_bug_in_two_models_and_two_versions_is_one_signature():
    s1 = findings.signature(_load_failure(12, "lenet5"), blame_runtime=False)
    s2 = findings.signature(replace(_load_failure(12, "resnet20"), run_id="r2"), blame_runtime=False)
    assert s1 == s2 and s1.stage == "load" and s1.runtime == "tfjs-tflite:wasm" and "FULLY_CONNECTED" in s1.ops
    assert findings.owner_of(s1) == "tensorflow/tfjs"
    other = findings.signature(factory.result("r", "k", "conversion_failed", combo=WEB,
                                              reason="ConverterError: op Gather not supported"), blame_runtime=False)
    assert other.key != s1.key and other.stage == "convert" and other.error == "ConverterError"


def test_an_accuracy_fault_is_pinned_on_the_runtime_when_the_same_file_passes_on_the_host():
    bad = factory.result("r", "w", combo=WEB, comparison=factory.comparison(agreement=0.2, verdict="fail"),
                         environment={"runtime": "tfjs-tflite", "version": "0.0.1-alpha.10"})
    good = factory.result("r", "h", combo=replace(WEB, target="host", backend=""))
    ((row, sig),) = findings.failing_signatures([bad, good])
    assert row is bad and sig.stage == "accuracy" and sig.runtime == "tfjs-tflite:wasm"
    assert findings.owner_of(sig) == "tensorflow/tfjs"
    ((_, alone),) = findings.failing_signatures([bad])  # no second opinion: the converter is blamed
    assert alone.runtime == "" and findings.owner_of(alone) == "tensorflow/tensorflow"


@pytest.mark.parametrize("store_class", [SqlAlchemyStore, SqliteStore], ids=["sqlalchemy", "sqlite3"])
def test_sightings_are_counted_and_an_upgrade_that_fixes_it_is_noticed(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    v1 = {"tfjs-tflite": "0.0.1-alpha.10", "numpy": "1.26.4"}
    (f,) = findings.record_run(store, "night-1", [_load_failure()], v1)
    findings.record_run(store, "night-2", [replace(_load_failure(), run_id="night-2")], v1)
    findings.record_run(store, "night-2", [replace(_load_failure(), run_id="night-2")], v1)  # a resumed run
    (again,) = store.findings()
    assert again.id == f.id and again.occurrences == 3 and again.runs == ("night-1", "night-2")
    assert again.not_seen_since is None and again.last_versions["tfjs-tflite"] == "0.0.1-alpha.10"
    fixed = replace(_load_failure(), status="measured", reason="", comparison=factory.comparison(),
                    measurement=factory.measurement(), run_id="night-3")
    assert findings.record_run(store, "night-3", [fixed], {**v1, "tfjs-tflite": "0.0.1-alpha.11"}) == []
    (after,) = store.findings()
    assert after.not_seen_since == "tfjs-tflite 0.0.1-alpha.11" and after.occurrences == 3
    findings.record_run(store, "night-4", [replace(_load_failure(), run_id="night-4")],
                        {**v1, "tfjs-tflite": "0.0.1-alpha.12"})
    (back,) = store.findings()
    assert back.not_seen_since is None and back.versions["tfjs-tflite"] == ("0.0.1-alpha.10", "0.0.1-alpha.12")
    assert store.get_finding(f.id[:6]).id == f.id and store.get_finding("zz") is None


def test_another_models_row_passing_does_not_make_a_finding_not_seen(tmp_path):
    """A finding is "not seen since" only when a row of a model it was seen in runs again without it: LeNet-1's
    passing row of the same combination says nothing of the bug LeNet-5's row met."""
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'r.db'}")
    v1 = {"tfjs-tflite": "0.0.1-alpha.10"}
    v2 = {"tfjs-tflite": "0.0.1-alpha.11"}
    (f,) = findings.record_run(store, "night-1", [_load_failure(model="lenet5")], v1)
    assert f.examples == ("lenet5: keras->tflite/dynamic on web:wasm",), f.examples

    def passing(model: str, run: str):
        return replace(_load_failure(model=model, run=run), status="measured", reason="",
                       comparison=factory.comparison(), measurement=factory.measurement())

    assert findings.record_run(store, "night-2", [passing("lenet1", "night-2")], v2) == []
    assert store.findings()[0].not_seen_since is None  # another model's row
    findings.record_run(store, "night-3", [passing("lenet5", "night-3")], v2)
    assert store.findings()[0].not_seen_since == "tfjs-tflite 0.0.1-alpha.11"  # its own model's row


def test_issue_md_is_addressed_to_the_owner_with_its_template_fields_once_its_reproducer_confirms_it(tmp_path):
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'r.db'}")
    (f,) = findings.record_run(store, "n1", [_load_failure()], {"tfjs-tflite": "0.0.1-alpha.10", "numpy": "1.26"})
    assert f.klass == "upstream" and f.state == "candidate"
    out = write_finding(f, tmp_path / "finding")
    assert not (out / "issue.md").exists() and "state: **candidate**" in (out / "finding.md").read_text()
    f = replace(f, confirmation={"state": "confirmed", "command": "python reproduce_web.py", "output": "REPRODUCED"})
    out = write_finding(f, tmp_path / "finding")
    text = (out / "issue.md").read_text()
    assert text.startswith("<!-- for https://github.com/tensorflow/tfjs/issues/new -->")
    for field in ("# ", "## What happens", "## System information", "- OS:", "tfjs-tflite: 0.0.1-alpha.10",
                  "Install method: npm", "## Standalone reproduction", "FULLY_CONNECTED"):
        assert field in text, field


def test_a_route_through_onnx_is_blamed_on_onnx2tf_not_the_exporter():
    art = factory.artifact(converter="torch.onnx + onnx2tf", converter_version="1.29.24")
    r = factory.result("r", "k", combo=Combo("torch", "tflite-onnx2tf", "int8", "host"), artifact=art,
                       comparison=factory.comparison(agreement=0.5, verdict="fail"))
    ((_, sig),) = findings.failing_signatures([r])
    assert sig.converter == "torch.onnx + onnx2tf" and findings.owner_of(sig) == "PINTO0309/onnx2tf"


def test_a_webgpu_row_that_departs_from_its_wasm_twin_is_the_runtimes_finding_even_when_it_passes():
    art = factory.artifact(fmt="onnx", quantize="none", converter="tf2onnx", converter_version="1.17.0")
    on = Combo("keras", "onnx", "none", "web", backend="wasm")
    wasm = factory.result("r", "w", combo=on, artifact=art, comparison=factory.comparison(agreement=1.0),
                          environment={"runtime": "onnxruntime-web", "version": "1.31.1"})
    gpu = factory.result("r", "g", combo=replace(on, backend="webgpu"), artifact=art,
                         comparison=factory.comparison(agreement=0.95, verdict="degraded"),
                         environment={"runtime": "onnxruntime-web", "version": "1.31.1", "gpu": "google swiftshader"})
    ((row, sig),) = findings.failing_signatures([wasm, gpu])
    assert row is gpu and sig.runtime == "onnxruntime-web:webgpu" and sig.stage == "accuracy"
    assert findings.owner_of(sig) == "microsoft/onnxruntime"
    same = replace(gpu, comparison=factory.comparison(agreement=1.0))
    assert findings.failing_signatures([wasm, same]) == []  # agrees with its twin: nothing to report
    other_file = replace(gpu, artifact=replace(art, sha256="cd" * 32))
    assert findings.failing_signatures([wasm, other_file]) == []  # a twin is the same file, by content
