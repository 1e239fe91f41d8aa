"""The pitfalls study's pure parts: each mistake transform, the pitfall check's statistics, and the drop
table built from stored points."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.data.check import SAMPLE, channel_stats, preprocessing_warnings, roughness
from deploytool.data.mistakes import BY_NAME, MISTAKES, corner_crop_resize, int8_unscaled, preprocess, \
    resize_bilinear, reread
from deploytool.spec import Preprocess

MNIST = Preprocess(1 / 255, (0.1307,), (0.3081,))
CIFAR = Preprocess(1 / 255, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))


def _smooth_rgb(n: int = 16, seed: int = 0) -> np.ndarray:
    """Smooth 3-channel 'photos' (0..255) whose channel means are CIFAR-10's, red > green > blue."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32]
    imgs = []
    for a, b in rng.uniform(0, 6, (n, 2)):
        base = 60 * np.sin(xx / 6 + a) * np.cos(yy / 5 + b)
        imgs.append(np.stack([base + 255 * m for m in CIFAR.mean], -1))
    return np.clip(np.array(imgs), 0, 255).astype(np.float32)


def _digits(n: int = 8) -> np.ndarray:
    x = np.zeros((n, 28, 28, 1), np.float32)
    x[:, 8:20, 12:16] = 255  # an off-diagonal bar: transposing it moves it
    return x


def test_preprocess_is_the_declared_formula():
    x = np.array([[[[0.0], [255.0]]]], np.float32)
    np.testing.assert_allclose(preprocess(x, MNIST).ravel(), [(0 - 0.1307) / 0.3081, (1 - 0.1307) / 0.3081],
                               rtol=1e-6)


def test_no_normalisation_and_range_mistakes_skip_one_step_each():
    x = _digits()
    np.testing.assert_allclose(BY_NAME["no_normalisation"].feed(x, MNIST), x / 255, rtol=1e-6)
    np.testing.assert_allclose(BY_NAME["range_0_255"].feed(x, MNIST), (x - 0.1307) / 0.3081, rtol=1e-6)


def test_hw_swap_is_a_transpose_on_square_images_and_a_reread_otherwise():
    x = _digits()
    np.testing.assert_array_equal(BY_NAME["hw_swapped"].feed(x, MNIST), preprocess(x, MNIST).transpose(0, 2, 1, 3))
    wide = np.arange(2 * 3, dtype=np.float32).reshape(1, 2, 3, 1)
    got = reread(wide, (0, 2, 1, 3))
    assert got.shape == wide.shape
    np.testing.assert_array_equal(got.ravel(), wide.transpose(0, 2, 1, 3).ravel())


def test_nchw_as_nhwc_rereads_planar_bytes():
    x = np.arange(2 * 2 * 3, dtype=np.float32).reshape(1, 2, 2, 3)
    got = reread(x, (0, 3, 1, 2))
    # the first "pixel" now holds the first three values of the red plane
    np.testing.assert_array_equal(got[0, 0, 0], [x[0, 0, 0, 0], x[0, 0, 1, 0], x[0, 1, 0, 0]])


def test_rgb_bgr_reverses_channels_before_the_per_channel_mean():
    x = _smooth_rgb(2)
    np.testing.assert_allclose(BY_NAME["rgb_bgr"].feed(x, CIFAR), preprocess(x[..., ::-1], CIFAR), rtol=1e-6)
    assert not np.allclose(BY_NAME["rgb_bgr"].feed(x, CIFAR), preprocess(x, CIFAR)[..., ::-1])


def test_corner_crop_resize_keeps_the_size_and_moves_the_content():
    x = _digits(1)
    got = corner_crop_resize(x)
    assert got.shape == x.shape
    assert not np.allclose(got, x)
    np.testing.assert_allclose(resize_bilinear(x, 28, 28), x)  # same size: unchanged
    const = np.full((1, 10, 10, 2), 3.0, np.float32)
    np.testing.assert_allclose(resize_bilinear(const, 17, 5), 3.0)


def test_int8_unscaled_quantizes_to_the_rounded_floats():
    from deploytool.modelfiles.tflite_io import TensorQuant

    t = TensorQuant("in", "int8", (1, 4), 0.0127, -95)
    fed = np.array([[-0.42, 0.4, 1.6, 2.8]], np.float32)
    np.testing.assert_array_equal(t.quantize(int8_unscaled(fed, t.scale, t.zero_point)), [[0, 0, 2, 3]])
    assert not np.array_equal(t.quantize(fed), [[0, 0, 2, 3]])  # the right scaling differs


def test_not_applicable_mistakes_say_why():
    grey, rgb = (28, 28, 1), (32, 32, 3)
    same_bytes, rgb_bgr = BY_NAME["nchw_as_nhwc"].not_applicable(grey, MNIST), BY_NAME["rgb_bgr"].not_applicable(grey, MNIST)
    assert same_bytes is not None and "same bytes" in same_bytes
    assert rgb_bgr is not None and "RGB/BGR" in rgb_bgr
    assert BY_NAME["range_0_255"].not_applicable(grey, Preprocess(1.0))
    assert BY_NAME["no_normalisation"].not_applicable(grey, Preprocess(1 / 255))
    assert all(m.not_applicable(rgb, CIFAR) is None for m in MISTAKES)


# ------------------------------------------------------------------------------- the pitfall check


