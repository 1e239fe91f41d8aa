"""What localize says when a trace compared nothing, one value, or found the op that breaks: a check that
compared nothing must say so, never read as "within the threshold"."""

from __future__ import annotations

from deploytool.localize import Cut, Localization, _verdict_traced


def test_a_trace_that_compared_nothing_says_so_and_does_not_pass():
    verdict = _verdict_traced(Localization(row="r", threshold=1e-3), traced=1, elsewhere="")
    assert verdict.startswith("nothing was compared") and "within the threshold" not in verdict
    on_web = _verdict_traced(Localization(row="r", threshold=1e-3), traced=5, elsewhere="web")
    assert on_web.startswith("nothing was compared") and "right op by op" not in on_web


def test_a_trace_that_compared_values_reports_them():
    ok = Localization(row="r", threshold=1e-3, cuts=[Cut(0, "conv", "Conv", "ok", rel_error=1e-5)])
    assert "within the threshold (1 of 3 values compared" in _verdict_traced(ok, traced=3, elsewhere="")
    bad = Localization(row="r", threshold=1e-3, cuts=[Cut(0, "conv", "Conv", "ok", rel_error=1e-5),
                                                      Cut(1, "fc", "Gemm", "wrong", rel_error=0.4, input_rel_error=1e-5)])
    assert _verdict_traced(bad, traced=3, elsewhere="").startswith("op fc (Gemm, #1) is the first")
