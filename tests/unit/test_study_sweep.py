"""The sweep study's arithmetic (deploytool/study/sweep_measure.py, sweep.py, sweep_report.py) and its line
chart (deploytool/report/lines.py): per-sample p50/p90 from batch timings, throughput, CPU %, the grid from
flags/manifest/defaults, training summaries and what more threads buy. No framework is imported here."""

from __future__ import annotations

import pytest

from deploytool.errors import UnknownOption
from deploytool.report.lines import Series, line_chart
from deploytool.spec import TrainSpec
from deploytool.study.sweep import Unit, resolve_grid, train_summary
from deploytool.study.sweep_measure import PointBudget, batch_of, point_stats, speedup, time_point
from deploytool.study.sweep_report import _effect_sentence, peak_memory_bytes, thread_effects

TRAIN = TrainSpec(epochs=10, batch_size=32, optimizer="adam", learning_rate=0.001, seed=1)


def test_point_stats_are_per_sample_percentiles_of_whole_batches():
    s = point_stats([10.0, 20.0, 30.0, 40.0], batch=8, cpu_seconds=0.05, wall_seconds=0.1)
    # per sample: 1.25, 2.5, 3.75, 5.0 ms; numpy's linear percentiles
    assert s["p50_ms_per_sample"] == pytest.approx(3.125)
    assert s["p90_ms_per_sample"] == pytest.approx(3.75 + 0.7 * 1.25)
    assert s["mean_ms_per_sample"] == pytest.approx(3.125)
    assert s["throughput_sps"] == pytest.approx(32 / 0.1)  # 4 batches of 8 in 100 ms of timed batches
    assert s["cpu_percent"] == pytest.approx(50.0)  # half a core
    assert (s["batches"], s["samples"]) == (4, 32)


def test_point_stats_of_nothing_are_none():
    s = point_stats([], batch=8, cpu_seconds=0.0, wall_seconds=0.0)
    assert s["samples"] == 0 and s["p50_ms_per_sample"] is None and s["throughput_sps"] is None
    assert point_stats([1.0], 1, 0.2, 0.0)["cpu_percent"] is None  # no wall time: no ratio


def test_speedup_is_a_throughput_ratio():
    assert speedup(50.0, 1000.0) == pytest.approx(0.05)
    assert speedup(None, 10.0) is None and speedup(10.0, 0.0) is None


def test_budget_stops_at_enough_batches_and_samples_or_when_slow():
    b = PointBudget(min_batches=5, min_samples=256, max_seconds=2.0, floor_batches=3)
    assert not b.done(5, 40, 0.1)  # batch 8: 5 batches are only 40 samples
    assert b.done(32, 256, 0.1)
    assert not b.done(2, 512, 9.0)  # too slow, but fewer than 3 batches
    assert b.done(3, 24, 2.5)  # slow: stops at the floor


def test_batch_of_wraps_around_a_small_sample_set():
    import numpy as np

    from deploytool.data.feed import Feed

    x = Feed({"image": np.arange(5, dtype=np.float32).reshape(5, 1), "mask": np.arange(5, dtype=np.int64)})
    rows = batch_of(x, 3, 4)
    assert rows["image"][:, 0].tolist() == [3, 4, 0, 1] and rows["mask"].tolist() == [3, 4, 0, 1]
    assert rows["mask"].dtype == np.int64 and batch_of(x, 0, 12)["image"].shape == (12, 1)


def test_time_point_warms_up_then_times_whole_batches():
    import numpy as np

    from deploytool.data.feed import Feed

    seen = []

    def predict(x: Feed) -> Feed:
        seen.append(len(x))
        return x

    times, cpu_s, wall_s = time_point(predict, Feed.one("x", np.zeros((10, 2), np.float32)), 4,
                                      PointBudget(min_batches=3, min_samples=20, warmup_batches=2))
    assert seen == [4] * (2 + 5)  # 2 warm-up batches, then 5 timed ones (20 samples at batch 4)
    assert len(times) == 5 and all(t >= 0 for t in times) and wall_s >= sum(times) / 1e3 * 0.5 and cpu_s >= 0


def test_grid_flags_beat_the_manifest_which_beats_the_defaults():
    g = resolve_grid({}, {}, TRAIN, cores=2)
    assert g.threads == (1, 2) and g.batches == (1, 8, 32, 256)
    assert (g.train_batches, g.train_threads, g.learning_rates, g.optimizers) == ((32,), (1,), (0.001,), ("adam",))
    assert (g.train_epochs, g.train_samples, g.target_accuracy) == (1, 2000, None)
    g = resolve_grid({"batch": "1,64", "lr": "0.01,0.001"}, {"batch": [4], "threads": [1], "optimizer": ["sgd"],
                                                             "train_samples": 0, "target_accuracy": 0.9}, TRAIN, 2)
    assert g.batches == (1, 64) and g.threads == (1,) and g.learning_rates == (0.01, 0.001)
    assert g.optimizers == ("sgd",) and g.train_samples is None and g.target_accuracy == 0.9


