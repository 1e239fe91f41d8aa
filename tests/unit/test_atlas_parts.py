"""The atlas' pure parts: its architectures (enough of them, in every family, the quick tier smaller than the full),
the synthetic test sets (seeded, informative: samples differ where a pooled network looks), the rescaling that
makes a random classifier's answers vary, the choice of architectures by name, provider or family, the grid's
outcomes, counts and per-converter lines, and a lab file naming an architecture."""

from __future__ import annotations

import dataclasses

import math

import numpy as np
import pytest

from deploytool.atlas import ATLAS, FAMILIES, inputs
from deploytool.atlas import grid
from deploytool.atlas.runner import select
from deploytool.errors import SpecError, UnknownOption
from deploytool.lab.labfile import load_lab
from deploytool.result import Combo, Result, Status
from tests.scores import compare
from deploytool.tolerances import DEFAULT_TOLERANCES


def test_the_atlas_has_25_architectures_or_more_in_every_family_each_smaller_in_its_quick_tier():
    assert len(ATLAS) >= 25
    assert {ATLAS[n].family for n in ATLAS} == set(FAMILIES)
    assert {ATLAS[n].provider for n in ATLAS} == {"keras", "torchvision", "transformers"}
    for name in ATLAS:
        a = ATLAS[name]
        assert name.startswith(a.provider + "/")
        assert math.prod(a.quick.input_shape) <= math.prod(a.full.input_shape), name
        assert a.quick.samples <= a.full.samples, name
        assert a.quick != a.full, name  # a reduced width, depth or input: never the full size again


def test_images_are_seeded_laid_out_as_asked_and_differ_in_their_mean_colour():
    a = inputs.images(8, (32, 32, 3))
    assert a.shape == (8, 32, 32, 3) and a.dtype == np.float32
    assert np.array_equal(a, inputs.images(8, (32, 32, 3)))
    assert not np.array_equal(a, inputs.images(8, (32, 32, 3), seed=inputs.SEED + 1))
    nchw = inputs.images(8, (3, 32, 32), channels_first=True)
    assert nchw.shape == (8, 3, 32, 32) and np.array_equal(nchw, a.transpose(0, 3, 1, 2))
    # what a globally pooled network sees: i.i.d. noise would give every sample the same channel means
    assert a.mean(axis=(1, 2)).std(axis=0).min() > 0.2
    assert -2.5 <= a.min() and a.max() <= 2.5


def test_tokens_have_lengths_of_their_own_and_padding_under_a_zero_mask():
    ids, mask = inputs.tokens(32, 16, 100, min_length=4)
    assert ids.dtype == mask.dtype == np.int64 and ids.shape == mask.shape == (32, 16)
    lengths = mask.sum(axis=1)
    assert lengths.min() >= 4 and len(set(lengths.tolist())) > 3
    assert (ids[mask == 0] == 0).all() and (ids[mask == 1] >= 1).all() and ids.max() < 100
    assert (np.diff(mask, axis=1) <= 0).all()  # the padding is at the end


def test_audio_inputs_have_their_shapes_and_differ_between_samples():
    f = inputs.audio_features(4, 80, 50)
    w = inputs.waveform(4, 800)
    assert f.shape == (4, 80, 50) and w.shape == (4, 800)
    assert f.std(axis=0).mean() > 0.05 and w.std(axis=0).mean() > 0.05


def test_rescaling_makes_near_constant_logits_vary_and_choose_several_classes():
    rng = np.random.default_rng(0)
    logits = 5.0 + 1e-4 * rng.normal(size=(64, 10))  # a random net: one point, tiny deviations
    assert inputs.spread_of(logits)[1] < 1e-3  # nothing visibly varies
    k, shift = inputs.rescale_for_spread(logits, target_std=2.0)
    new = k * (logits - shift)
    assert np.isclose(np.mean(new.std(axis=0)), 2.0, rtol=1e-3)
    assert np.allclose(new.mean(axis=0), 0, atol=0.05)  # centred (shift is float32, as the bias it enters)
    classes, std = inputs.spread_of(new)
    assert classes >= 8 and std > 1.5
    assert inputs.rescale_for_spread(np.ones((4, 3)))[0] == 1.0  # nothing varies: nothing to scale


