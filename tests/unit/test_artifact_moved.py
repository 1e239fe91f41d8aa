"""A cached conversion copied with its workspace is found in the copy, not in the folder it was made in."""

from __future__ import annotations

import shutil
from pathlib import Path

from deploytool.artifact import Artifact


def _art(path: Path) -> Artifact:
    return Artifact(format="tfjs", framework="keras", path=path, sha256="0" * 64, size_bytes=1,
                    input_shape=(28, 28, 1), num_outputs=10, layout="NHWC")


def test_a_copied_artifact_points_at_its_copy_and_an_unmoved_one_is_unchanged(tmp_path):
    old = tmp_path / "a" / "artifacts" / "k1"
    (old / "web").mkdir(parents=True)
    (old / "web" / "model.json").write_text("{}")
    _art(old / "web" / "model.json").save(old / "artifact.json")
    assert Artifact.load(old / "artifact.json").path == old / "web" / "model.json"

    new = tmp_path / "b" / "artifacts" / "k1"
    shutil.copytree(old, new)
    assert Artifact.load(new / "artifact.json").path == new / "web" / "model.json"  # the old one still exists

    # a path elsewhere (not inside a folder named like the artifact's) is kept as written
    other = tmp_path / "c" / "artifacts" / "k2"
    other.mkdir(parents=True)
    _art(tmp_path / "elsewhere.json").save(other / "artifact.json")
    assert Artifact.load(other / "artifact.json").path == tmp_path / "elsewhere.json"
