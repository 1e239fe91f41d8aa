"""MNIST: the bundled 10,000-digit split (offline, checksummed), or the official
IDX files when the user points at them with --data-dir."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from deploytool.data.raw import RawData, register_dataset
from deploytool.errors import DataError
from deploytool.spec import ModelSpec

BUNDLED = Path(__file__).resolve().parent / "bundled" / "mnist10k.npz"
BUNDLED_SHA256 = "031d3adaba72bcaab5a3acbf25e5171768fc75544a1dd7b9bed9b7b4d07f4a25"
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def load(data_dir: Path | None) -> RawData:
    return load_bundled() if data_dir is None else load_idx(Path(data_dir))


@register_dataset("mnist")
def _load(spec: ModelSpec, data_dir: Path | None) -> RawData:
    return load(data_dir)


def load_bundled() -> RawData:
    blob = BUNDLED.read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != BUNDLED_SHA256:
        raise DataError(f"{BUNDLED}: checksum {digest[:12]}… does not match the pinned one; "
                        "restore the file from git (git checkout -- deploytool/data/bundled)")
    with np.load(BUNDLED, allow_pickle=False) as z:
        return RawData(z["x_train"], z["y_train"], z["x_test"], z["y_test"], str(z["origin"]))


def read_idx(path: Path) -> np.ndarray:
    import gzip  # the MNIST files a user points at, never the bundled set: not loaded for every command

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DataError(f"{path}: not an IDX file of unsigned bytes; use the official MNIST files")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise DataError(f"{path}: truncated ({body.size} bytes for shape {dims}); download it again")
    return body.reshape(dims)


def load_idx(data_dir: Path) -> RawData:
    if not data_dir.is_dir():
        raise DataError(f"--data-dir {data_dir} does not exist; point it at the folder holding the MNIST IDX files")
    arrays = {}
    for key, stem in IDX_FILES.items():
        found = [p for p in (data_dir / stem, data_dir / f"{stem}.gz") if p.exists()]
        if not found:
            raise DataError(f"{data_dir}: {stem}[.gz] is missing; put the four official MNIST IDX files there "
                            "or drop --data-dir to use the bundled digits")
        arrays[key] = read_idx(found[0])
    return RawData(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"],
                   f"official MNIST IDX files in {data_dir}")
