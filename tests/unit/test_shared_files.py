"""deploytool.workspace.share_large_files: the large files of bug bundles and finding folders kept once per content
(hard links to a read-only blob), small files left as copies, blobs no folder links any more removed, and an
exported finding made of writable copies."""

from __future__ import annotations

import os
from pathlib import Path

from deploytool.bugs.findings import export_finding
from deploytool.workspace import SHARED_FILE_BYTES, share_large_files


def _folder(root: Path, name: str, model: bytes) -> Path:
    d = root / name
    (d / "model").mkdir(parents=True)
    (d / "model" / "model.onnx").write_bytes(model)
    (d / "reproduce.py").write_text("print('small files stay copies')\n")
    return d


def test_a_model_in_several_bundles_is_one_file_on_disk(tmp_path):
    blobs = tmp_path / "blobs"
    model = os.urandom(SHARED_FILE_BYTES + 1)
    a, b = _folder(tmp_path, "a", model), _folder(tmp_path, "b", model)
    other = _folder(tmp_path, "c", os.urandom(SHARED_FILE_BYTES))
    assert share_large_files(a, blobs) == 0  # the first holder becomes the blob's first link
    assert share_large_files(b, blobs) == len(model) and share_large_files(other, blobs) == 0
    ma, mb = (a / "model" / "model.onnx").stat(), (b / "model" / "model.onnx").stat()
    assert ma.st_ino == mb.st_ino and ma.st_nlink == 3  # a's, b's and the blob
    assert (b / "model" / "model.onnx").read_bytes() == model and len(list(blobs.iterdir())) == 2
    assert (ma.st_mode & 0o777) == 0o444
    assert (a / "reproduce.py").stat().st_ino != (b / "reproduce.py").stat().st_ino  # under the size: copies
    assert share_large_files(b, blobs) == 0  # already shared: nothing to do

    exported = export_finding(b, tmp_path / "attach")
    e = (exported / "model" / "model.onnx").stat()
    assert e.st_ino != mb.st_ino and e.st_nlink == 1 and (e.st_mode & 0o200)  # bytes a user may edit
    assert (exported / "model" / "model.onnx").read_bytes() == model

    for d in (a, b, other):
        for f in d.rglob("*"):
            if f.is_file():
                f.unlink()
    share_large_files(a, blobs)  # any later call removes the blobs nothing links
    assert not blobs.exists() or list(blobs.iterdir()) == []
