"""The Python API (deploytool.api) without running a model: `import deploytool` stays cheap (no TensorFlow, torch or numpy; the
API loads on first use), the API builds the very request the CLI's parser builds, a Row holds report.json's
values of its Result, a Run finds one row or says which there are, shows escaped HTML and a DataFrame, rows
export as CSV (Parquet: with pyarrow, else one line), and the pytest helper's limits name what a row broke."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from deploytool.errors import DeploytoolError, UnknownOption
from deploytool.result import Check, Combo, OutputComparison
from tests import results as make

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("tensorflow", "torch", "keras", "numpy", "pandas", "onnxruntime", "jax")


def _imported_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return {m.split(".")[0] for m in out.stdout.split()}


def test_import_deploytool_imports_no_framework_and_the_api_none_of_tensorflow_or_torch():
    assert not _imported_after("import deploytool") & set(HEAVY)
    api = _imported_after("import deploytool.api, deploytool.testing\nassert callable(deploytool.api.migrate)\n"
                          "assert callable(deploytool.testing.assert_migrates)")
    assert "deploytool" in api and not api & {"tensorflow", "torch", "keras", "jax", "onnxruntime"}


@pytest.mark.parametrize("flags, kwargs", [
    ([], {}),
    (["--target", "host,web", "--format", "onnx,tflite", "--quantize", "none,int8", "--backend", "wasm,cpu"],
     dict(targets=("host", "web"), formats=["onnx", "tflite"], quantize="none,int8", backends=("wasm", "cpu"))),
    (["--tolerance", "agreement=0.99,0.97", "--tolerance", "rmse_increase=0.01", "--latency-samples", "5",
      "--warmup", "1", "--test-samples", "32", "--threads", "1", "--timeout", "60", "--runtime", "all",
      "--framework", "keras", "--run-id", "named"],
     dict(tolerances={"agreement": (0.99, 0.97), "rmse_increase": 0.01}, latency_samples=5, warmup=1,
          test_samples=32, threads=1, timeout_s=60, runtimes="all", frameworks="keras", run_id="named")),
    (["--scale", "0.5", "--mean", "0.1,0.2,0.3", "--std", "2", "--labels", "cat,dog", "--task", "classification",
      "--output", "probabilities", "--layout", "NHWC", "--data-layout", "NCHW"],
     dict(scale=0.5, mean=(0.1, 0.2, 0.3), std=2.0, labels=("cat", "dog"), task="classification",
          output="probabilities", layout="NHWC", data_layout="NCHW")),
])
def test_the_api_builds_the_request_the_cli_parser_builds(flags, kwargs):
    """One request, hence one run id: what makes the API's rows and the CLI's report.json the same rows."""
    from deploytool.api import cli_args
    from deploytool.cli import build_parser
    from deploytool.commands.runs import request_of

    parsed = build_parser(studies=False).parse_args(["migrate", "--model", "lenet5", "--quantize", "none", *flags])
    kwargs.setdefault("quantize", "none")
    assert request_of(cli_args("lenet5", None, **kwargs)) == request_of(parsed)


def test_a_user_mistake_is_the_clis_typed_error_before_anything_runs(tmp_path):
    from deploytool import api

    with pytest.raises(UnknownOption, match="unknown option 'latency'"):
        api.migrate("lenet5", workspace=tmp_path, latency=5)
    with pytest.raises(UnknownOption, match="keras.Model or a torch.nn.Module, not builtins.dict"):
        api.migrate({"not": "a model"}, workspace=tmp_path)
    with pytest.raises(UnknownOption, match="--backend applies to --target web"):
        api.migrate("lenet5", workspace=tmp_path, backends="wasm")  # the CLI's own check, from the same code
    with pytest.raises(DeploytoolError, match="no stored run 'nope'"):
        api.load_run("nope", workspace=tmp_path)


def _runs() -> tuple:
    """A Run of three rows: a pass on the host, a failing web row with an output and a check, a conversion
    failure."""
    from deploytool.api import Run
    from deploytool.workspace import Workspace

    out = OutputComparison("logits", (4,), 0.5, 0.1, 0.2, 0.9, 0.95)
    broken = Check("agreement", 0.5, 0.99, 0.97, "fail")
    rows = [make.result(key="a", combo=Combo("keras", "onnx", "none", "host")),
            make.result(key="b", combo=Combo("keras", "onnx", "none", "web", backend="wasm"),
                        comparison=make.comparison(agreement=0.5, verdict="fail", checks=(broken,), outputs=[out],
                                                   cosine_min=0.9, rel_error=0.2,
                                                   task_metrics={"pixel_agreement": 0.75}),  # a plugin task's own
                        reason="<script>alert(1)</script>", bundle="/ws/reports/r/bugs/b"),
            make.result(key="c", status="conversion_failed", combo=Combo("keras", "tflite", "int8", "host"))]
    return Run.of("r", "m", rows, Path("/ws/reports/r/report.html"), Workspace(Path("/ws")), None), rows


def test_a_row_holds_the_values_report_json_writes_of_its_result():
    import numpy as np

    from deploytool.report import ReportInput
    from deploytool.report.rows import summary_rows
    from deploytool.report.text import json_document

    run, results = _runs()
    inp = ReportInput("r", "m", "d", {}, results, {}, [], np.zeros(0, np.int64), None)  # no labels, no images
    doc = {r["combo_key"]: r for r in json_document(inp, summary_rows(inp))["results"]}
    for row in run.rows:
        j = doc[row.combo_key]
        for k in ("label", "framework", "format", "quantize", "target", "backend", "device", "status", "reason",
                  "verdict", "failing", "triage", "task"):
            assert getattr(row, k) == j[k], k
        assert dict(row.metrics) == j["metrics"] and list(row.notes) == j["notes"]
        assert [{**asdict(o), "shape": list(o.shape)} for o in row.outputs] == j["outputs"]
        assert [asdict(c) for c in row.checks] == j["checks"]
        assert {k: list(v) for k, v in row.tolerances.items()} == j["tolerances"]
        assert (row.bundle.name if row.bundle else None) == (Path(j["bundle"]).name if j["bundle"] else None)


def test_a_run_finds_one_row_by_its_fields_or_names_the_rows_it_has():
    run, _ = _runs()
    assert [r.combo_key for r in run.failing] == ["b", "c"] and not run.passed and len(run) == 3
    assert run.row(target="web").agreement == 0.5 and run.row("keras->onnx/none on host").combo_key == "a"
    with pytest.raises(UnknownOption, match="2 rows of run r match format='onnx'; its rows: keras->onnx"):
        run.row(format="onnx")
    with pytest.raises(UnknownOption, match="no row of run r match target='android'.*keras->tflite/int8 on host"):
        run.row(target="android")
    with pytest.raises(UnknownOption, match="no field 'flavour'"):
        run.row(flavour="x")


def test_a_runs_html_is_escaped_and_its_dataframe_has_a_column_per_value():
    run, _ = _runs()
    page = run._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page and "3 rows, 2 failing" in page
    assert page.count("<tr") == 4 and "Δ pts −5.00" in page  # the task view's headline, as the verdict matrix
    frame = run.to_pandas()
    assert list(frame["label"]) == [r.label for r in run.rows] and list(frame["combo_key"]) == ["a", "b", "c"]
    assert frame.loc[1, "output.logits.cosine_min"] == 0.9 and frame.loc[1, "agreement"] == 0.5
    assert frame.loc[1, "bundle"] == "/ws/reports/r/bugs/b" and frame.loc[2, "status"] == "conversion_failed"


def test_rows_export_as_csv_and_parquet_says_what_it_needs():
    from deploytool.report.table import csv_text, write_parquet

    run, _ = _runs()
    lines = list(csv.DictReader(io.StringIO(csv_text(run.rows))))
    assert [r["label"] for r in lines] == [r.label for r in run.rows]
    assert lines[1]["verdict"] == "fail" and float(lines[1]["agreement"]) == 0.5 and lines[2]["agreement"] == ""
    assert float(lines[1]["pixel_agreement"]) == 0.75 and lines[0]["pixel_agreement"] == ""  # a task's own metric
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(UnknownOption, match="--format parquet needs pyarrow"):
            write_parquet(run.rows, Path("/nonexistent/rows.parquet"))
    else:
        pytest.fail("pyarrow is installed here now: test the Parquet file it writes instead")


def test_the_helpers_limits_name_what_a_row_broke():
    from deploytool.testing import broken_limits

    run, _ = _runs()
    ok, bad, failed = run.rows
    assert broken_limits(ok, min_agreement=0.98, max_latency_ratio=2.0) == []
    assert broken_limits(ok, max_latency_ratio=1.05) == ["latency ratio 1.1 > 1.05"]
    assert broken_limits(bad, min_agreement=0.98) == ["verdict fail (agreement)", "agreement 0.5 < 0.98"]
    assert broken_limits(ok, max_rmse_increase=0.05) == ["rmse_increase not measured (limit 0.05)"]
    assert broken_limits(failed) == ["conversion_failed: boom"]
    degraded = make.result(comparison=make.comparison(verdict="degraded"))
    from deploytool.report.table import row_of

    assert broken_limits(row_of(degraded)) == []
    assert broken_limits(row_of(degraded), allow_degraded=False) == ["verdict degraded"]


def test_report_format_csv_prints_the_stored_rows(tmp_path, capsys):
    from deploytool.cli import main
    from deploytool.run import stored
    from deploytool.store import open_store
    from deploytool.workspace import Workspace

    ws = Workspace.open(tmp_path)
    store = open_store(None, ws.default_db_url)
    store.start_run("r", "m", {})
    _, results = _runs()
    for r in results:
        stored.save(store, ws, replace(r, bundle=""))  # (a stored bundle lives in the workspace)
    assert main(["report", "r", "--format", "csv", "--workspace", str(tmp_path)]) == 0
    lines = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted(r["label"] for r in lines) == sorted(r.combo.label for r in results)
    assert main(["report", "r", "--format", "csv", "--output", str(tmp_path / "rows.csv"),
                 "--workspace", str(tmp_path)]) == 0
    assert len(list(csv.DictReader((tmp_path / "rows.csv").open()))) == 3
    try:
        import pyarrow  # noqa: F401
    except ImportError:  # one line and exit 2, as for any user mistake
        assert main(["report", "r", "--format", "parquet", "--workspace", str(tmp_path)]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            "deploytool: error: --format parquet needs pyarrow, which is not installed; `pip install pyarrow`, or "
            "use --format csv"]
    assert main(["lab", "history", "--format", "csv", "--workspace", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "night,lab,run,status,created"  # no nights: the header
