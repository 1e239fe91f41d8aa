"""The lab file the README and `lab run --help` point at is valid and asks for what its header promises."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_examples_lab_toml_loads_with_host_and_web_rows_for_lenet1_and_lenet5():
    from deploytool.lab.labfile import load_lab

    lab = load_lab(ROOT / "examples" / "lab.toml")
    assert [m.name for m in lab.models] == ["lenet1", "lenet5"]
    assert set(lab.targets) == {"host", "web"} and lab.target_options["web"]["backends"] == ["wasm"]
    assert lab.regression.load_difference_cpus == 0.5 and lab.regression.min_accuracy_drop_points == 0.5
