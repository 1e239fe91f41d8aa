"""Findings a maintainer acts on, on nine models of the shapes people ship (tests/shapes.py: a transformer encoder
in ONNX, a scikit-learn forest with and without ZipMap, a two-input recurrent SavedModel, named dict outputs in
Keras and PyTorch, an image classifier with an unlabelled test set named after its input,
a model with a per-pixel NCHW output and a per-step NCW one through onnx2tf, a regressor), each migrated on the host and in Chromium: no row is deploytool's own crash, every failing row carries one triage
class, every upstream finding is confirmed by its bare reproducer (run again here, in a process that cannot
import deploytool), the rest are visibly classed (a coverage gap with its ops and remedy, a package outside its
pins with the requirements it misses), and a documented alternative is tried before blame."""

from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests import anymodels, shapes

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CASES = {  # name -> (model file, test set, the matrix: small, but every class and alternative is met)
    "encoder": ("encoder.onnx", "encoder.npz", ("--format", "onnx,tflite", "--quantize", "none,dynamic")),
    "forest": ("forest.onnx", "forest.npz", ("--format", "onnx,tflite", "--quantize", "none")),
    "recurrent": ("recurrent", "recurrent.npz", ("--format", "tflite,tfjs", "--quantize", "none", "--runtime", "all")),
    "heads": ("heads.keras", "heads.npz", ("--format", "onnx", "--quantize", "none")),
    "theads": ("theads.pt2", "heads.npz", ("--format", "onnx", "--quantize", "none")),
    "zipmap": ("forest_zipmap.onnx", "forest.npz", ("--format", "onnx", "--quantize", "none")),
    "unlabelled": ("digits.keras", "unlabelled.npz", ("--format", "tflite", "--quantize", "none")),
    "channels": ("channels.pt2", "channels.npz", ("--format", "tflite-onnx2tf", "--quantize", "none")),
    "normalized": ("normalized.keras", "normalized.npz", ("--format", "onnx", "--quantize", "none")),
    "regression": ("price.keras", "price.npz", ("--format", "tflite,onnx", "--quantize", "none,int8", "--task",
                                                "regression")),
}
SKLEARN_SCORE = "sklearn_score.txt"
SHAPES_CODE = (Path(shapes.__file__), Path(anymodels.__file__))  # what _build calls


def _build(d: Path) -> None:
    shapes.torch_encoder_onnx(d / "encoder.onnx")
    ids, y = shapes.encoder_data()
    np.savez(d / "encoder.npz", input_ids=ids, y=y)
    onx, score = shapes.sklearn_forest(zipmap=False)
    (d / "forest.onnx").write_bytes(onx)
    (d / "forest_zipmap.onnx").write_bytes(shapes.sklearn_forest(zipmap=True)[0])
    (d / SKLEARN_SCORE).write_text(repr(score))  # scikit-learn's own score on the test half
    _, _, xt, yt = shapes.forest_data()
    np.savez(d / "forest.npz", X=xt, y=yt)
    shapes.recurrent_saved_model(d / "recurrent")
    np.savez(d / "recurrent.npz", **shapes.recurrent_data())
    shapes.keras_dict_outputs(d / "heads.keras")
    shapes.torch_dict_outputs(d / "theads.pt2")
    np.savez(d / "heads.npz", features=shapes.feature_data())
    shapes.keras_normalized(d / "normalized.keras")
    np.savez(d / "normalized.npz", features=shapes.feature_data())
    x, y = shapes.digits_images(64, seed=4)
    np.savez(d / "digits.npz", image=x, y=y)
    shapes.keras_digits_cnn(d / "digits.keras")
    np.savez(d / "unlabelled.npz", image=x)  # one array named after the model's input, no labels
    shapes.torch_channels_first_pt2(d / "channels.pt2")
    np.savez(d / "channels.npz", image=shapes.image_data().transpose(0, 3, 1, 2).copy(), audio=shapes.audio_data())
    anymodels.keras_regression_mlp(d / "price.keras", epochs=5)
    x, y = anymodels.tabular_data(64, seed=9)
    np.savez(d / "price.npz", features=x, y=y)


def _request(d: Path, name: str, model: str, data: str, matrix: tuple[str, ...]):
    from deploytool.migrate import MigrateRequest

    flags = dict(zip(matrix[::2], matrix[1::2]))
    return MigrateRequest(model=str(d / model), test_npz=d / data, formats=(flags["--format"],),
                          quantize=(flags["--quantize"],), targets=("host", "web"),
                          runtimes=(flags["--runtime"],) if "--runtime" in flags else (), latency_samples=5,
                          warmup_runs=1, run_id=name, task=flags.get("--task"))