def test_spread_counts_classes_only_for_class_scores():
    assert inputs.spread_of(np.eye(4)) == (4, pytest.approx(np.eye(4).std(axis=0).mean()))
    assert inputs.spread_of(np.zeros((4, 3, 5)))[0] == 0  # per-position logits: not one answer per sample


def test_architectures_are_chosen_by_name_provider_family_or_suffix_and_an_unknown_word_is_one_line():
    assert select(()) == list(ATLAS)
    assert all(n.startswith("torchvision/") for n in select(("torchvision",)))
    assert select(("audio",)) == [n for n in ATLAS if ATLAS[n].family == "audio"]
    assert select(("bert,keras/resnet50",)) == ["transformers/bert", "keras/resnet50"]
    assert select(("mobilenet_v2",)) == ["keras/mobilenet_v2", "torchvision/mobilenet_v2"]
    with pytest.raises(UnknownOption, match="--arch resnet5: no such architecture"):
        select(("resnet5",))


def _row(fmt: str, q: str, target: str, status: Status, agreement: float | None = None) -> Result:
    combo = Combo("keras", fmt, q, target, backend="wasm" if target == "web" else "")
    cmp_ = None
    if agreement is not None:
        base = np.eye(10, dtype=np.float32)[np.arange(100) % 10]
        got = base.copy()
        got[: int(100 * (1 - agreement)), 0] += 5  # these samples now answer class 0
        cmp_ = compare(got, base, None, DEFAULT_TOLERANCES["quantized"])
    return Result(run_id="r", combo_key=f"{fmt}{q}{target}", model="m", dataset="npz", combo=combo, status=status,
                  reason="" if agreement is not None else "onnx2tf 1.29: no", comparison=cmp_)


def test_a_grid_cell_says_its_verdict_or_what_failed_and_the_routes_are_columns():
    passed = _row("tflite", "none", "host", Status.MEASURED, 1.0)
    failed = _row("tflite", "int8", "web", Status.MEASURED, 0.5)
    broken = _row("onnx", "none", "host", Status.CONVERSION_FAILED)
    gap = _row("tfjs", "none", "web", Status.UNSUPPORTED)
    crashed = _row("onnx", "none", "web", Status.RUNTIME_FAILED)
    assert [grid.outcome_of(r) for r in (passed, failed, broken, gap, crashed)] == \
        ["pass", "fail", "conversion_failed", "unsupported", "runtime_failed"]
    assert grid.route_of(failed) == "tflite/int8 web:wasm"
    cell = grid.cell_of(broken, "../r/report.html", "")
    assert cell.outcome == "conversion_failed" and "onnx2tf 1.29: no" in cell.title


