"""Confirmation: an upstream candidate becomes `confirmed` only when its bundle's standalone reproducer — run in a
fresh Python process that cannot import deploytool, from the bundle's own files, on this machine's versions —
shows the fault. The reproducer is the bundle's: `reproduce_convert.py` for a conversion (the converter's exact
call), `reproduce_web.py` for a browser row (reproduce_web.html in headless Chromium with the npm packages
alone), `reproduce.py` for a host runtime's row. Each exits 1 when the fault reproduces ("REPRODUCED" on its
last lines), 0 when it does not; anything else means it could not say. This module runs that process and reads
its verdict; it never runs a model itself and never edits a bundle."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from deploytool.devices.browser import find_chromium
from deploytool.devices.web_harness import harness_dir
from deploytool.errors import DeploytoolError
from deploytool.value import value

CONFIRMED, NOT_REPRODUCED, NOT_RUN = "confirmed", "not_reproduced", "not_run"
TIMEOUT_S = 600.0

# Run first in the reproducer's process: deploytool cannot be imported there (an installed or editable copy on
# the path included), then the reproducer runs as __main__ with its own arguments.
_BLOCK = """
import runpy, sys
class _NoDeploytool:
    def find_spec(self, name, path=None, target=None):
        if name == "deploytool" or name.startswith("deploytool."):
            raise ImportError("deploytool is not importable here: a bug bundle's reproducer stands alone")
        return None
sys.meta_path.insert(0, _NoDeploytool())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@value
class Confirmation:
    """What a finding's bare reproducer showed: `state` (confirmed, not_reproduced, not_run), the command as run
    (from the bundle's folder), the last lines it printed, how long it took, and what it ran on."""

    state: str
    reproducer: str
    command: str
    output: str
    seconds: float
    at: str
    key: str  # the bundle's model, reproducers and versions: the same key needs no second run

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def reproducer_of(bundle: Path) -> list[str] | None:
    """The bundle's standalone reproducer and its arguments, or None where there is none to run here (a phone's
    row: it needs the phone)."""
    meta = _meta(bundle)
    if meta.get("convert") and (bundle / "reproduce_convert.py").is_file():
        return ["reproduce_convert.py"]
    if meta.get("web_reproducer") and (bundle / "reproduce_web.py").is_file():
        return ["reproduce_web.py", "--node-modules", str(harness_dir() / "node_modules"),
                "--chromium", str(find_chromium())]
    if meta.get("host_runtime") and meta.get("judges_itself") and (bundle / "reproduce.py").is_file():
        return ["reproduce.py"]
    return None


def bundle_key(bundle: Path) -> str:
    """The bundle's model files, reproducer scripts and the versions it names: what a verdict depends on."""
    h = hashlib.sha256()
    meta = _meta(bundle)
    h.update(json.dumps({"versions": meta.get("versions"), "packages": meta.get("packages"),
                         "convert": meta.get("convert"), "status": meta.get("status")}, sort_keys=True).encode())
    for p in sorted([*(bundle / "model").rglob("*"), *bundle.glob("reproduce*"), *bundle.glob("*.bin")]):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:24]


def confirm(bundle: Path, timeout_s: float = TIMEOUT_S) -> Confirmation:
    """Run the bundle's reproducer in a fresh process that cannot import deploytool and read its verdict."""
    import subprocess  # only a run with an upstream candidate gets here: not loaded for every migrate

    bundle = Path(bundle)
    at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    key = bundle_key(bundle) if bundle.is_dir() else ""
    try:
        args = reproducer_of(bundle) if bundle.is_dir() else None
    except DeploytoolError as e:  # no Chromium, no harness: nothing to run a browser reproducer with
        return Confirmation(NOT_RUN, "", "", str(e), 0.0, at, key)
    if args is None:
        return Confirmation(NOT_RUN, "", "", "no standalone reproducer runs on this machine for this row", 0.0,
                            at, key)
    command = " ".join(["python", *args[:1]])
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1",
               TFDF_DISABLE_WELCOME_MESSAGE="1", ORT_DISABLE_TELEMETRY="1", GSETTINGS_BACKEND="memory")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="deploytool-confirm-") as tmp:
        copy = Path(tmp) / bundle.name  # the reproducer writes (converted/, caches): the bundle stays as it was
        shutil.copytree(bundle, copy)
        env["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")  # a browser's crash database: gone with the copy
        try:
            done = subprocess.run([sys.executable, "-I", "-c", _BLOCK, *args], cwd=copy, env=env,
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return Confirmation(NOT_RUN, args[0], command, f"no verdict within {timeout_s:g} s", timeout_s, at, key)
    seconds = round(time.perf_counter() - t0, 2)
    output = _tail(done.stderr) + "\n" + _tail(done.stdout)
    if done.returncode == 1 and "REPRODUCED" in done.stdout:
        state = CONFIRMED
    elif done.returncode == 0:
        state = NOT_REPRODUCED
    else:
        state = NOT_RUN
    return Confirmation(state, args[0], command, output, seconds, at, key)


def _tail(text: str, lines: int = 25) -> str:
    kept = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])[-4000:]


def _meta(bundle: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((bundle / "bundle.json").read_text()))
    except (OSError, ValueError):
        return {}
