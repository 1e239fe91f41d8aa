"""A bug bundle's folder is named for the model and the combination: a lab night's cells of several models
share one run's bugs/ folder, and the same failing combination of two models must not overwrite each other."""

from __future__ import annotations

from deploytool.bugs.bundle import slug
from deploytool.result import Combo, Result, Status


def _row(model: str, combo: Combo) -> Result:
    return Result(run_id="night-1", combo_key=f"{model}-k", model=model, dataset="mnist", combo=combo,
                  status=Status.LOAD_FAILED)


def test_two_models_failing_the_same_combination_get_two_bundle_folders():
    combo = Combo("torch", "tflite", "dynamic", "web", backend="wasm")
    a, b = slug(_row("lenet1", combo)), slug(_row("lenet5", combo))
    assert a != b and a.startswith("lenet1-") and b.startswith("lenet5-")
    assert slug(_row("lenet5", Combo("torch", "tflite", "int8", "web", backend="wasm"))) != b


def test_a_bundle_folder_name_is_one_safe_path_segment():
    name = slug(_row("../../etc", Combo("keras", "tflite", "none", "android", device="emu/5554", backend="gpu")))
    assert "/" not in name and not name.startswith(".")  # one segment, never "..", never hidden
