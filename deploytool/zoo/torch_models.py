"""Builds the PyTorch twin of a zoo architecture from its neutral layer plan
(deploytool.zoo). Module paths are the plan's names ("s2b0.conv1" is Keras's
"s2b0_conv1") so the weight transfer can pair layers by name, and initial
weights are drawn from the same distributions Keras uses, so the twins start
training alike. This module must not decide architecture (that lives in the
plan) and is imported only by the functions that need PyTorch.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import torch
from torch import nn

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
    trace_shapes,
)

# Keras draws truncated normals at +-2 std and rescales the std by this factor so
# the truncated distribution keeps the requested variance.
_KERAS_TRUNCATION_STD = 0.87962566103423978


def _init_kernel(weight: torch.Tensor, scheme: str) -> None:
    if scheme == "glorot_uniform":
        nn.init.xavier_uniform_(weight)
    elif scheme == "he_normal":
        fan_in = weight[0].numel()
        std = math.sqrt(2.0 / fan_in) / _KERAS_TRUNCATION_STD
        nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
    else:
        raise ValueError(f"unknown initializer {scheme!r}")


def _conv(in_ch: int, filters: int, kernel: int, stride: int, pad: int, bias: bool, init: str) -> nn.Conv2d:
    conv = nn.Conv2d(in_ch, filters, kernel, stride=stride, padding=pad, bias=bias)
    _init_kernel(conv.weight, init)
    if bias:
        nn.init.zeros_(conv.bias)
    return conv


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPSILON, momentum=round(1.0 - BN_MOMENTUM_KERAS, 12))


class ResidualBlock(nn.Module):
    """Torch side of deploytool.zoo.BasicBlock; same sub-layer names as Keras."""

    def __init__(self, in_ch: int, block: BasicBlock):
        super().__init__()
        self.conv1 = _conv(in_ch, block.filters, 3, block.stride, 1, False, "he_normal")
        self.bn1 = _bn(block.filters)
        self.relu1 = nn.ReLU()
        self.conv2 = _conv(block.filters, block.filters, 3, 1, 1, False, "he_normal")
        self.bn2 = _bn(block.filters)
        self.relu2 = nn.ReLU()
        self.proj: nn.Module | None = None
        self.proj_bn: nn.Module | None = None
        if block.stride != 1 or in_ch != block.filters:
            self.proj = _conv(in_ch, block.filters, 1, block.stride, 0, False, "he_normal")
            self.proj_bn = _bn(block.filters)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        shortcut = x if self.proj is None or self.proj_bn is None else self.proj_bn(self.proj(x))
        return self.relu2(y + shortcut)


class LastHidden(nn.Module):
    """nn.LSTM / nn.GRU over (batch, steps, features), giving the last step's hidden state (what Keras's
    recurrent layers give by default); the module is `rnn`, so its weights are `<layer>.rnn.*`."""

    def __init__(self, rnn: nn.Module):
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return out[:, -1, :]


def _recurrent(kind: type, features: int, units: int, bias: bool) -> LastHidden:
    rnn = kind(features, units, batch_first=True, bias=bias)
    for name, w in rnn.named_parameters():  # Keras's defaults: glorot kernels, orthogonal recurrence, zero bias
        if name.startswith("weight_ih"):
            for gate in w.data.chunk(w.shape[0] // units):
                nn.init.xavier_uniform_(gate)
        elif name.startswith("weight_hh"):
            for gate in w.data.chunk(w.shape[0] // units):
                nn.init.orthogonal_(gate)
        else:
            nn.init.zeros_(w)
    return LastHidden(rnn)


class ZooNet(nn.Sequential):
    """A zoo architecture as a named nn.Sequential; `arch` and `input_hwc` say what it is."""

    def __init__(self, arch: str, input_hwc: tuple[int, int, int], layers: "OrderedDict[str, nn.Module]"):
        super().__init__(layers)
        self.arch = arch
        self.input_hwc = input_hwc


def build(arch: str, plan: Any, input_hwc: tuple[int, int, int]) -> ZooNet:
    shapes = trace_shapes(arch, plan, input_hwc)
    layers: OrderedDict[str, nn.Module] = OrderedDict()
    in_shape: tuple[int, ...] = input_shape_of(arch, input_hwc)
    for op, out_shape in zip(plan, shapes):
        if isinstance(op, Conv):
            layers[op.name] = _conv(in_shape[2], op.filters, op.kernel, op.stride, op.pad, op.bias, op.init)
        elif isinstance(op, BatchNorm):
            layers[op.name] = _bn(in_shape[2])
        elif isinstance(op, ReLU):
            layers[op.name] = nn.ReLU()
        elif isinstance(op, MaxPool):
            layers[op.name] = nn.MaxPool2d(op.size, stride=op.size)
        elif isinstance(op, Flatten):
            layers[op.name] = nn.Flatten()
        elif isinstance(op, GlobalAvgPool):
            layers[op.name] = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        elif isinstance(op, Dense):
            linear = nn.Linear(in_shape[0], op.units)
            _init_kernel(linear.weight, op.init)
            nn.init.zeros_(linear.bias)
            layers[op.name] = linear
        elif isinstance(op, BasicBlock):
            layers[op.name] = ResidualBlock(in_shape[2], op)
        elif isinstance(op, LSTM):
            layers[op.name] = _recurrent(nn.LSTM, in_shape[-1], op.units, bias=False)
        elif isinstance(op, GRU):
            layers[op.name] = _recurrent(nn.GRU, in_shape[-1], op.units, bias=True)
        else:
            raise TypeError(f"no PyTorch builder for plan op {type(op).__name__}")
        in_shape = out_shape
    return ZooNet(arch, input_hwc, layers)


def count_params(model: nn.Module, trainable_only: bool) -> int:
    total = sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
    if not trainable_only:
        # BatchNorm running statistics are Keras's non-trainable weights; the
        # num_batches_tracked counter is not a weight.
        total += sum(
            b.numel() for name, b in model.named_buffers()
            if name.endswith(("running_mean", "running_var"))
        )
    return int(total)
