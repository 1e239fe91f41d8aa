"""An input kind is one module: tests/columns_kind.py (an image read column by column, and a GRU of its own that
reads it; registered when imported) runs through migrate's CLI from a manifest naming that architecture: the
bundled digits become its samples, PyTorch trains on them, the export takes the kind's sample shape and the host
row matches the PC baseline, without any file of deploytool knowing the kind exists."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.slow


def test_an_input_kind_registered_by_one_module_flows_through_migrate(tmp_path):
    manifest = (ROOT / "models" / "gru.toml").read_text()
    for old, new in (('name = "gru"', 'name = "gru_cols"'), ('architecture = "gru"', 'architecture = "gru_columns"'),
                     ('frameworks = ["keras", "torch"]', 'frameworks = ["torch"]'), ("epochs = 4", "epochs = 1"),
                     ("accuracy = [0.90, 1.0]", "accuracy = [0.3, 1.0]")):
        assert old in manifest, old
        manifest = manifest.replace(old, new)
    (tmp_path / "cols.toml").write_text(manifest)
    env = {"DEPLOYTOOL_PLUGINS": "tests.columns_kind",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    r = run_cli("migrate", "--model", str(tmp_path / "cols.toml"), "--target", "host", "--format", "onnx",
                "--quantize", "none", "--latency-samples", "5", "--warmup", "1", "--workspace", str(tmp_path / "ws"),
                "--run-id", "cols", env=env, cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr

    report = json.loads((tmp_path / "ws" / "reports" / "cols" / "report.json").read_text())
    (row,) = report["results"]
    assert row["status"] == "measured" and row["verdict"] == "pass", row
    assert row["label"] == "torch->onnx/none on host" and row["metrics"]["agreement"] == 1.0, row
    (artifact,) = (tmp_path / "ws" / "artifacts").glob("*/artifact.json")
    assert json.loads(artifact.read_text())["input_shape"] == [28, 28]  # 28 columns of 28 pixels: the kind's sample
    assert row["metrics"]["accuracy"] > 0.3, row["metrics"]  # one epoch learned well beyond chance (0.1): ~0.47
