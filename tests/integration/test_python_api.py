"""The Python API on real models: a Keras model object, a torch module object and an ONNX file, each migrated by
`deploytool.api.migrate`, then by `deploytool migrate` (a subprocess) on the same request in the same workspace.
The CLI computes the same run id — the model object was saved as the file the CLI is given, the arrays hash like
the .npz — so it measures nothing again, and the report.json it writes holds, field by field, the rows the API
returned. (Only report.json's run_info.created_at, the time the report was written, differs between the two; it
is not compared.) Then the pytest helper on a runtime double that shifts outputs (tests/fake_runtime.py): it fails
naming that row and the report, and passes on the real runtime. Lean: 32 samples, 5 timed, one format each."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files
SHARED_BROWSER = True  # its in-process runs share one Chromium (conftest.py)

FEATURES, CLASSES, SAMPLES = 12, 4, 32
LEAN: dict[str, Any] = dict(latency_samples=5, warmup=1)  # keyword arguments of api.migrate
LEAN_FLAGS = ("--latency-samples", "5", "--warmup", "1", "--quiet")


def _data(tmp_path: Path) -> tuple[np.ndarray, np.ndarray, Path]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, SAMPLES)
    np.savez(tmp_path / "test.npz", x=x, y=y)  # what the CLI is given: the same arrays, so the same dataset hash
    return x, y, tmp_path / "test.npz"


def _onnx_file(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(1).normal(size=(FEATURES, CLASSES)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["logits"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, FEATURES])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, CLASSES])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _cli_report(run, npz: Path, *flags: str) -> dict:
    """`deploytool migrate` on the file the API ran and the same test set; its report.json."""
    r = run_cli("migrate", "--model", run.model,
                "--data", str(npz), "--workspace", str(run.workspace), *flags, *LEAN_FLAGS, timeout=600)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert re.search(rf"run {re.escape(run.run_id)}: {len(run.rows)} combinations", r.stdout), r.stdout
    return json.loads((run.workspace / "reports" / run.run_id / "report.json").read_text())


def assert_rows_are_the_reports(run, doc: dict) -> None:
    assert doc["run_id"] == run.run_id
    reported = {r["combo_key"]: r for r in doc["results"]}
    assert set(reported) == {r.combo_key for r in run.rows}
    for row in run.rows:
        j = reported[row.combo_key]
        for k in ("label", "framework", "format", "quantize", "target", "backend", "device", "status", "reason",
                  "verdict", "failing", "triage", "task"):
            assert getattr(row, k) == j[k], (k, row.label)
        assert dict(row.metrics) == j["metrics"], row.label
        assert [{**asdict(o), "shape": list(o.shape)} for o in row.outputs] == j["outputs"]
        assert [asdict(c) for c in row.checks] == j["checks"] and list(row.notes) == j["notes"]
        assert {k: list(v) for k, v in row.tolerances.items()} == j["tolerances"]
        assert (row.bundle.name if row.bundle else None) == (Path(j["bundle"]).name if j["bundle"] else None)


@pytest.mark.browser
def test_a_keras_model_object_on_host_and_web_gives_the_rows_of_the_clis_report(tmp_path):
    from deploytool import api
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(16, activation="tanh"),
                              keras.layers.Dense(CLASSES)], name="tiny_dense")
    x, y, npz = _data(tmp_path)
    run = api.migrate(model, (x, y), targets=("host", "web"), formats="onnx", workspace=tmp_path / "ws", **LEAN)
    assert [(r.target, r.status, r.verdict) for r in run] == [("host", "measured", "pass"),
                                                              ("web", "measured", "pass")], run.rows
    assert run.run_id.startswith("tiny_dense-") and run.passed and run.report_path is not None and run.report_path.is_file()
    assert run.row(target="web").agreement == 1.0 and run.row(target="host").outputs[0].cosine_min > 0.9999
    saved = Path(run.model)
    assert saved.suffix == ".keras" and saved.is_relative_to(tmp_path / "ws" / "from-python")
    # the same model object again: the same file, so the same run (a notebook cell run twice resumes it)
    again = api.migrate(model, (x, y), targets=("host", "web"), formats="onnx", workspace=tmp_path / "ws", **LEAN)
    assert again.run_id == run.run_id and [r.metrics for r in again] == [r.metrics for r in run]
    assert_rows_are_the_reports(run, _cli_report(run, npz, "--target", "host,web", "--format", "onnx",
                                                 "--quantize", "none"))
    frame = run.to_pandas()
    assert list(frame["target"]) == ["host", "web"] and frame.filter(like=".cosine_min").min().min() > 0.999


@pytest.mark.browser
def test_a_torch_module_object_is_exported_on_its_data_and_gives_the_rows_of_the_clis_report(tmp_path):
    import torch

    from deploytool import api

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, CLASSES))
    module.train()
    x, y, npz = _data(tmp_path)
    run = api.migrate(module, {"x": x, "y": y}, targets=("host", "web"), formats="onnx", workspace=tmp_path / "ws",
                      **LEAN)
    assert module.training  # exported in eval mode, handed back as it came
    assert {r.target for r in run.rows} == {"host", "web"}
    for row in run.rows:
        assert (row.framework, row.format, row.status, row.verdict) == ("torch", "onnx", "measured", "pass"), row
    assert Path(run.model).suffix == ".pt2" and Path(run.model).is_relative_to(tmp_path / "ws" / "from-python")
    assert_rows_are_the_reports(run, _cli_report(run, npz, "--target", "host,web", "--format", "onnx", "--quantize",
                                                  "none"))


@pytest.mark.browser
def test_a_model_file_on_host_and_web_gives_the_rows_of_the_clis_report_and_loads_again(tmp_path):
    from deploytool import api

    model = _onnx_file(tmp_path / "linear.onnx")
    _, _, npz = _data(tmp_path)
    run = api.migrate(str(model), npz, targets="host,web", formats="onnx", workspace=tmp_path / "ws", **LEAN)
    assert [(r.target, r.verdict) for r in run] == [("host", "pass"), ("web", "pass")], run.rows
    assert_rows_are_the_reports(run, _cli_report(run, npz, "--target", "host,web", "--format", "onnx",
                                                 "--quantize", "none"))
    loaded = api.load_run(run.run_id[:12], workspace=tmp_path / "ws")
    assert loaded.run_id == run.run_id and {r.combo_key: r for r in loaded} == {r.combo_key: r for r in run}


def test_the_pytest_helper_fails_naming_a_row_a_runtime_double_shifts_and_passes_on_the_real_one(tmp_path, fake):
    """Also: the run's findings hold that row, and `localize` names where it goes wrong."""
    from deploytool import api
    from deploytool.testing import assert_migrates

    model = _onnx_file(tmp_path / "linear.onnx")
    x, y, _ = _data(tmp_path)
    ws = tmp_path / "ws"
    both = dict(formats="onnx", workspace=ws, runtimes=("onnxruntime", fake.NAME), **LEAN)
    with pytest.raises(AssertionError) as failed:
        assert_migrates(str(model), (x, y), min_agreement=0.99, **both)
    message = str(failed.value)
    run = api.migrate(str(model), (x, y), **both)  # the same request: its stored rows, nothing measured again
    bad = run.row(runtime=fake.NAME)
    assert bad.failing and bad.agreement is not None and bad.agreement < 0.5 and run.row(runtime="").verdict == "pass"
    assert message.splitlines() == [
        f"1 of 2 rows of run {run.run_id} do not hold:",
        f"  {bad.label}: verdict fail ({'; '.join(c.metric for c in bad.checks if c.outcome != 'pass')}), "
        f"agreement {bad.agreement:.4g} < 0.99",
        f"report: {run.report_path}"]
    assert [f for f in run.findings if any(bad.label in e for e in f.examples)]  # the shifted row: a finding
    where = api.localize(run, bad)  # a file kept in its format is traced op by op (by onnxruntime itself)
    assert where.row == bad.label and [(c.layer, c.kind) for c in where.cuts] == [("logits", "MatMul")], where
    assert_migrates(str(model), (x, y), formats="onnx", workspace=ws, min_agreement=0.99, **LEAN)
