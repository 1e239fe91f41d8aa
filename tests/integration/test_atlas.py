"""The atlas end to end at its quick tier: two architectures from two providers (torchvision's SqueezeNet on images,
a transformers BERT classifier on token ids and a mask; random weights) built into the workspace with informative test sets,
each migrated by the same `migrate` the CLI runs to ONNX on the host (onnxruntime) and in Chromium
(onnxruntime-web), and drawn as atlas.html. One format keeps it within the integration tier's budget; the routes
are those of any model file (tests/integration/test_migrate_*.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deploytool.atlas.page import build_grid
from deploytool.atlas.runner import AtlasRequest, run_atlas
from deploytool.store import open_store
from deploytool.workspace import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# two PyTorch providers: no TensorFlow is imported (the Keras provider's builds run in the atlas itself, README)
ARCHITECTURES = ("torchvision/squeezenet1_1", "transformers/bert")


def test_two_architectures_from_two_providers_migrate_on_host_and_web_into_one_grid(tmp_path):
    ws = Workspace.open(tmp_path / "ws")
    req = AtlasRequest(tier="quick", architectures=ARCHITECTURES, formats=("onnx",), quantize=("none",),
                       targets=("host", "web"), timeout_s=300)
    out = run_atlas(req, ws.root, log=lambda line: None)

    assert [e.name for e in out.entries] == list(ARCHITECTURES)
    for e in out.entries:
        assert e.run_id and not e.error, e.error
        built = e.built or {}
        # informative: a random classifier answers more than one class over its 16 samples
        assert built["classes_predicted"] >= 3, built
        data = np.load(built["data"])
        first = data.files[0]
        assert data[first].shape[0] == 16 and f"{first}_train" in data.files  # a calibration split beside it
    assert {e.provider for e in out.entries} == {"torchvision", "transformers"}
    assert set(np.load((out.entries[1].built or {})["data"]).files) >= {"input_ids", "attention_mask"}  # tokens and a mask

    rows, converters, results = build_grid(ws, open_store(None, ws.default_db_url), "quick", out.entries)
    for row in rows:
        assert sorted(row.cells) == ["onnx/none host", "onnx/none web:wasm"], row.name
        for route, cell in row.cells.items():
            # every cell measured, or a failure triaged as someone else's: never deploytool's own bug
            assert cell.outcome in ("pass", "degraded", "fail") or cell.triage not in ("", "internal_error"), \
                (row.name, route, cell.title)
    assert {r.combo.target for r in results} == {"host", "web"}
    assert {converters[(e.name, "onnx/none host")] for e in out.entries} == {"torch.onnx"}

    page = out.page.read_text() if out.page else ""
    assert "transformers/bert" in page and "torchvision/squeezenet1_1" in page and "converts" in page
    saved = json.loads((out.page.parent / "atlas.json").read_text()) if out.page else {}
    assert [e["run_id"] for e in saved["entries"]] == [e.run_id for e in out.entries]
