"""The zoo's architectures as framework-neutral layer plans: each written down once, as a tuple of ops (Conv,
BatchNorm, Dense, ...) that the Keras and PyTorch builders (keras_models, torch_models) turn into twins with the
same layers and parameter counts. Plans and their shape checks only: nothing here imports a framework."""

from __future__ import annotations

from typing import Any, Callable, Union

from deploytool.errors import ShapeError, SpecError, UnknownModel, UnknownOption
from deploytool.kinds import KINDS, InputKind, get_kind
from deploytool.registry import Registry
from deploytool.value import value

# One BatchNorm setting for both frameworks: the defaults differ (Keras eps 1e-3,
# torch 1e-5) and a silent mismatch shifts every normalised activation.
BN_EPSILON = 1e-5
# Keras convention: running = running * m + batch * (1 - m). torch's momentum
# weights the *batch*, so the torch twin uses 1 - BN_MOMENTUM_KERAS.
BN_MOMENTUM_KERAS = 0.9


# ---- the framework-neutral plan -------------------------------------------------
# `pad` is torch-style symmetric zero padding in pixels on every side; the Keras
# builder turns it into padding="same" only where that is provably the same
# thing (stride 1, odd kernel) and into ZeroPadding2D + "valid" otherwise.


@value
class Conv:
    name: str
    filters: int
    kernel: int
    stride: int = 1
    pad: int = 0
    bias: bool = True
    init: str = "glorot_uniform"


@value
class BatchNorm:
    name: str


@value
class ReLU:
    name: str


@value
class MaxPool:
    name: str
    size: int = 2


@value
class Flatten:
    name: str


@value
class GlobalAvgPool:
    name: str


@value
class Dense:
    name: str
    units: int
    init: str = "glorot_uniform"


@value
class BasicBlock:
    """He et al. basic block: conv3x3-BN-ReLU-conv3x3-BN, add shortcut, ReLU.

    The shortcut is the identity, or a 1x1 conv (stride `stride`, no bias) + BN
    when the spatial size or the channel count changes ("option B").
    """

    name: str
    filters: int
    stride: int = 1


@value
class LSTM:
    """An LSTM over (steps, features), giving its last hidden state. Without biases: Keras keeps one bias per
    gate, PyTorch two (input and recurrent), so with them the twins could not have equal parameter counts."""

    name: str
    units: int


@value
class GRU:
    """A GRU over (steps, features), giving its last hidden state: Keras's reset_after=True form (PyTorch's,
    with an input and a recurrent bias each)."""

    name: str
    units: int


Op = Union[Conv, BatchNorm, ReLU, MaxPool, Flatten, GlobalAvgPool, Dense, BasicBlock, LSTM, GRU]

PlanFn = Callable[[int], tuple[Op, ...]]
# architecture name -> its plan function (num_classes -> ops), registered below with @register_architecture
ARCHITECTURES: Registry[PlanFn] = Registry("architecture")
# architecture name -> the input kind it reads (deploytool.kinds): the dataset's images become its samples once,
# after preprocessing (an image as it is, a sequence of its rows, its values flat; deploytool.data)
INPUT_KINDS: dict[str, str] = {}


def register_architecture(name: str, reads: str = "image") -> Callable[[PlanFn], PlanFn]:
    """The decorator: `@register_architecture(name)` above a plan function (num_classes -> ops), returned unchanged;
    `reads`: the input kind its first layer takes, registered before it (an unknown one is refused here)."""
    if not KINDS.registered_so_far(reads):  # a lookup would import the plugins, which may import this module
        raise UnknownOption(f"architecture {name!r} reads an unknown input kind {reads!r}; input kinds are "
                            f"{', '.join(KINDS.names())}")

    def decorate(plan: PlanFn) -> PlanFn:
        ARCHITECTURES.add(name, plan)
        INPUT_KINDS[name] = reads
        return plan

    return decorate


def input_kind_of(arch: str) -> InputKind:
    """The input kind a registered architecture reads."""
    return get_kind(INPUT_KINDS.get(arch, "image"))


def input_shape_of(arch: str, hwc: tuple[int, int, int]) -> tuple[int, ...]:
    """One sample as `arch` takes it from an image of `hwc`: the image, its rows as steps, or its values."""
    return input_kind_of(arch).from_hwc(hwc)


@register_architecture("lenet1")
def _lenet1(num_classes: int) -> tuple[Op, ...]:
    # LeCun et al. 1989/1995 LeNet-1, with ReLU and max pooling instead of
    # tanh and average pooling.
    return (
        Conv("conv1", 4, 5), ReLU("relu1"), MaxPool("pool1"),
        Conv("conv2", 12, 5), ReLU("relu2"), MaxPool("pool2"),
        Flatten("flatten"),
        Dense("fc", num_classes),
    )


@register_architecture("lenet5")
def _lenet5(num_classes: int) -> tuple[Op, ...]:
    return (
        Conv("conv1", 6, 5, pad=2), ReLU("relu1"), MaxPool("pool1"),
        Conv("conv2", 16, 5), ReLU("relu2"), MaxPool("pool2"),
        Flatten("flatten"),
        Dense("fc1", 120), ReLU("relu3"),
        Dense("fc2", 84), ReLU("relu4"),
        Dense("fc3", num_classes),
    )


