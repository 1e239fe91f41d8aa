"""Builds the Keras 3 twin of a zoo architecture from its neutral layer plan
(deploytool.zoo). Layer names are the plan's names ("s2b0_conv1" for block
s2b0's conv1) so the weight transfer can pair layers by name. This module must
not decide architecture (that lives in the plan) and is imported only by the
functions that need Keras.
"""

from __future__ import annotations

import keras
from typing import Any

from deploytool.zoo.plans import (
    BN_EPSILON,
    BN_MOMENTUM_KERAS,
    GRU,
    LSTM,
    BasicBlock,
    BatchNorm,
    Conv,
    Dense,
    Flatten,
    GlobalAvgPool,
    MaxPool,
    ReLU,
    input_shape_of,
)


def _conv(x: Any, name: str, filters: int, kernel: int, stride: int, pad: int, bias: bool, init: str) -> Any:
    # The plan's padding is torch-style: `pad` zeros on every side. Keras "same"
    # equals that only for stride 1 and an odd kernel (total k-1, split evenly);
    # with stride 2 "same" pads only bottom/right, so pad explicitly instead.
    if pad == 0:
        padding = "valid"
    elif stride == 1 and kernel % 2 == 1 and 2 * pad == kernel - 1:
        padding = "same"
    else:
        x = keras.layers.ZeroPadding2D(padding=pad, name=f"{name}_pad")(x)
        padding = "valid"
    return keras.layers.Conv2D(
        filters, kernel, strides=stride, padding=padding, use_bias=bias,
        kernel_initializer=init, bias_initializer="zeros", name=name,
    )(x)


def _bn(x: Any, name: str) -> Any:
    return keras.layers.BatchNormalization(
        axis=-1, epsilon=BN_EPSILON, momentum=BN_MOMENTUM_KERAS, name=name
    )(x)


def _basic_block(x: Any, block: BasicBlock) -> Any:
    n = block.name
    y = _conv(x, f"{n}_conv1", block.filters, 3, block.stride, 1, False, "he_normal")
    y = _bn(y, f"{n}_bn1")
    y = keras.layers.ReLU(name=f"{n}_relu1")(y)
    y = _conv(y, f"{n}_conv2", block.filters, 3, 1, 1, False, "he_normal")
    y = _bn(y, f"{n}_bn2")
    shortcut = x
    if block.stride != 1 or x.shape[-1] != block.filters:
        shortcut = _conv(x, f"{n}_proj", block.filters, 1, block.stride, 0, False, "he_normal")
        shortcut = _bn(shortcut, f"{n}_proj_bn")
    y = keras.layers.Add(name=f"{n}_add")([y, shortcut])
    return keras.layers.ReLU(name=f"{n}_relu2")(y)


def build(arch: str, plan: Any, input_hwc: tuple[int, int, int]) -> keras.Model:
    inputs = keras.Input(shape=input_shape_of(arch, input_hwc), dtype="float32",
                         name="input")
    x = inputs
    for op in plan:
        if isinstance(op, Conv):
            x = _conv(x, op.name, op.filters, op.kernel, op.stride, op.pad, op.bias, op.init)
        elif isinstance(op, BatchNorm):
            x = _bn(x, op.name)
        elif isinstance(op, ReLU):
            x = keras.layers.ReLU(name=op.name)(x)
        elif isinstance(op, MaxPool):
            x = keras.layers.MaxPooling2D(pool_size=op.size, strides=op.size, padding="valid", name=op.name)(x)
        elif isinstance(op, Flatten):
            x = keras.layers.Flatten(name=op.name)(x)
        elif isinstance(op, GlobalAvgPool):
            x = keras.layers.GlobalAveragePooling2D(name=op.name)(x)
        elif isinstance(op, Dense):
            x = keras.layers.Dense(
                op.units, kernel_initializer=op.init, bias_initializer="zeros", name=op.name
            )(x)
        elif isinstance(op, BasicBlock):
            x = _basic_block(x, op)
        elif isinstance(op, LSTM):
            x = keras.layers.LSTM(op.units, use_bias=False, name=op.name)(x)
        elif isinstance(op, GRU):
            x = keras.layers.GRU(op.units, reset_after=True, name=op.name)(x)
        else:
            raise TypeError(f"no Keras builder for plan op {type(op).__name__}")
    return keras.Model(inputs, x, name=arch)


def count_params(model: keras.Model, trainable_only: bool) -> int:
    weights = model.trainable_weights if trainable_only else model.weights
    return int(sum(int(w.numpy().size) for w in weights))
