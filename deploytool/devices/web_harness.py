"""The web harness on disk: web_harness/ (its page, its script and the npm-installed libraries the page loads:
TF.js with its backends (webgpu too), tfjs-tflite, onnxruntime-web and its WebGPU bundle), where it is and whether `npm ci` ran. It serves nothing
and starts nothing; deploytool.devices.harness_server serves it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from deploytool.errors import HarnessMissing

ENV_HARNESS_DIR = "DEPLOYTOOL_WEB_HARNESS"

# npm package -> file the harness needs from it (a missing one means `npm ci` did not run)
_LIBRARY_FILES = {
    "@tensorflow/tfjs": "dist/tf.min.js",
    "@tensorflow/tfjs-backend-wasm": "dist/tf-backend-wasm.min.js",
    "@tensorflow/tfjs-backend-webgl": "package.json",
    "@tensorflow/tfjs-backend-webgpu": "dist/tf-backend-webgpu.min.js",
    "@tensorflow/tfjs-tflite": "dist/tf-tflite.min.js",
    "onnxruntime-web": "dist/ort.wasm.min.js",
}
# files of a package above that a second bundle of it needs (onnxruntime-web's WebGPU build)
_EXTRA_FILES = {"onnxruntime-web": ("dist/ort.webgpu.min.js", "dist/ort-wasm-simd-threaded.asyncify.wasm")}


def harness_dir() -> Path:
    """web_harness/: $DEPLOYTOOL_WEB_HARNESS, else the one beside the package."""
    env = os.environ.get(ENV_HARNESS_DIR)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "web_harness"


def check_harness(root: Path | None = None) -> Path:
    """The harness dir, or HarnessMissing saying how to install it."""
    root = root or harness_dir()
    if not (root / "index.html").is_file() or not (root / "harness.js").is_file():
        raise HarnessMissing(f"the web harness page is missing in {root}: "
                             f"set {ENV_HARNESS_DIR} to the repository's web_harness/ folder")
    missing = [pkg for pkg, f in _LIBRARY_FILES.items() if not all(
        (root / "node_modules" / pkg / g).is_file() for g in (f, *_EXTRA_FILES.get(pkg, ())))]
    if missing:
        raise HarnessMissing(f"{root}/node_modules lacks {', '.join(missing)}: "
                             f"run `make setup` (cd web_harness && npm ci)")
    return root


def library_versions(root: Path) -> dict[str, str]:
    out = {}
    for pkg in _LIBRARY_FILES:
        try:
            out[pkg] = json.loads((root / "node_modules" / pkg / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            out[pkg] = ""
    return out