@pytest.fixture(scope="module")
def triaged(tmp_path_factory):
    """Every case migrated in this process (the library call the CLI makes), the runs sharing their runtime and
    conversion workers (each framework imported once) and their browser; `deploytool findings` through the CLI.
    The models and the conversions that succeed are kept for the next session (tests/kept.py): what
    fails (conversions, runtimes) fails again here, and every finding is triaged and confirmed afresh."""
    import shutil

    from deploytool.convert.lanes import shared_converters
    from deploytool.migrate import migrate
    from deploytool.runtimes.isolated import runtime_workers
    from deploytool.runtimes.web_session import web_session
    from tests.conftest import run_cli
    from tests.kept import conversions_kept, kept_build

    built = kept_build("triage-shapes", _build, *SHAPES_CODE)
    d = tmp_path_factory.mktemp("shapes")
    shutil.copytree(built, d, dirs_exist_ok=True)
    ws = d / "ws"
    with runtime_workers(), shared_converters(), web_session(), conversions_kept(ws, built.name):
        for name, (model, data, matrix) in CASES.items():  # one Chromium too, as the atlas' runs share them
            migrate(_request(d, name, model, data, matrix), ws, progress=False, log=lambda s: None,
                    warn=lambda s: None)
    rows = {name: json.loads((ws / "reports" / name / "report.json").read_text())["results"] for name in CASES}
    listed = run_cli("findings", "--format", "json", "--workspace", str(ws), cwd=d)
    assert listed.returncode == 0, listed.stderr
    return ws, rows, json.loads(listed.stdout), float((d / SKLEARN_SCORE).read_text())


def _row(rows: list[dict], label: str) -> dict:
    (row,) = [r for r in rows if r["label"] == label]
    return row


def test_no_row_is_deploytools_own_crash_and_every_failing_row_has_one_class(triaged):
    ws, rows, found, _ = triaged
    failing = [r for rs in rows.values() for r in rs if r["failing"]]
    assert failing
    assert all(r["triage"] in ("unsupported", "environment", "upstream") for r in failing), \
        [(r["label"], r["triage"], r["reason"]) for r in failing if r["triage"] not in ("unsupported", "environment",
                                                                                       "upstream")]
    for name in ("heads", "theads", "unlabelled", "channels", "regression", "normalized"):
        assert not [r for r in rows[name] if r["failing"]], [(r["label"], r["reason"]) for r in rows[name]]
    assert all(f["owner"] and f["owner"] != "unknown" for f in found), [(f["owner"], f["title"]) for f in found]
    counts = Counter(f"{f['class']} ({f['state']})" for f in found)
    print("findings by class:", dict(counts))


def test_every_upstream_finding_is_confirmed_by_its_bare_reproducer(triaged):
    from deploytool.bugs.confirm import confirm

    ws, _, found, _ = triaged
    upstream = [f for f in found if f["class"] == "upstream"]
    assert {f["state"] for f in upstream} == {"confirmed"}, [(f["title"], f["confirmation"]) for f in upstream]
    for f in upstream:  # what each bare reproducer printed when the run confirmed it
        assert "REPRODUCED" in f["confirmation"]["output"], (f["title"], f["confirmation"])
        assert (ws / "findings" / f["id"] / "issue.md").is_file()
    # and one run again here, a conversion's (the slowest kind to stand up: its converter imported afresh)
    (conversion, *_) = [f for f in upstream if f["signature"]["stage"] == "convert"]
    again = confirm(Path(conversion["bundle"]))
    assert again.state == "confirmed" and "REPRODUCED" in again.output, (conversion["title"], again.output)
    others = [f for f in found if f["class"] != "upstream"]
    assert others and not any((ws / "findings" / f["id"] / "issue.md").exists() for f in others)


def test_quant_pre_process_failing_falls_back_to_its_documented_alternative_and_is_filed(triaged):
    ws, rows, found, _ = triaged
    for target in ("host", "web:wasm"):
        row = _row(rows["encoder"], f"onnx->onnx/dynamic on {target}")
        assert row["status"] == "measured", row["reason"]
        assert any("quant_pre_process(model, 'pre.onnx') failed (AssertionError" in n and "skip_symbolic_shape=True"
                   in n for n in row["notes"]), row["notes"]
    (f,) = [f for f in found if "symbolic_shape_infer.py" in f["title"]]
    assert f["owner"] == "microsoft/onnxruntime" and f["state"] == "confirmed"
    assert "AssertionError raised at onnxruntime/tools/symbolic_shape_infer.py:" in f["title"]  # no words: the frame
    issue = (ws / "findings" / f["id"] / "issue.md").read_text()
    assert "pip install numpy==" in issue and "onnxruntime==" in issue and "python reproduce_convert.py" in issue
    assert "Attached: " in issue and "`reproduce_convert.py`" in issue and "`model`" in issue