@pytest.mark.parametrize("flags, manifest, words", [
    ({"threads": "0,1"}, {}, "--threads"),
    ({"batch": "one"}, {}, "--batch"),
    ({"optimizer": "rmsprop"}, {}, "rmsprop"),
    ({"target_accuracy": 1.5}, {}, "--target-accuracy"),
    ({}, {"batches": [1]}, "[sweep] has no key batches"),
])
def test_grid_mistakes_are_one_line(flags, manifest, words):
    with pytest.raises(UnknownOption) as e:
        resolve_grid(flags, manifest, TRAIN, 2)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_train_summary_finds_the_first_epoch_at_the_target():
    raw = {"seconds_per_epoch": [2.0, 2.0, 4.0], "accuracy_per_epoch": [0.9, 0.97, 0.98],
           "cpu_seconds_per_epoch": [2.0, 3.0, 7.0]}
    s = train_summary(raw, 0.95)
    assert s["epochs_to_target"] == 2 and s["seconds_to_target"] == 4.0
    assert s["final_accuracy"] == 0.98 and s["seconds_per_epoch_mean"] == pytest.approx(8 / 3)
    assert s["cpu_percent"] == pytest.approx(150.0)
    assert train_summary(raw, 0.99)["epochs_to_target"] is None
    assert train_summary(raw, None)["epochs_to_target"] is None


def test_thread_effects_compare_with_the_fewest_threads():
    u = Unit("torch", "", "pc", "torch")
    pts = [{"unit": u.key, "label": u.label, "threads": t, "batch": b, "throughput_sps": sps}
           for t, b, sps in ((1, 1, 1000.0), (2, 1, 50.0), (1, 8, 2000.0), (2, 8, 200.0))]
    rows = thread_effects(pts)
    assert [(r["batch"], r["threads"], round(r["speedup"], 3)) for r in rows] == [(1, 2, 0.05), (8, 2, 0.1)]
    text = _effect_sentence(rows)
    assert text.startswith("PyTorch: 2 threads vs 1 ran at 0.05-0.1x") and "13.3x slower" in text


def test_peak_memory_prefers_a_peak_over_a_delta():
    assert peak_memory_bytes({"process_peak_rss_bytes": 5.0, "process_peak_rss_delta_bytes": 1.0}) == 5.0
    assert peak_memory_bytes({"js_heap_bytes": 3.0}) == 3.0 and peak_memory_bytes({}) is None


def test_line_chart_draws_each_series_in_x_order():
    svg = line_chart([Series("a", [8, 1, 32], [2.0, 1.0, float("nan")]),
                      Series("b <x>", [1, 4], [3.0, 3.5], dash="6 3"), Series("empty", [], [])],
                     title="t", x_label="batch", y_label="ms", x_log=True)
    assert svg.count("<polyline") == 2 and 'stroke-dasharray="6 3"' in svg and "b &lt;x&gt;" in svg
    assert "empty" not in svg  # a series with no finite point is not drawn nor named
    a = svg.split("<polyline")[1].split('points="')[1].split('"')[0].split()
    assert float(a[0].split(",")[0]) < float(a[1].split(",")[0])  # x=1 drawn left of x=8; the NaN left out
    assert "no measured points" in line_chart([], title="t", x_label="x", y_label="y")
    band = line_chart([Series("p50", [1, 2, 3], [1.0, 1.1, 1.2], band=([0.9, 1.0, 1.0], [1.2, 1.3, 1.5]))],
                      title="t", x_label="night", y_label="ms")
    assert band.count('class="band"') == 1 and band.count('class="pt"') == 3


@pytest.mark.parametrize("argv, words", [
    (["--threads", "0"], "--threads '0'"),
    (["--runtimes", "torch,tvm"], "unknown runtime 'tvm'"),
    (["--samples", "0"], "--samples"),
])
def test_cli_mistakes_are_one_line_before_anything_runs(tmp_path, capsys, argv, words):
    from deploytool.cli import main

    assert main(["study", "sweep", "--workspace", str(tmp_path / "ws"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("deploytool: error:") and words in err and err.count("\n") == 1
    assert not (tmp_path / "ws" / "reports").exists()  # nothing measured, nothing reported


def test_whole_set_points_size_the_browser_by_samples_and_the_phone_by_processes():
    from deploytool.study.sweep import whole_set_sizes

    budget = PointBudget(min_batches=5, min_samples=256)
    # the browser runs a point in one page: enough samples, and batch 1 also gives that many latency samples
    assert whole_set_sizes("batch_size", budget, 1) == (256, 256)
    assert whole_set_sizes("batch_size", budget, 256) == (1280, 1)
    # a phone starts one benchmark_model process per batch and per latency run: a few of each
    assert whole_set_sizes("max_batch", budget, 1) == (5, 5)
    assert whole_set_sizes("max_batch", budget, 8) == (40, 5)


def test_the_sweep_offers_every_web_runtime_and_backend_by_default():
    import argparse

    from deploytool.runtimes import runtimes_for
    from deploytool.study.sweep import RUNTIMES, add_cli
    from deploytool.targets import get_target

    offered = {n for fmt in ("tfjs_graph", "onnx", "tflite") for n in runtimes_for("web", fmt)}
    assert offered == {"tfjs", "onnxruntime-web", "tfjs-tflite"} and offered <= set(RUNTIMES)
    p = argparse.ArgumentParser()
    add_cli(p)
    args = p.parse_args([])
    web = get_target("web")
    assert web.options(web.options_from_cli(args)).backends == ("wasm", "cpu", "webgl")
    assert web.options(web.options_from_cli(p.parse_args(["--backend", "all"]))).backends[-1] == "webgpu"
    assert web.options(web.options_from_cli(p.parse_args(["--backend", "cpu"]))).backends == ("cpu",)
