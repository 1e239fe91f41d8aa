"""The pitfall check: do a test set's raw statistics fit the preprocessing declared for it? Before a run
measures anything, `preprocessing_warnings` looks at a sample of the raw images (NHWC, as stored) and says,
one line per problem, when they do not: pixels 0–255 under scale 1, a mean far from the declared one,
channel means that fit the declared mean better in reversed (BGR) order, or images that are smoother read
in the other memory layout (NCHW bytes reshaped to NHWC). It only warns: a model may rescale inside
itself, so nothing here refuses data or changes it.
"""

from __future__ import annotations

import numpy as np

from deploytool.spec import Preprocess

SAMPLE = 512  # images looked at: the statistics settle long before that
FAR_MEAN_STDS = 2.0  # a channel whose mean after scaling is this many declared stds off the declared mean
UNIT_SPREAD = 3.0  # after mean/std, values spread this much more than ~1: not what a model was trained on
BGR_MARGIN = 0.1  # reversed channel means closer to the declared ones by this much (in declared stds, summed)
SMOOTHER = 0.75  # another memory layout whose images are this much smoother than the given one
# How the warning about 0-255 pixels under --scale 1 begins: a caller that knows its model rescales inside itself
# (deploytool.atlas: keras.applications' EfficientNets) leaves that one out.
PIXELS_UNDER_SCALE_1 = "the test set holds pixels "


def channel_stats(x: np.ndarray, p: Preprocess) -> tuple[np.ndarray, np.ndarray]:
    """Per channel: (mean, std) of the images after `scale`, before mean/std."""
    s = np.asarray(x[:SAMPLE], np.float64) * p.scale
    return s.mean(axis=(0, 1, 2)), s.std(axis=(0, 1, 2))


def roughness(x: np.ndarray) -> float:
    """Mean squared difference between neighbouring pixels (along height and width) of NHWC images:
    images are smooth, so the right reading of their bytes has the lower value."""
    x = np.asarray(x, np.float64)
    return float(np.mean(np.diff(x, axis=1) ** 2) + np.mean(np.diff(x, axis=2) ** 2))


def other_layouts(x: np.ndarray) -> dict[str, np.ndarray]:
    """The same bytes read in the other memory layout, still indexed NHWC."""
    n, h, w, c = x.shape
    return {"NCHW bytes read as NHWC": x.reshape(n, c, h, w).transpose(0, 2, 3, 1),
            "NHWC bytes read as NCHW": np.ascontiguousarray(x.transpose(0, 3, 1, 2)).reshape(n, h, w, c)}


def preprocessing_warnings(x: np.ndarray, p: Preprocess) -> list[str]:
    """One line per way the raw images `x` (NHWC) do not fit the declared preprocessing `p`."""
    if x.ndim != 4 or len(x) == 0:
        return []
    sample = np.asarray(x[:SAMPLE], np.float64)
    c = sample.shape[-1]
    mean, std = channel_stats(sample, p)
    d_mean = np.broadcast_to(np.asarray(p.mean, np.float64), (c,))
    d_std = np.abs(np.broadcast_to(np.asarray(p.std, np.float64), (c,)))
    z_mean, z_spread = (mean - d_mean) / d_std, std / d_std
    lo, hi = float(sample.min()), float(sample.max())
    out = []
    if p.scale == 1 and 0 <= lo and 1.5 < hi <= 255 and (np.abs(z_mean).max() > UNIT_SPREAD
                                                          or z_spread.max() > UNIT_SPREAD):
        out.append(f"{PIXELS_UNDER_SCALE_1}{lo:g}..{hi:g} but --scale is 1: after mean/std they average "
                   f"{_list(z_mean)} with spread {_list(z_spread)}, far from the ~0 and ~1 a model is trained on; "
                   "if the model expects 0..1 pass --scale 0.00392156862745098 (1/255), if it rescales inside "
                   "itself ignore this")
    elif p.scale < 1 and 0 <= lo and 0 < hi <= 1.0:
        out.append(f"the test set holds values {lo:g}..{hi:g} (already scaled?) but the preprocessing multiplies "
                   f"them by {p.scale:g} again: pass --scale 1 if they are scaled already")
    elif np.abs(z_mean).max() > FAR_MEAN_STDS:
        k = int(np.abs(z_mean).argmax())
        out.append(f"channel {k}'s mean after scaling is {mean[k]:.4g}, {abs(z_mean[k]):.1f} declared stds from "
                   f"the declared mean {d_mean[k]:.4g}: check --scale/--mean/--std (is the data normalised "
                   "already, or stored in another range?)")
    if c == 3 and np.ptp(d_mean) > 0:
        given = float(np.sum(np.abs(mean - d_mean) / d_std))
        reversed_ = float(np.sum(np.abs(mean[::-1] - d_mean) / d_std))
        if reversed_ < given / 2 and given - reversed_ > BGR_MARGIN:
            out.append(f"the channel means {_list(mean)} fit the declared mean {_list(d_mean)} better in reversed "
                       "order: the test set looks BGR where the model expects RGB (or the other way round); "
                       "reverse the channels: x[..., ::-1]")
    if c > 1:
        own = roughness(sample[:256])
        for what, other in other_layouts(sample[:256]).items():
            if roughness(other) < SMOOTHER * own:
                out.append(f"the images look like {what} (read that way they are {own / max(roughness(other), 1e-12):.1f}x "
                           "smoother): store x as (N, H, W, C) with x.transpose, not reshape")
                break
    return out


def _list(v: np.ndarray) -> str:
    return "[" + ", ".join(f"{float(a):.3g}" for a in v) + "]" if len(v) > 1 else f"{float(v[0]):.3g}"