@register_architecture("resnet20")
def _resnet20(num_classes: int) -> tuple[Op, ...]:
    ops: list[Op] = [
        Conv("conv1", 16, 3, pad=1, bias=False, init="he_normal"),
        BatchNorm("bn1"), ReLU("relu1"),
    ]
    for stage, filters in enumerate((16, 32, 64), start=1):
        for block in range(3):
            stride = 2 if stage > 1 and block == 0 else 1
            ops.append(BasicBlock(f"s{stage}b{block}", filters, stride))
    ops += [GlobalAvgPool("gap"), Dense("fc", num_classes, init="he_normal")]
    return tuple(ops)


@register_architecture("vgg_small")
def _vgg_small(num_classes: int) -> tuple[Op, ...]:
    ops: list[Op] = []
    n = 0
    for stage, filters in enumerate((32, 64, 128), start=1):
        for _ in range(2):
            n += 1
            ops += [
                Conv(f"conv{n}", filters, 3, pad=1, bias=False, init="he_normal"),
                BatchNorm(f"bn{n}"), ReLU(f"relu{n}"),
            ]
        ops.append(MaxPool(f"pool{stage}"))
    ops += [
        Flatten("flatten"),
        Dense("fc1", 128), ReLU("relu_fc1"),
        Dense("fc2", num_classes),
    ]
    return tuple(ops)


@register_architecture("mlp", reads="features")
def _mlp(num_classes: int) -> tuple[Op, ...]:
    # Seed 002's fully connected network: the 784 flattened pixels through two hidden layers.
    return (Dense("fc1", 256), ReLU("relu1"), Dense("fc2", 128), ReLU("relu2"), Dense("fc3", num_classes))


@register_architecture("lstm", reads="sequence")
def _lstm(num_classes: int) -> tuple[Op, ...]:
    # Seed 002's recurrent family on sequential MNIST: a digit read as 28 rows of 28 pixels.
    return (LSTM("lstm", 64), Dense("fc", num_classes))


@register_architecture("gru", reads="sequence")
def _gru(num_classes: int) -> tuple[Op, ...]:
    return (GRU("gru", 64), Dense("fc", num_classes))



def layer_plan(arch: str, num_classes: int) -> tuple[Op, ...]:
    """The neutral layer plan of `arch`; raises UnknownModel for an unknown name."""
    if arch not in ARCHITECTURES:
        raise UnknownModel(
            f"unknown architecture {arch!r}: use one of {', '.join(ARCHITECTURES)}"
        )
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 2:
        raise SpecError(
            f"num_classes must be an integer >= 2, got {num_classes!r}: fix the model's labels"
        )
    return ARCHITECTURES[arch](num_classes)


def _conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def trace_shapes(arch: str, plan: tuple[Op, ...], input_hwc: Any) -> list[tuple[int, ...]]:
    """Shape after each op of `plan`: (H, W, C) for feature maps, (F,) after
    Flatten/GlobalAvgPool/Dense. Raises ShapeError when the input is too small."""
    if (
        not isinstance(input_hwc, (tuple, list))
        or len(input_hwc) != 3
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in input_hwc)
    ):
        raise ShapeError(
            f"input shape {input_hwc!r} for {arch} is not (height, width, channels) of "
            "positive integers: fix the manifest's input shape"
        )
    shape: tuple[int, ...] = input_shape_of(arch, tuple(input_hwc))
    shapes = []
    for op in plan:
        if isinstance(op, (Conv, MaxPool, BasicBlock)):
            h, w, c = shape
            if isinstance(op, Conv):
                h, w, c = (_conv_out(h, op.kernel, op.stride, op.pad),
                           _conv_out(w, op.kernel, op.stride, op.pad), op.filters)
            elif isinstance(op, MaxPool):
                h, w = h // op.size, w // op.size
            else:
                h, w, c = _conv_out(h, 3, op.stride, 1), _conv_out(w, 3, op.stride, 1), op.filters
            if h < 1 or w < 1:
                raise ShapeError(
                    f"input {tuple(input_hwc)} is too small for {arch}: the feature map "
                    f"vanishes at layer {op.name!r}; use a larger input (e.g. 28x28 for LeNet)"
                )
            shape = (h, w, c)
        elif isinstance(op, Flatten):
            shape = (shape[0] * shape[1] * shape[2],)
        elif isinstance(op, GlobalAvgPool):
            shape = (shape[2],)
        elif isinstance(op, Dense):
            shape = (op.units,)
        elif isinstance(op, (LSTM, GRU)):
            shape = (op.units,)
        shapes.append(shape)
    return shapes


def _checked_plan(arch: str, input_hwc: Any, num_classes: int) -> tuple[Op, ...]:
    plan = layer_plan(arch, num_classes)
    trace_shapes(arch, plan, input_hwc)
    return plan