def test_constants_tf2onnx_leaves_as_inputs_are_frozen_by_the_documented_way_and_the_first_call_filed(triaged):
    """A Keras Normalization layer's mean and variance: tf2onnx's from_function makes them graph inputs the source does
    not have (onnxruntime-web then asks for them in its feeds). The function frozen first converts right; the first
    call is tf2onnx's finding, confirmed by its bundle's reproducer (the call alone, then the inputs it wrote)."""
    ws, rows, found, _ = triaged
    for target in ("host", "web:wasm"):
        row = _row(rows["normalized"], f"keras->onnx/none on {target}")
        assert row["status"] == "measured" and row["verdict"] == "pass", row["reason"]
        assert any("tf2onnx.convert.from_function(serve, ...) failed (WrongConversion" in n
                   and "convert_variables_to_constants_v2" in n for n in row["notes"]), row["notes"]
    (f,) = [f for f in found if any(e.startswith("normalized:") for e in f["examples"])]
    assert f["owner"] == "onnx/tensorflow-onnx" and f["class"] == "upstream" and f["state"] == "confirmed", f
    assert "graph inputs its source does not have" in f["title"], f["title"]


def test_a_package_outside_its_pins_and_an_op_without_conversion_are_classed_not_filed(triaged):
    ws, rows, found, _ = triaged
    (env,) = [f for f in found if f["class"] == "environment" and f["owner"] == "PINTO0309/onnx2tf"
              and any(e.startswith("encoder:") for e in f["examples"])]
    assert env["state"] == "unconfirmed" and env["title"].startswith("onnx2tf 1.29.24: converting an ONNX model")
    assert any("requires numpy==1.26.4" in m for m in env["triage"]["mismatches"]), env["triage"]
    gap = [f for f in found if f["class"] == "unsupported" and "TreeEnsembleClassifier" in f["triage"]["ops"]]
    assert gap and gap[0]["state"] == "coverage gap" and gap[0]["triage"]["remedy"]
    note = (ws / "findings" / gap[0]["id"] / "finding.md").read_text()
    assert "Not a bug" in note and "TreeEnsembleClassifier" in note


def test_tensorlist_loops_convert_with_select_tf_ops_and_rows_say_they_need_flex(triaged):
    ws, rows, found, _ = triaged
    (conv,) = [f for f in found if f["class"] == "unsupported" and f["signature"]["stage"] == "convert"
               and any(e.startswith("recurrent:") for e in f["examples"])]
    assert "SELECT_TF_OPS" in conv["triage"]["remedy"] and "TensorListReserve" in conv["triage"]["ops"]
    lite = _row(rows["recurrent"], "saved_model->tflite/none on host")
    assert lite["triage"] == "unsupported" and "Flex" in lite["reason"]
    browser = _row(rows["recurrent"], "saved_model->tflite/none on web:wasm")
    assert browser["triage"] == "unsupported"  # tfjs-tflite has no Flex delegate
    tfjs = _row(rows["recurrent"], "saved_model->tfjs/none on web:wasm")
    bundle = ws / "reports" / "recurrent" / tfjs["bundle"]
    web = json.loads((bundle / "web.json").read_text())
    assert [i["name"] for i in web["inputs"]] == ["static", "sequence"] or len(web["inputs"]) == 2  # every input
    assert all((bundle / i["file"]).stat().st_size > 0 for i in web["inputs"])


