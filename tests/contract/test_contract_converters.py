"""Every converter route (source format x format x quantize word that
`convert.quantize_modes` lists), on a tiny model: either an Artifact whose
file exists, whose sha256 and size are its content's and which its host
runtime (if any) loads and runs, or StageFailed with a one-line reason.
Every other combination a user can type is refused by `convert.plan` in one
line, or is an alias of a route. Conversions are cached (~/.cache/deploytool/tests/test-models/).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deploytool import convert, runtimes
from deploytool.artifact import content_hash, size_on_disk
from deploytool.data.feed import Feed
from deploytool.errors import StageFailed
from tests.contract import registry_cases as cases
from tests.contract.runtime_contract import one_line

ROUTES = cases.routes()
FAILURE_STATUSES = ("conversion_failed", "unsupported", "timeout")


@pytest.mark.parametrize("route", ROUTES, ids=cases.key_id)
def test_route_converts_or_says_why(route, models):
    kind, fmt, quantize = route
    try:
        art = models.converted(kind, fmt, quantize)
    except StageFailed as e:
        assert e.status in FAILURE_STATUSES, e.status
        assert e.reason == str(e)
        one_line(e)
        return
    src = models.source(kind)
    assert Path(art.path).exists()
    assert art.format == convert.artifact_format(fmt) and art.quantize == quantize
    assert art.sha256 == content_hash(art.path) and art.size_bytes == size_on_disk(art.path) > 0
    assert art.source_sha256 == src.sha256
    assert (art.layout, tuple(art.input_shape), art.num_outputs) == (src.layout, tuple(src.input_shape),
                                                                    src.num_outputs)
    host = runtimes.default_runtime("host", art.format)
    if not host:
        return  # e.g. a TF.js graph: it runs in the browser only (tests/integration/test_contract_devices.py)
    x = models.inputs(art, 4)
    with runtimes.make_runtime("host", art.format, host, warmup_runs=0, latency_samples=1) as rt:
        rt.load(art)
        out = rt.run(Feed.one("input", x))
    assert out.outputs.shape == (4, src.num_outputs) and np.isfinite(out.outputs).all()


@pytest.mark.parametrize("combo", cases.non_routes(), ids=cases.key_id)
def test_other_combinations_are_refused_in_one_line_or_alias_a_route(combo):
    kind, fmt, quantize = combo
    try:
        p = convert.plan(kind, fmt, quantize)
    except StageFailed as e:
        assert e.status == "unsupported"
        one_line(e)
        return
    # Planned but not in `--quantize all`: an alias, whose mode is a listed route's.
    listed = {convert.plan(kind, fmt, q).mode for q in convert.quantize_modes(kind, fmt)}
    assert p.mode in listed, f"{combo} plans {p.mode!r}, which no listed route does"
