"""torchvision's classification models as atlas architectures, built with `weights=None` by the library's own
builders (full size) and model classes (the quick tier's reduced width or depth: `width_mult`, the ResNet's
layers and group width, the ViT's layers and hidden size). NCHW float32 images in, class logits out.

torchvision 0.28.0 is the release for torch 2.13; the only wheel the package indexes hold is its CUDA build,
whose C extension (nms, roi_align, image decoding) cannot load beside the CPU torch. torchvision then fails at
import, registering fake kernels for `torchvision::nms`/`qnms`, which were never defined (pytorch/vision's
"operator torchvision::nms does not exist"). No classification model calls those ops: `import_torchvision`
defines their schemas (no kernel) when the extension did not load, so the models build; any call of them
would still fail."""

from __future__ import annotations

import sys
from typing import Any

from deploytool.atlas.architecture import Architecture, Size, register

FULL = (3, 224, 224)
QUICK = (3, 64, 64)
QUICK_CLASSES = 10
# the ops torchvision registers fake kernels for at import, with their schemas (torchvision/csrc/ops/nms.cpp)
_FAKE_REGISTERED_OPS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                        "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_schema_lib: Any = None  # the torch.library fragment that defines them, kept alive


def import_torchvision() -> Any:
    """torchvision, imported; see the module docstring for the CUDA build's missing extension."""
    global _schema_lib
    import torch

    try:
        import torchvision

        return torchvision
    except RuntimeError as e:
        if "torchvision::" not in str(e) or _schema_lib is not None:
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]  # the half-imported package, imported again below
    _schema_lib = torch.library.Library("torchvision", "DEF")
    for schema in _FAKE_REGISTERED_OPS:
        _schema_lib.define(schema)
    import torchvision

    return torchvision


def _models() -> Any:
    return import_torchvision().models


def _mobilenet_v3_small(size: Size) -> Any:
    return _models().mobilenet_v3_small(weights=None, num_classes=size.params["classes"],
                                        width_mult=size.params["width"])


def _mobilenet_v2(size: Size) -> Any:
    return _models().mobilenet_v2(weights=None, num_classes=size.params["classes"], width_mult=size.params["width"])


def _resnet(size: Size) -> Any:
    m = _models()
    resnet = m.resnet
    p = size.params
    block = resnet.BasicBlock if p["block"] == "basic" else resnet.Bottleneck
    return m.ResNet(block, list(p["layers"]), num_classes=p["classes"], width_per_group=p.get("group_width", 64))


def _efficientnet_b0(size: Size) -> Any:
    efficientnet = _models().efficientnet
    setting, last = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=size.params["width"],
                                                    depth_mult=size.params["depth"])
    return efficientnet.EfficientNet(setting, 0.0, num_classes=size.params["classes"], last_channel=last)


def _shufflenet(size: Size) -> Any:
    shufflenetv2 = _models().shufflenetv2
    return shufflenetv2.ShuffleNetV2(list(size.params["repeats"]), list(size.params["channels"]),
                                     num_classes=size.params["classes"])


def _squeezenet(size: Size) -> Any:
    return _models().squeezenet1_1(weights=None, num_classes=size.params["classes"])


def _regnet(size: Size) -> Any:
    regnet = _models().regnet
    p = size.params
    params = regnet.BlockParams.from_init_params(depth=p["depth"], w_0=p["w_0"], w_a=p["w_a"], w_m=p["w_m"],
                                                 group_width=p["group_width"], se_ratio=0.25)
    return regnet.RegNet(params, num_classes=p["classes"], stem_width=p.get("stem", 32))


def _vit(size: Size) -> Any:
    p = size.params
    return _models().VisionTransformer(image_size=size.input_shape[1], patch_size=p["patch"], num_layers=p["layers"],
                                       num_heads=p["heads"], hidden_dim=p["hidden"], mlp_dim=p["mlp"],
                                       num_classes=p["classes"])


def _swin(size: Size) -> Any:
    swin_transformer = _models().swin_transformer
    p = size.params
    return swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=p["dim"], depths=list(p["depths"]),
                                            num_heads=list(p["heads"]), window_size=[p["window"], p["window"]],
                                            stochastic_depth_prob=0.0, num_classes=p["classes"])


def _add(name: str, build: Any, quick: dict[str, Any], full: dict[str, Any], family: str = "vision-cnn") -> None:
    register(Architecture(
        name=f"torchvision/{name}", family=family, provider="torchvision", input_kind="image",
        quick=Size({"classes": QUICK_CLASSES, **quick}, QUICK), full=Size({"classes": 1000, **full}, FULL, 64),
        build=build, test_set="smooth random colour fields (normalised)"))


_add("mobilenet_v3_small", _mobilenet_v3_small, {"width": 0.5}, {"width": 1.0})
_add("mobilenet_v2", _mobilenet_v2, {"width": 0.35}, {"width": 1.0})
_add("resnet18", _resnet, {"block": "basic", "layers": (1, 1, 1, 1)}, {"block": "basic", "layers": (2, 2, 2, 2)})
_add("resnet50", _resnet, {"block": "bottleneck", "layers": (1, 1, 1, 1), "group_width": 16},
     {"block": "bottleneck", "layers": (3, 4, 6, 3)})
_add("efficientnet_b0", _efficientnet_b0, {"width": 0.25, "depth": 0.34}, {"width": 1.0, "depth": 1.0})
_add("shufflenet_v2", _shufflenet, {"repeats": (2, 2, 2), "channels": (24, 24, 48, 96, 256)},
     {"repeats": (4, 8, 4), "channels": (24, 116, 232, 464, 1024)})
_add("squeezenet1_1", _squeezenet, {}, {})
_add("regnet_y_400mf", _regnet, {"depth": 8, "w_0": 16, "w_a": 8.0, "w_m": 2.0, "group_width": 8, "stem": 16},
     {"depth": 16, "w_0": 48, "w_a": 27.89, "w_m": 2.09, "group_width": 8})
_add("vit_b_16", _vit, {"patch": 16, "layers": 2, "heads": 2, "hidden": 64, "mlp": 128},
     {"patch": 16, "layers": 12, "heads": 12, "hidden": 768, "mlp": 3072}, family="vision-transformer")
_add("swin_t", _swin, {"dim": 24, "depths": (1, 1, 1, 1), "heads": (1, 2, 2, 4), "window": 4},
     {"dim": 96, "depths": (2, 2, 6, 2), "heads": (3, 6, 12, 24), "window": 7}, family="vision-transformer")
