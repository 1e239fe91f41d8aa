"""The model zoo: each architecture written down once as a framework-neutral
layer plan, then built from that plan in Keras 3 and in PyTorch, so the twins
have the same layers and the same parameter count by construction. This module
is the public API; the registry is plans.py's `ARCHITECTURES`, where each plan
registers itself with `@register_architecture`. It must not import TensorFlow,
Keras or PyTorch at import time, and it checks names and shapes before any
heavy import so a typo costs milliseconds, not the seconds of `import tensorflow`.

What `count_params` counts, in both frameworks: every trainable parameter plus
the BatchNorm running mean and running variance (what Keras calls its
non-trainable weights). PyTorch's `num_batches_tracked` counter is not a weight
and is not counted. `count_params(model, trainable_only=True)` counts the
trainable parameters only.
"""

from __future__ import annotations

import sys
from typing import Any

from deploytool.proc.quiet import import_tensorflow
from deploytool.zoo.plans import (
    ARCHITECTURES,
    BN_EPSILON,
    BN_MOMENTUM_KERAS,
    _checked_plan,
    layer_plan,
    register_architecture,
    trace_shapes,
)

# ---- public API ------------------------------------------------------------------
# keras_models, torch_models and transfer import Keras and PyTorch when they load: they are imported inside the
# functions that build or copy a model, like the frameworks themselves.


def build_keras(arch: str, input_hwc: tuple[int, int, int], num_classes: int) -> Any:
    """A keras.Model named `arch`: NHWC float32 input named "input", logits out."""
    plan = _checked_plan(arch, input_hwc, num_classes)
    import_tensorflow()
    from deploytool.zoo import keras_models

    h, w, c = input_hwc
    return keras_models.build(arch, plan, (h, w, c))


def build_torch(arch: str, input_hwc: tuple[int, int, int], num_classes: int) -> Any:
    """A torch.nn.Module for `arch`: NCHW float32 input, logits out."""
    plan = _checked_plan(arch, input_hwc, num_classes)
    from deploytool.zoo import torch_models

    h, w, c = input_hwc
    return torch_models.build(arch, plan, (h, w, c))


def _framework_of(model: Any) -> str:
    # Look in sys.modules instead of importing: a model of a framework can only
    # exist if that framework is already imported.
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        return "torch"
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(model, keras.Model):
        return "keras"
    raise TypeError(f"expected a keras.Model or torch.nn.Module, got {type(model).__name__}")


def count_params(model: Any, trainable_only: bool = False) -> int:
    """Parameters of a Keras or PyTorch model; see the module docstring for what counts."""
    if _framework_of(model) == "torch":
        from deploytool.zoo import torch_models

        return torch_models.count_params(model, trainable_only)
    from deploytool.zoo import keras_models

    return keras_models.count_params(model, trainable_only)


def keras_to_torch(kmodel: Any, tmodel: Any) -> None:
    """Copy every weight and BatchNorm statistic of `kmodel` into `tmodel`, in place."""
    from deploytool.zoo import transfer

    transfer.keras_to_torch(kmodel, tmodel)


def torch_to_keras(tmodel: Any, kmodel: Any) -> None:
    """Copy every weight and BatchNorm statistic of `tmodel` into `kmodel`, in place."""
    from deploytool.zoo import transfer

    transfer.torch_to_keras(tmodel, kmodel)


__all__ = [
    "ARCHITECTURES",
    "BN_EPSILON",
    "BN_MOMENTUM_KERAS",
    "build_keras",
    "build_torch",
    "count_params",
    "keras_to_torch",
    "torch_to_keras",
    "layer_plan",
    "register_architecture",
    "trace_shapes",
]
