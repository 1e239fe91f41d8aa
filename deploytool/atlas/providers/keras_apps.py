"""keras.applications as atlas architectures: each built with `weights=None` (nothing downloaded) by the library's
own constructor — the public ones at full size, the generic ones they wrap (`MobileNetV3`'s alpha, `EfficientNet`'s
width and depth coefficients, `ResNet`'s stack, `DenseNet`'s blocks, `ConvNeXt`'s depths and widths) for the quick
tier's reduced width. NHWC float32 images in; softmax class scores out. Keras is imported inside the builders."""

from __future__ import annotations

from typing import Any

from deploytool.atlas.architecture import Architecture, Size, register

QUICK_HW = 64
FULL = (224, 224, 3)
QUICK = (QUICK_HW, QUICK_HW, 3)
QUICK_CLASSES = 10


def _apps() -> Any:
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()
    import keras

    return keras.applications


def _generic(module: str) -> Any:
    """The module of keras.applications' generic constructors (EfficientNet, ResNet, DenseNet, ConvNeXt), which
    the public package does not re-export."""
    _apps()
    import importlib

    return importlib.import_module(f"keras.src.applications.{module}")


def _mobilenet_v3(size: Size, large: bool) -> Any:
    apps = _apps()
    cls = apps.MobileNetV3Large if large else apps.MobileNetV3Small
    return cls(input_shape=size.input_shape, alpha=size.params["alpha"], weights=None,
               classes=size.params["classes"], dropout_rate=0.0, include_preprocessing=False)


def _mobilenet_v2(size: Size) -> Any:
    return _apps().MobileNetV2(input_shape=size.input_shape, alpha=size.params["alpha"], weights=None,
                               classes=size.params["classes"])


def _mobilenet_v1(size: Size) -> Any:
    return _apps().MobileNet(input_shape=size.input_shape, alpha=size.params["alpha"], weights=None,
                             classes=size.params["classes"], dropout=0.0)


def _efficientnet(size: Size) -> Any:
    p = size.params
    return _generic("efficientnet").EfficientNet(p["width"], p["depth"], size.input_shape[0], dropout_rate=0.0,
                                          drop_connect_rate=0.0, name="efficientnet", weights=None,
                                          input_shape=size.input_shape, classes=p["classes"])


def _resnet50(size: Size) -> Any:
    resnet = _generic("resnet")
    f, blocks = size.params["filters"], size.params["blocks"]

    def stack_fn(x: Any) -> Any:  # ResNet50's own stack_fn, with the filters and block counts of this size
        x = resnet.stack_residual_blocks_v1(x, f, blocks[0], stride1=1, name="conv2")
        x = resnet.stack_residual_blocks_v1(x, f * 2, blocks[1], name="conv3")
        x = resnet.stack_residual_blocks_v1(x, f * 4, blocks[2], name="conv4")
        return resnet.stack_residual_blocks_v1(x, f * 8, blocks[3], name="conv5")

    return resnet.ResNet(stack_fn, False, True, name="resnet50", weights=None, input_shape=size.input_shape,
                              classes=size.params["classes"])


def _densenet(size: Size) -> Any:
    return _generic("densenet").DenseNet(size.params["blocks"], weights=None, input_shape=size.input_shape,
                                     classes=size.params["classes"])


def _convnext(size: Size) -> Any:
    p = size.params
    return _generic("convnext").ConvNeXt(p["depths"], p["dims"], default_size=size.input_shape[0], name="convnext",
                                     include_preprocessing=False, weights=None, input_shape=size.input_shape,
                                     classes=p["classes"])


def _add(name: str, build: Any, quick: dict[str, Any], full: dict[str, Any], pixels: str = "normalised",
         family: str = "vision-cnn") -> None:
    register(Architecture(
        name=f"keras/{name}", family=family, provider="keras", input_kind="image",
        quick=Size({"classes": QUICK_CLASSES, **quick}, QUICK), full=Size({"classes": 1000, **full}, FULL, 64),
        build=build, pixels=pixels,
        test_set="smooth random colour fields (" + ("0-255" if pixels == "0-255" else "normalised") + ")"))


_add("mobilenet_v3_small", lambda s: _mobilenet_v3(s, False), {"alpha": 0.75}, {"alpha": 1.0})
_add("mobilenet_v3_large", lambda s: _mobilenet_v3(s, True), {"alpha": 0.75}, {"alpha": 1.0})
_add("mobilenet_v2", _mobilenet_v2, {"alpha": 0.35}, {"alpha": 1.0})
_add("mobilenet_v1", _mobilenet_v1, {"alpha": 0.25}, {"alpha": 1.0})
# EfficientNet rescales 0-255 pixels inside the model (Rescaling, Normalization): its test set is in pixels
_add("efficientnet_b0", _efficientnet, {"width": 0.25, "depth": 0.34}, {"width": 1.0, "depth": 1.0}, pixels="0-255")
_add("resnet50", _resnet50, {"filters": 16, "blocks": (1, 1, 1, 1)}, {"filters": 64, "blocks": (3, 4, 6, 3)})
_add("densenet121", _densenet, {"blocks": (1, 2, 2, 1)}, {"blocks": (6, 12, 24, 16)})
_add("convnext_tiny", _convnext, {"depths": (1, 1, 1, 1), "dims": (16, 32, 64, 128)},
     {"depths": (3, 3, 9, 3), "dims": (96, 192, 384, 768)})
