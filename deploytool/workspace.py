"""The workspace (`--workspace DIR`, default ./runs): where trained models,
converted artifacts, per-sample outputs, the results database and reports
live. It only names places and finds cached entries by key; it never decides
what to compute.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_WORKSPACE = Path("runs")


def stable_hash(obj: Any, length: int = 16) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:length]


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def open(cls, root: str | Path | None = None) -> "Workspace":
        r = Path(root or os.environ.get("DEPLOYTOOL_WORKSPACE") or DEFAULT_WORKSPACE).resolve()
        r.mkdir(parents=True, exist_ok=True)
        return cls(r)

    def model_dir(self, name: str, framework: str, key: str) -> Path:
        return self.root / "models" / f"{name}-{framework}-{key}"

    def artifact_dir(self, key: str) -> Path:
        return self.root / "artifacts" / key

    def report_dir(self, run_id: str) -> Path:
        return self.root / "reports" / run_id

    def outputs_path(self, run_id: str, combo_key: str) -> Path:
        return self.root / "outputs" / run_id / f"{combo_key}.npy"

    @property
    def default_db_url(self) -> str:
        return f"sqlite:///{self.root / 'results.db'}"


def fresh_dir(path: Path) -> Path:
    """An empty directory at `path` (a half-written earlier attempt is removed)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path
