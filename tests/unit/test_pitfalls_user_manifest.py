"""The pitfalls study on a user's own .toml manifest (not in the zoo): its migrate matrix is asked for that file,
not for the bare model name (which migrate would not find)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_study_hands_migrate_the_manifest_it_was_given(tmp_path):
    from deploytool.spec import load_spec
    from deploytool.study.pitfalls import Plan, _request

    text = (ROOT / "models" / "vgg_small.toml").read_text()
    manifest = tmp_path / "vgg_synth.toml"
    manifest.write_text(text.replace('name = "vgg_small"', 'name = "vgg_synth"')
                        .replace('dataset = "cifar10"', 'dataset = "synthetic"'))
    plan = Plan.build(str(manifest), "keras", None, None, 16)
    req = _request(plan, {"formats": "tflite", "quantize": "none", "targets": "host", "target_options": {}})
    assert Path(req.model) == manifest and load_spec(req.model).name == "vgg_synth"
    # a zoo name still resolves to the zoo's manifest
    zoo = _request(Plan.build("lenet1", "keras", None, None, 16),
                   {"formats": "tflite", "quantize": "none", "targets": "host", "target_options": {}})
    assert load_spec(zoo.model).name == "lenet1"