def test_a_conversion_bundle_pins_every_package_its_reproducer_imports(triaged):
    from importlib import metadata

    ws, _, found, _ = triaged
    bundles = [Path(f["bundle"]) for f in found if f["signature"]["stage"] == "convert" and f["bundle"]]
    assert bundles
    tops = metadata.packages_distributions()
    for bundle in bundles:
        meta = json.loads((bundle / "bundle.json").read_text())
        pinned = {p.lower() for p in meta["convert"]["packages"]}
        assert all(meta["convert"]["packages"].values()), meta["convert"]["packages"]
        tree = ast.parse((bundle / "reproduce_convert.py").read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        for top in imported - set(sys.stdlib_module_names):
            dists = {d.lower() for d in tops.get(top, [top])}
            assert dists & pinned, (bundle.name, top, pinned)


def test_shapes_people_ship_are_measured_and_scored_on_the_right_output(triaged):
    """Named dict outputs (Keras, PyTorch) keep their names on every route; scikit-learn's forest is scored on its
    probabilities — its PC accuracy is scikit-learn's own score — with and without ZipMap (an int8-I/O file on
    every runtime: test_quantized_io_layouts.py); an unlabelled image set named after the input is compared with the baseline alone; outputs onnx2tf
    made channels-last (per-pixel NCHW, per-step NCW) agree with the source on host and in the browser."""
    ws, rows, _, score = triaged
    for name in ("heads", "theads"):
        for r in rows[name]:
            assert {o["name"] for o in r["outputs"]} == {"kind", "score"}, (name, r["label"])
    for name in ("forest", "zipmap"):
        host = _row(rows[name], "onnx->onnx/none on host")
        assert host["metrics"]["baseline_accuracy"] == pytest.approx(score, abs=1e-9), (name, host["metrics"])
    zipped = _row(rows["zipmap"], "onnx->onnx/none on web:wasm")
    assert zipped["triage"] == "unsupported"  # onnxruntime-web returns no sequence of maps: a coverage gap
    assert all(r["metrics"]["agreement"] == 1.0 and r["metrics"]["accuracy"] is None for r in rows["unlabelled"])
    for r in rows["channels"]:  # a per-pixel NCHW output and a per-step NCW one, each restored
        assert r["verdict"] == "pass" and r["metrics"]["cosine_min"] > 0.9999, (r["label"], r["reason"])
        assert any("output(s) mask, frames come channels-last" in n or "output(s) frames, mask come channels-last"
                   in n for n in r["notes"]), r["notes"]


def test_a_regressor_with_float_labels_reports_mae_and_rmse_and_their_change(triaged):
    """Float labels: MAE and RMSE against them and their change against the PC, on host and web, float and int8
    (calibrated on the float features); summary.md speaks RMSE."""
    ws, rows, _, _ = triaged
    measured = [r for r in rows["regression"] if r["status"] == "measured"]
    assert {r["target"] for r in measured} == {"host", "web"} and {r["quantize"] for r in measured} == {"none", "int8"}
    for r in measured:
        m = r["metrics"]
        assert m["accuracy"] is None and m["rmse"] > 0 and m["mae"] > 0 and m["rmse_increase"] is not None
        assert {c["metric"] for c in r["checks"]} >= {"rmse_increase"}
    exact = _row(rows["regression"], "keras->tflite/none on host")["metrics"]
    assert abs(exact["rmse_increase"]) < 1e-3 and exact["cosine_min"] > 0.9999
    assert "RMSE" in (ws / "reports" / "regression" / "summary.md").read_text()


def _page_facts(path: Path) -> dict:
    """What a person sees of a report in headless Chromium: the summary's columns and task, the sections, the
    plots (titles, drawn points) and the outputs table's output names."""
    from playwright.sync_api import sync_playwright

    from tests.integration.test_report_browser import CHROMIUM_ARGS, _chromium

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(path.as_uri())
            return page.evaluate("""() => ({
                heads: [...document.querySelectorAll('table.summary thead th')].map(t => t.textContent.trim()),
                task: document.querySelector('table.summary').dataset.task,
                sections: [...document.querySelectorAll('section')].map(s => s.id),
                plots: [...document.querySelectorAll('#plots svg, #outputs svg')].map(s => ({
                    title: (s.querySelector('title') || {}).textContent || '',
                    points: s.querySelectorAll('circle, path, rect').length})),
                outputs: [...document.querySelectorAll('#outputs table tbody tr td:nth-child(2)')]
                    .map(t => t.textContent.replace(' (scored)', '').trim()),
                text: document.body.innerText})""")
        finally:
            browser.close()


def test_a_report_speaks_its_task_in_chromium(triaged):
    """A regressor's report: MAE/RMSE/ΔRMSE/cosine columns, an RMSE-vs-size plot with points, no confusion or
    flipped samples; a two-output model without labels (raw): cosine/error columns, each output in the outputs
    table and a per-output error plot."""
    ws = triaged[0]
    reg = _page_facts(ws / "reports" / "regression" / "report.html")
    assert reg["task"] == "regression" and {"MAE", "RMSE", "ΔRMSE", "cos min"} <= set(reg["heads"])
    assert "accuracy" not in reg["heads"] and not {"confusion", "gallery"} & set(reg["sections"])
    assert any("RMSE" in p["title"] and p["points"] >= 4 for p in reg["plots"]), reg["plots"]  # 4 rows + baseline
    assert "no measured points" not in reg["text"]
    raw = _page_facts(ws / "reports" / "channels" / "report.html")
    assert raw["task"] == "raw" and {"cos min", "rel err", "max err"} <= set(raw["heads"])
    assert "outputs" in raw["sections"] and not {"confusion", "gallery"} & set(raw["sections"])
    assert {"mask", "frames"} <= set(raw["outputs"])
    assert any("per-output error" in p["title"] for p in raw["plots"]), raw["plots"]
