"""The PyTorch side of an atlas build (runs in the build worker only): the final Linear (or 1x1 Conv2d) centred
and scaled so the outputs vary across samples, the outputs on the test set, the parameter count, and the
torch.export `.pt2` (a dynamic batch when the model exports with one, else batch 1, which migrate runs padded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from deploytool.atlas.inputs import MIN_RELATIVE_SPREAD, rescale_for_spread


def _tensors(test: dict[str, np.ndarray], n: int | None = None) -> tuple[Any, ...]:
    import torch

    return tuple(torch.from_numpy(np.ascontiguousarray(v[:n])) for v in test.values())


def seed(value: int) -> None:
    """Seed PyTorch's random initialisers."""
    import torch

    torch.manual_seed(value)


def _final_layer(model: Any) -> Any:
    import torch

    last = None
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) or (isinstance(module, torch.nn.Conv2d)
                                                    and tuple(module.kernel_size) == (1, 1)):
            last = module
    return last


def calibrate_batch_norm(model: Any, data: dict[str, np.ndarray]) -> int:
    """Every BatchNorm's running mean and variance set to its batch statistics on `data` (see
    deploytool.atlas.keras_io.calibrate_batch_norm); returns how many layers. The model is left in eval mode."""
    import torch

    model.eval()  # torchvision's constructors return a module in training mode: dropout would be exported
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return 0
    for m in norms:
        m.momentum = 1.0  # running = batch statistics
    model.train()
    try:
        with torch.no_grad():
            model(*_tensors(data))
    finally:
        model.eval()
    return len(norms)


def rescale_final_layer(model: Any, test: dict[str, np.ndarray]) -> str:
    import torch

    layer = _final_layer(model)
    if layer is None or layer.bias is None:
        return ""
    drawn = ""
    if not bool(layer.weight.detach().any()):  # a head initialised to zeros (torchvision's ViT): drawn first
        with torch.no_grad():
            torch.nn.init.normal_(layer.weight, std=0.02)
        drawn = "zero-initialised head drawn from N(0, 0.02); "
    seen: list[np.ndarray] = []
    hook = layer.register_forward_hook(lambda _m, _i, out: seen.append(out.detach().numpy()))
    try:
        with torch.no_grad():
            model(*_tensors(test))
    finally:
        hook.remove()
    out = seen[-1]
    logits = np.moveaxis(out, 1, -1) if isinstance(layer, torch.nn.Conv2d) else out
    relative = float(np.mean(np.std(logits.reshape(-1, logits.shape[-1]), axis=0))) / \
        (float(np.mean(np.abs(logits))) + 1e-30)
    if relative < MIN_RELATIVE_SPREAD:
        return f"not rescaled: the logits vary by {relative:.1e} of their size (float rounding)"
    k, shift = rescale_for_spread(logits)
    with torch.no_grad():
        layer.weight.mul_(k)
        layer.bias.sub_(torch.from_numpy(shift)).mul_(k)
    name = next((n for n, m in model.named_modules() if m is layer), type(layer).__name__)
    return f"{drawn}{name}: centred and scaled x{k:.3g}"


def predict(model: Any, test: dict[str, np.ndarray]) -> np.ndarray:
    import torch

    with torch.no_grad():
        return np.asarray(model(*_tensors(test)).numpy())


def count_params(model: Any) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def save(model: Any, test: dict[str, np.ndarray], path: Path) -> None:
    import torch

    batch = torch.export.Dim("batch", min=1, max=4096)
    args = _tensors(test, 2)  # two samples: an export at one would specialise the batch to 1
    try:
        program = torch.export.export(model, args, dynamic_shapes=tuple({0: batch} for _ in args))
    except Exception:  # a model whose code fixes the batch (a reshape with a literal size): exported at one
        program = torch.export.export(model, _tensors(test, 1))
    torch.export.save(program, str(path))
