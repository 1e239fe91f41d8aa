"""The frameworks study's arithmetic, pinned: mean ± sample sd, CPU % and busy threads from per-thread CPU times,
the same-weights comparison, per-epoch mean curves, and the line chart they are drawn with."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deploytool.report.lines import Series, line_chart
from deploytool.study.frameworks import fmt_mean_sd, framework_summary, mean_curve, mean_sd, seeded, seeds_for
from deploytool.study.same_weights import logit_differences
from deploytool.proc.threads import busy_threads, cpu_percent, thread_cpu_seconds


def test_mean_and_sample_sd():
    m, sd = mean_sd([0.97, 0.98, 0.99])
    assert m == pytest.approx(0.98) and sd == pytest.approx(0.01)  # n - 1: sqrt(0.0002 / 2)
    assert mean_sd([0.5]) == (0.5, None)
    m, sd = mean_sd([])
    assert math.isnan(m) and sd is None
    assert fmt_mean_sd([0.97, 0.98, 0.99], 100) == "98.00 ± 1.00"
    assert fmt_mean_sd([0.975], 100) == "97.50 (one seed)"
    assert fmt_mean_sd([]) == "—"


def test_cpu_percent_is_cpu_time_over_wall_time():
    assert cpu_percent(3.0, 2.0) == 150.0  # one core and a half busy
    assert cpu_percent(0.5, 2.0) == 25.0
    assert cpu_percent(1.0, 0.0) == 0.0


def test_busy_threads_counts_threads_with_a_real_share_of_the_span():
    before = {1: 10.0, 2: 5.0, 3: 0.0}
    after = {1: 12.0, 2: 5.0, 3: 1.0, 4: 0.9, 5: 0.02}  # 4 was born in the span; 5 did 0.5% of the work
    assert busy_threads(before, after) == 3  # 1 (2.0 s), 3 (1.0 s), 4 (0.9 s) of 3.92 s
    assert busy_threads(before, after, min_share=0.4) == 1
    assert busy_threads(before, before) == 0


def test_thread_cpu_seconds_reads_utime_and_stime(tmp_path):
    import os

    tick = os.sysconf("SC_CLK_TCK")
    task = tmp_path / "4242"
    task.mkdir()
    # comm with a space and a parenthesis: the fields are counted after the last ')'
    fields = ["S"] + ["0"] * 10 + [str(3 * tick), str(tick)] + ["0"] * 30
    (task / "stat").write_text("4242 (tf (worker) 1) " + " ".join(fields) + "\n")
    assert thread_cpu_seconds(tmp_path) == {4242: 4.0}
    assert thread_cpu_seconds(tmp_path / "missing") == {}
    live = thread_cpu_seconds()
    assert os.getpid() in live and all(v >= 0 for v in live.values())


def test_logit_differences_name_the_samples_that_differ():
    a = np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, 3.0], [1.0, 0.0, 0.0]])
    b = a.copy()
    b[1] = [0.0, 0.4, 0.5]  # now class 2: differs by 0.6
    b[3, 0] += 1e-6
    d = logit_differences(a, b, np.array([0, 1, 2, 1]))
    assert d["n"] == 4 and d["agreement"] == 0.75 and d["n_differing"] == 1
    assert d["accuracy_a"] == 0.75 and d["accuracy_b"] == 0.5
    assert d["differing"] == [{"index": 1, "label": 1, "a": 1, "b": 2, "max_abs_logit_diff": pytest.approx(0.6)}]
    assert d["max_abs_logit_diff"] == pytest.approx(0.6)
    assert d["mean_abs_logit_diff"] == pytest.approx((0.6 + 1e-6) / 12)
    assert [x["index"] for x in d["largest"][:2]] == [1, 3]
    same = logit_differences(a, a, np.array([0, 1, 2, 0]))
    assert same["agreement"] == 1.0 and same["max_abs_logit_diff"] == 0.0 and same["differing"] == []


def _point(seed, acc, secs, cpu=100.0, peak=2**20, history=()):
    return {"seed": seed, "test_accuracy": acc, "seconds_per_epoch": secs, "cpu_percent": cpu, "peak_rss_bytes": peak,
            "history": [dict(h) for h in history]}


def test_framework_summary_and_mean_curves():
    pts = [_point(1, 0.96, [2.0, 4.0], 90.0, 100, [{"loss": 1.0}, {"loss": 0.5}]),
           _point(2, 0.98, [1.0, 1.0], 110.0, 300, [{"loss": 0.8}])]
    s = framework_summary(pts)
    assert s["seeds"] == [1, 2]
    assert s["test_accuracy"]["mean"] == pytest.approx(0.97) and s["test_accuracy"]["min"] == 0.96
    assert s["seconds_per_epoch"]["mean"] == pytest.approx(2.0)  # seeds' means: 3.0 and 1.0
    assert s["seconds_per_later_epoch"]["mean"] == pytest.approx(2.5)  # without the first epoch: 4.0 and 1.0
    assert s["seconds_per_later_epoch"]["sd"] == pytest.approx(np.std([4.0, 1.0], ddof=1))
    assert s["cpu_percent"]["mean"] == pytest.approx(100.0) and s["peak_rss_bytes"]["max"] == 300
    assert mean_curve(pts, "loss") == pytest.approx([0.9, 0.5])  # epoch 2: only seed 1 has it


def test_seeds_start_at_the_manifests_and_change_the_training_key():
    from deploytool.spec import load_spec

    spec = load_spec("lenet1")
    seeds = seeds_for(spec, 3)
    assert seeds == [spec.train.seed, spec.train.seed + 1, spec.train.seed + 2]
    assert seeded(spec, seeds[0]) == spec
    assert seeded(spec, seeds[1]).content_hash() != spec.content_hash()


def test_line_chart_draws_lines_markers_legend_and_gaps():
    svg = line_chart([Series("Keras", [1, 2, 3], [1.0, 0.5, 0.25], "#D55E00"),
                      Series("", [1, 2, 3], [0.9, float("nan"), 0.2], "#0072B2", thin=True),
                      Series("PyTorch <b>", [1, 2], [0.8, 0.3], "#0072B2", dash="5 3")],
                     title="loss", x_label="epoch", y_label="loss")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<polyline") == 2  # the thin line's NaN splits it into two one-point pieces: no polyline
    assert "Keras" in svg and "PyTorch &lt;b&gt;" in svg and "<b>" not in svg
    assert 'stroke-dasharray="5 3"' in svg and svg.count('class="pt"') == 5
    assert "no measured points" in line_chart([Series("", [1], [float("nan")])], title="t", x_label="x", y_label="y")


@pytest.mark.parametrize("argv, words", [
    (["--framework", "keras"], "always trains both twins"),
    (["--seeds", "0"], "--seeds: must be a whole number >= 1"),
])
def test_cli_mistakes_are_one_line(argv, words, tmp_path, capsys):
    from deploytool.cli import main

    code: int | str | None
    try:
        code = main(["study", "frameworks", "--model", "lenet1", "--workspace", str(tmp_path), *argv])
    except SystemExit as e:  # argparse's own exit
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and len(err.splitlines()) == 1, err