def test_check_warns_on_pixels_0_255_with_scale_1():
    warned = preprocessing_warnings(_digits(), Preprocess(1.0, (0.1307,), (0.3081,)))
    assert len(warned) == 1 and "0..255" in warned[0] and "--scale 0.0039" in warned[0]
    assert preprocessing_warnings(_digits(), Preprocess(1.0)), "mean 0, std 1: still far from unit range"


def test_check_silent_when_the_model_normalises_0_255_itself():
    assert preprocessing_warnings(_digits(), Preprocess(1.0, (127.5,), (127.5,))) == []


def test_check_silent_on_the_bundled_mnist_with_lenet5s_preprocessing():
    from deploytool.data import mnist
    from deploytool.spec import load_spec

    raw = mnist.load_bundled().x_test[..., None]
    assert preprocessing_warnings(raw, load_spec("lenet5").preprocess) == []
    assert preprocessing_warnings(raw, load_spec("lenet1").preprocess) == []


def test_check_warns_on_already_scaled_data_and_on_a_far_mean():
    assert "already scaled" in preprocessing_warnings(_digits() / 255, MNIST)[0]
    far = preprocessing_warnings(_digits() / 255, Preprocess(1.0, (3.0,), (0.3,)))
    assert len(far) == 1 and "declared stds" in far[0]


def test_channel_stats_are_after_scale_only():
    mean, std = channel_stats(_smooth_rgb(), CIFAR)
    np.testing.assert_allclose(mean, CIFAR.mean, atol=0.02)
    assert np.all(std > 0.05)
    assert len(_smooth_rgb(SAMPLE + 8)) > SAMPLE  # the check samples, it does not need every image


def test_check_colour_order_and_layout():
    x = _smooth_rgb()
    assert preprocessing_warnings(x, CIFAR) == []
    bgr = preprocessing_warnings(x[..., ::-1], CIFAR)
    assert len(bgr) == 1 and "BGR" in bgr[0]
    planar = preprocessing_warnings(reread(x, (0, 3, 1, 2)), CIFAR)
    assert any("NCHW bytes read as NHWC" in w for w in planar)
    assert roughness(x) < roughness(reread(x, (0, 3, 1, 2)))


# ------------------------------------------------------------------------------- drops from stored points


def _points() -> dict:
    acc = {"clean": 0.99, "no_normalisation": 0.5, "range_0_255": 0.1}
    return {
        "rows/keras": {"framework": "keras", "segments": list(acc), "samples": 100,
                       "pc": acc, "not_applicable": {"rgb_bgr": "1-channel images have no RGB/BGR order"},
                       "check_warns": {"no_normalisation": False, "range_0_255": True},
                       "rows": [{"label": "keras->tflite/int8-io on host", "format": "tflite",
                                 "quantize": "int8-io", "status": "measured", "reason": "",
                                 "accuracy": {**acc, "no_normalisation": 0.45, "int8_unscaled": 0.2}},
                                {"label": "keras->tfjs/int8-io on web", "format": "tfjs", "quantize": "int8-io",
                                 "status": "unsupported", "reason": "tfjs has no int8-io", "accuracy": {}}]},
    }


def test_drops_are_clean_minus_mistaken_in_points():
    from deploytool.study.pitfalls import drops

    labels, names, cells, extra = drops(_points())
    assert labels == ["keras (PC model)", "keras->tflite/int8-io on host"]  # unmeasured rows are left out
    assert cells[("keras (PC model)", "no_normalisation")] == pytest.approx(49.0)
    assert cells[("keras->tflite/int8-io on host", "no_normalisation")] == pytest.approx(54.0)
    assert cells[("keras->tflite/int8-io on host", "int8_unscaled")] == pytest.approx(79.0)
    assert cells[("keras (PC model)", "int8_unscaled")] == "float input"
    assert cells[("keras (PC model)", "rgb_bgr")] == "n/a"
    assert extra["check_warns"]["range_0_255"] is True
    assert names.index("int8_unscaled") < names.index("rgb_bgr")  # measured columns first


def test_runs_stored_before_the_stack_still_read_their_int8_points():
    from deploytool.study.pitfalls import drops

    points = _points()
    row = points["rows/keras"]["rows"][0]
    del row["accuracy"]["int8_unscaled"]  # then the int8 copy ran in a migrate run of its own
    points["int8/keras/tflite/int8-io"] = {"migrate_run": "m2", "warnings": [], "rows": [
        {"label": "keras->tflite/int8-io on host", "accuracy": {"int8_unscaled": 0.2}}]}
    assert drops(points)[2][("keras->tflite/int8-io on host", "int8_unscaled")] == pytest.approx(79.0)


def test_report_sections_carry_the_published_ranges():
    from deploytool.study.pitfalls import PUBLISHED, report

    class Run:
        def points(self):
            return _points()

    sections = report(Run())
    table = sections[0].tables[0]
    assert table.rows[0][0].startswith("published")
    assert PUBLISHED["off_centre_crop"].startswith("1.45")
    assert table.rows[1][table.columns.index("range_0_255")] == "warns"
    assert sections[0].figures and sections[0].figures[0].startswith("<svg")
    rows = next(sec for sec in sections if sec.id == "rows").tables[0].rows
    assert ("keras->tfjs/int8-io on web", "unsupported", "tfjs has no int8-io") in rows  # why a row has no line


def test_samples_are_spread_over_the_sorted_test_set():
    from deploytool.study.pitfalls import spread

    idx = spread(2000, 60)
    assert len(idx) == 60 and idx[0] == 0 and idx[-1] == 1999 and np.all(np.diff(idx) > 0)
    assert len(spread(10, 60)) == 10
