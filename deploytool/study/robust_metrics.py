"""The robustness study's numbers, as pure functions of predicted labels: clean accuracy, robust accuracy,
attack success rate, agreement with the PC model, and the samples an attack fools on one side only.
No model, file or store here: the report recomputes every number from the stored predictions.
"""

from __future__ import annotations


import numpy as np

from deploytool.value import value


def accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    """Share of samples whose top-1 label is the true label."""
    pred, y = np.asarray(pred), np.asarray(y)
    return float(np.mean(pred == y)) if len(y) else float("nan")


def attack_success_rate(clean_pred: np.ndarray, adv_pred: np.ndarray, y: np.ndarray) -> float:
    """Of the samples a model gets right when clean, the share it gets wrong after the attack.

    ASR = |{i : clean_i = y_i and adv_i != y_i}| / |{i : clean_i = y_i}|, for one model (one row) on the same
    samples before and after the attack. Samples already wrong when clean are not counted: an attack cannot
    claim them. NaN when the model gets no clean sample right."""
    clean_pred, adv_pred, y = np.asarray(clean_pred), np.asarray(adv_pred), np.asarray(y)
    right = clean_pred == y
    if not right.any():
        return float("nan")
    return float(np.mean(adv_pred[right] != y[right]))


def agreement(pred_a: np.ndarray, pred_b: np.ndarray) -> float:
    """Share of samples on which two models give the same top-1 label (whatever the truth)."""
    pred_a, pred_b = np.asarray(pred_a), np.asarray(pred_b)
    return float(np.mean(pred_a == pred_b)) if len(pred_a) else float("nan")


@value
class OneSidedFools:
    only_target: list[int]  # sample indices the attack fools on the target but not on the PC model
    only_pc: list[int]  # ... fools on the PC model but not on the target


def fools_one_not_other(pc_pred: np.ndarray, target_pred: np.ndarray, y: np.ndarray) -> OneSidedFools:
    """On an adversarial set, a sample "fools" a model when the model's label is not the true label; the
    samples that fool exactly one of the PC model and the target (the seed's question: migration changed
    the model's answer to this attack)."""
    pc_pred, target_pred, y = np.asarray(pc_pred), np.asarray(target_pred), np.asarray(y)
    pc_fooled, target_fooled = pc_pred != y, target_pred != y
    return OneSidedFools(np.flatnonzero(target_fooled & ~pc_fooled).tolist(),
                         np.flatnonzero(pc_fooled & ~target_fooled).tolist())