def test_a_model_whose_fp16_weights_alone_move_its_outputs_is_said_to_amplify_rounding():
    """Issue 38: a random-weight real-size network fails every quantized route alike (two independent quantizers,
    an uncalibrated one included); its line says so when its fp16-weight host row, the smallest rounding of any
    route, already moves its outputs by more than ROUNDING_REL_ERROR of their range or flips more than
    ROUNDING_FLIPS of the baseline's top-1."""
    flips_much = _row("tflite", "fp16", "host", Status.MEASURED, 0.83)
    int8 = _row("tflite", "int8", "host", Status.MEASURED, 0.5)
    cmp_ = flips_much.comparison
    assert cmp_ is not None and cmp_.rel_error is not None
    assert cmp_.agreement == 0.85  # 17 samples pushed to class 0, 2 of them class 0 already
    rel = cmp_.rel_error
    assert grid.rounding_sensitivity([int8, flips_much]) == (
        f"fp16 weights alone move its outputs by {100 * rel:.1f}% of their range and flip 15% of top-1: the model "
        "amplifies rounding, so its quantized cells say more about its weights than about their converters")

    def fp16(rel_error: float, agreement: float = 1.0, target: str = "host") -> Result:
        row = _row("tflite", "fp16", target, Status.MEASURED, 1.0)
        assert row.comparison is not None
        return dataclasses.replace(row, comparison=dataclasses.replace(row.comparison, rel_error=rel_error,
                                                                       agreement=agreement))

    assert "by 1.5% of their range and flip 0%" in grid.rounding_sensitivity([fp16(0.015)])  # moved, no flip
    assert grid.rounding_sensitivity([fp16(grid.ROUNDING_REL_ERROR)]) == ""  # at the limits, not past them
    assert grid.rounding_sensitivity([fp16(0.001, 0.96)]) == ""  # 4% flipped: within ROUNDING_FLIPS
    assert grid.rounding_sensitivity([fp16(0.5, 0.5, target="web")]) == ""  # a runtime's fault, not the weights'
    assert grid.rounding_sensitivity([_row("tflite", "fp16", "host", Status.RUNTIME_FAILED)]) == ""


def test_the_grid_counts_outcomes_and_says_per_converter_how_many_architectures_it_converts():
    def row(name: str, **cells: str) -> grid.GridRow:
        return grid.GridRow(name, "vision-cnn", "keras", 1, "", cells={r: grid.Cell(o, "") for r, o in cells.items()})

    rows = [row("a", t="pass", o="conversion_failed"), row("b", t="fail", o="pass"), row("c")]
    conv = {("a", "t"): "TFLiteConverter", ("b", "t"): "TFLiteConverter", ("a", "o"): "onnx2tf",
            ("b", "o"): "onnx2tf"}
    lines = {s.converter: s.line for s in grid.summaries(rows, conv)}
    assert lines == {"TFLiteConverter": "TFLiteConverter converts 2 of 2 architectures; 1 of 2 rows pass",
                     "onnx2tf": "onnx2tf converts 1 of 2 architectures; 1 of 2 rows pass"}
    counts = grid.counts(rows)
    assert (counts["pass"], counts["fail"], counts["conversion_failed"], counts["build_failed"]) == (2, 1, 1, 1)
    assert grid.route_order(rows) == ["o", "t"]


def test_a_lab_file_names_an_atlas_architecture_and_a_wrong_one_is_one_line(tmp_path):
    lab = tmp_path / "lab.toml"
    lab.write_text('[[models]]\narchitecture = "keras/mobilenet_v2"\n[matrix]\nformats = ["tflite"]\n')
    m = load_lab(lab).models[0]
    assert (m.name, m.architecture, m.tier) == ("keras/mobilenet_v2", "keras/mobilenet_v2", "quick")
    lab.write_text('[[models]]\narchitecture = "keras/mobilenet_v22"\n')
    with pytest.raises(SpecError, match="not an atlas architecture; did you mean 'keras/mobilenet_v2'"):
        load_lab(lab)
    lab.write_text('[[models]]\narchitecture = "keras/mobilenet_v2"\ntier = "huge"\n')
    with pytest.raises(SpecError, match="tier"):
        load_lab(lab)
    lab.write_text('[[models]]\narchitecture = "keras/mobilenet_v2"\ndata = "x.npz"\n')
    with pytest.raises(SpecError, match="its own test set"):
        load_lab(lab)


