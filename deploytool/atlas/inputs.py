"""Synthetic test sets for the atlas' input kinds, made so a randomly initialised network tells its samples apart.
I.i.d. noise does not: after global pooling every noise image has the same channel means, and the baseline
predicts one class for all of them. So each image is a smooth field of a few random sinusoids with its own
colours, offset and contrast; token sequences have their own lengths (the attention mask pads the rest); audio
features and waveforms are mixtures of tones with their own pitches and loudness. Pure numpy, seeded: the same
call gives the same bytes, so a built architecture's test set is cached by content."""

from __future__ import annotations

import numpy as np

SEED = 38
# a final layer whose logits vary across samples less than this (relative to their size) is left as it is:
# scaling float rounding up would make every route "disagree" with the baseline for no reason
MIN_RELATIVE_SPREAD = 1e-5


def images(n: int, shape: tuple[int, int, int], channels_first: bool = False, seed: int = SEED) -> np.ndarray:
    """n float32 images of `shape` ((H, W, C), or (C, H, W) with channels_first), values roughly in [-2.5, 2.5]
    (what a normalised photo holds)."""
    rng = np.random.default_rng(seed)
    c, h, w = (shape[0], shape[1], shape[2]) if channels_first else (shape[2], shape[0], shape[1])
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    yy, xx = yy / h, xx / w
    out = np.empty((n, h, w, c), np.float32)
    for i in range(n):
        img = np.zeros((h, w, c), np.float32)
        for _ in range(4):  # a few waves of their own frequency, direction and colour
            fx, fy = rng.uniform(0.3, 4.0, 2)
            wave = np.sin(2 * np.pi * (fx * xx + fy * yy) + rng.uniform(0, 2 * np.pi))
            img += wave[..., None] * rng.normal(0, 0.6, c)
        img += rng.normal(0, 0.8, c)  # the image's own mean colour
        out[i] = np.clip(img * rng.uniform(0.5, 1.5), -2.5, 2.5)
    return out.transpose(0, 3, 1, 2).copy() if channels_first else out


def tokens(n: int, length: int, vocab: int, seed: int = SEED, pad_id: int = 0,
           min_length: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, attention_mask), int64 (n, length): random ids in [1, vocab) over a length of each sample's own
    (at least `min_length`), then padding (`pad_id`, mask 0)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(n, length), dtype=np.int64)
    lengths = rng.integers(min(min_length, length), length + 1, size=n)
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int64)
    ids = np.where(mask == 1, ids, pad_id).astype(np.int64)
    return ids, mask


def audio_features(n: int, bins: int, frames: int, seed: int = SEED) -> np.ndarray:
    """n float32 log-mel-like spectrograms (n, bins, frames): a few tones (bands) that rise or fall, with their
    own loudness, over a noise floor; values roughly in [-1.5, 1.5] (Whisper's normalised log-mel range)."""
    rng = np.random.default_rng(seed)
    f = np.arange(bins, dtype=np.float32)[:, None]
    t = np.arange(frames, dtype=np.float32)[None, :] / max(frames, 1)
    out = np.empty((n, bins, frames), np.float32)
    for i in range(n):
        spec = rng.normal(-0.8, 0.1, (bins, frames)).astype(np.float32)
        for _ in range(3):
            centre = rng.uniform(0.1, 0.9) * bins + rng.uniform(-0.3, 0.3) * bins * t
            spec += rng.uniform(0.5, 2.0) * np.exp(-((f - centre) ** 2) / (2 * (0.03 * bins + 1) ** 2))
        out[i] = np.clip(spec, -1.5, 1.5)
    return out


def waveform(n: int, length: int, seed: int = SEED, rate: int = 16000) -> np.ndarray:
    """n float32 waveforms (n, length) at `rate` Hz: a few tones of their own pitch and loudness plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype=np.float32) / rate
    out = np.empty((n, length), np.float32)
    for i in range(n):
        wave = rng.normal(0, 0.02, length).astype(np.float32)
        for _ in range(3):
            wave += rng.uniform(0.05, 0.4) * np.sin(2 * np.pi * rng.uniform(80, 2000) * t + rng.uniform(0, 6.3))
        out[i] = wave
    return out


def rescale_for_spread(logits: np.ndarray, target_std: float = 2.0) -> tuple[float, np.ndarray]:
    """(k, shift) such that k * (logits - shift) varies across samples with a standard deviation of `target_std`
    per output value: the final layer's weights times k and its bias minus shift, times k. `logits` is (N, ..., K),
    the final layer's pre-activation outputs; shift is their mean over every axis but the last. A random network's
    logits sit on one point with tiny deviations; centred and scaled, the deviations decide the argmax."""
    flat = logits.reshape(-1, logits.shape[-1]).astype(np.float64)
    shift = flat.mean(axis=0)
    spread = float(np.mean(np.std(flat - shift, axis=0)))
    k = target_std / spread if spread > 0 else 1.0
    return k, shift.astype(np.float32)


def spread_of(outputs: np.ndarray) -> tuple[int, float]:
    """(distinct argmax over the samples, mean std across samples): how informative a test set is on a model.
    The argmax counts for an output of class scores (N, K) only; 0 otherwise."""
    out = np.asarray(outputs, np.float64)
    classes = int(len(np.unique(out.argmax(axis=-1)))) if out.ndim == 2 and out.shape[-1] >= 2 else 0
    return classes, float(np.mean(np.std(out, axis=0))) if len(out) > 1 else 0.0