def test_a_lab_models_weights_are_random_for_an_architecture_unless_it_says_otherwise(tmp_path):
    """`random_weights` (migrate's --random-weights, for the night's triage and peer rule): an atlas architecture's
    weights are random by default, a zoo model's trained; either says otherwise; a non-bool is one line."""
    from deploytool.lab.night import model_request

    lab = tmp_path / "lab.toml"
    lab.write_text('[[models]]\narchitecture = "keras/mobilenet_v2"\n[[models]]\nname = "lenet5"\n'
                   '[[models]]\nname = "lenet1"\nrandom_weights = true\n'
                   '[[models]]\narchitecture = "keras/mobilenet_v1"\nrandom_weights = false\n')
    loaded = load_lab(lab)
    assert [m.random_weights for m in loaded.models] == [True, False, True, False]
    assert [model_request(loaded, m, 1).random_weights for m in loaded.models] == [True, False, True, False]
    lab.write_text('[[models]]\nname = "lenet5"\nrandom_weights = "yes"\n')
    with pytest.raises(SpecError, match="random_weights' must be bool"):
        load_lab(lab)


def test_the_example_atlas_lab_file_loads():
    from pathlib import Path

    lab = load_lab(Path(__file__).resolve().parents[2] / "examples" / "atlas.toml")
    assert len(lab.models) >= 25 and all(m.architecture for m in lab.models)


def test_an_atlas_run_of_some_architectures_keeps_the_other_lines_of_the_last_one():
    from deploytool.atlas.grid import AtlasEntry
    from deploytool.atlas.runner import merged

    last = [AtlasEntry("torchvision/squeezenet1_1", "vision-cnn", "torchvision", run_id="old-sq"),
            AtlasEntry("keras/mobilenet_v1", "vision-cnn", "keras", run_id="old-mb"),
            AtlasEntry("keras/gone", "vision-cnn", "keras", run_id="x")]  # no longer in the atlas: dropped
    fresh = [AtlasEntry("keras/mobilenet_v1", "vision-cnn", "keras", run_id="new-mb")]
    lines = merged(last, fresh)
    assert [(e.name, e.run_id) for e in lines] == [("keras/mobilenet_v1", "new-mb"),
                                                   ("torchvision/squeezenet1_1", "old-sq")]  # the atlas' order
    assert merged([], fresh) == fresh


def test_torchvision_is_imported_only_past_its_missing_extension():
    """The indexes' torchvision wheel is the CUDA build, whose C extension cannot load beside the CPU torch; only
    `import_torchvision` imports it past that. A builder importing `torchvision.models.x` itself failed with
    "operator torchvision::nms does not exist" whenever it was the first torchvision model its process built
    (the full tier's ResNet18 after a Keras build)."""
    import ast
    import inspect

    from deploytool.atlas.providers import torchvision_models

    tree = ast.parse(inspect.getsource(torchvision_models))
    offenders = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name != "import_torchvision"):
        for node in ast.walk(fn):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{fn.name}: {n}" for n in names if n.split(".")[0] == "torchvision"]
    assert offenders == []


def test_the_0_255_warning_is_left_out_only_for_an_architecture_that_rescales_itself():
    """An atlas architecture whose model rescales inside itself (pixels "0-255": keras.applications' EfficientNets)
    is given 0-255 pixels under --scale 1 by design: the warning meant for a user's data is not logged for it; its
    other warnings are, and an architecture of normalised pixels gets every warning."""
    import numpy as np

    from deploytool.atlas.runner import data_warning
    from deploytool.data.check import preprocessing_warnings
    from deploytool.spec import Preprocess

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (64, 8, 8, 3)).astype(np.float32)
    x[..., 0] *= 0.2  # a dark red channel, declared as a dark blue one: a BGR warning too
    warnings = preprocessing_warnings(x, Preprocess(1.0, (127.5, 127.5, 25.5), (1.0, 1.0, 1.0)))
    assert any(w.startswith("the test set holds pixels 0..") for w in warnings) and len(warnings) >= 2, warnings
    for pixels, kept in (("0-255", [w for w in warnings if "--scale is 1" not in w]), ("normalised", warnings)):
        logged: list[str] = []
        warn = data_warning(pixels, logged.append)
        for w in warnings:
            warn(w)
        assert logged == [f"  {w}" for w in kept], (pixels, logged)
