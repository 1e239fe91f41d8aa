"""Copies weights between the Keras and PyTorch twins of a zoo model, in place,
with every layout difference handled explicitly: conv kernels are HWIO in
Keras and OIHW in torch; Dense kernels are (in, out) vs (out, in); a Dense fed
by Flatten sees features flattened in (H, W, C) order in Keras and (C, H, W)
order in torch, so its input rows are permuted; BatchNorm carries its running
statistics; an LSTM's or GRU's gate blocks are reordered (Keras i f c o and
z r h, PyTorch i f g o and r z n) and a GRU's two biases become PyTorch's input
and recurrent biases. Layers are paired by name (torch "s2b0.conv1" = Keras
"s2b0_conv1"). It must refuse, with an error naming the layer, anything it
does not know how to copy, rather than skip it and leave a silently wrong model.
"""

from __future__ import annotations

import keras
from typing import Any
import numpy as np
import torch
from torch import nn

from deploytool.errors import BadModelFile

_PAIRS = (
    (keras.layers.Conv2D, nn.Conv2d),
    (keras.layers.Dense, nn.Linear),
    (keras.layers.BatchNormalization, nn.BatchNorm2d),
    (keras.layers.LSTM, nn.LSTM),
    (keras.layers.GRU, nn.GRU),
)
# A recurrent layer's gates: Keras stacks LSTM gates i, f, c, o and GRU gates z, r, h; PyTorch i, f, g, o and
# r, z, n. The order of the Keras blocks as PyTorch takes them:
_GATES = {nn.LSTM: (0, 1, 2, 3), nn.GRU: (1, 0, 2)}
_FIX = "build both twins with the same architecture, input shape and num_classes"


def _mismatch(problem: str) -> BadModelFile:
    return BadModelFile(f"cannot transfer weights: {problem}; {_FIX}")


def _keras_layers(kmodel: keras.Model) -> dict:
    layers = {}
    for layer in kmodel.layers:
        if not layer.weights:
            continue
        if not any(isinstance(layer, k) for k, _ in _PAIRS):
            raise _mismatch(f"Keras layer {layer.name!r} ({type(layer).__name__}) has weights of an unsupported kind")
        layers[layer.name] = layer
    return layers


def _torch_modules(tmodel: nn.Module) -> dict:
    modules = {}
    for path, module in tmodel.named_modules():
        own = list(module.parameters(recurse=False)) + list(module.buffers(recurse=False))
        if not own:
            continue
        if not isinstance(module, tuple(t for _, t in _PAIRS)):
            raise _mismatch(f"torch module {path!r} ({type(module).__name__}) has weights of an unsupported kind")
        if isinstance(module, (nn.LSTM, nn.GRU)):
            path = path.removesuffix(".rnn")  # zoo.torch_models.LastHidden holds the layer as `rnn`
        modules[path.replace(".", "_")] = module
    return modules


def _paired(kmodel: keras.Model, tmodel: nn.Module) -> list:
    klayers, tmodules = _keras_layers(kmodel), _torch_modules(tmodel)
    if klayers.keys() != tmodules.keys():
        only_k = sorted(klayers.keys() - tmodules.keys())
        only_t = sorted(tmodules.keys() - klayers.keys())
        raise _mismatch(f"layers only in Keras {only_k}, only in torch {only_t}")
    pairs = []
    for name, klayer in klayers.items():
        tmodule = tmodules[name]
        if not any(isinstance(klayer, k) and isinstance(tmodule, t) for k, t in _PAIRS):
            raise _mismatch(f"layer {name!r} is {type(klayer).__name__} in Keras but {type(tmodule).__name__} in torch")
        pairs.append((name, klayer, tmodule))
    return pairs


def _flattened_hwc(kmodel: keras.Model, dense: Any) -> tuple[int, int, int] | None:
    """(H, W, C) of the feature map a Flatten turns into `dense`'s input, if any."""
    for layer in kmodel.layers:
        if isinstance(layer, keras.layers.Flatten) and dense.input is layer.output:
            h, w, c = layer.input.shape[1:]
            return int(h), int(w), int(c)
    return None


def _check_shape(name: str, what: str, got: Any, want: Any) -> None:
    if tuple(got) != tuple(want):
        raise _mismatch(f"{what} of layer {name!r} has shape {tuple(got)} but the target expects {tuple(want)}")


def _check_bn(name: str, klayer: Any, tmodule: nn.BatchNorm2d) -> None:
    if not (klayer.center and klayer.scale and tmodule.affine and tmodule.track_running_stats):
        raise _mismatch(f"BatchNorm {name!r} must have scale, offset and running statistics on both sides")
    if not np.isclose(klayer.epsilon, tmodule.eps, rtol=1e-6, atol=0.0):
        raise _mismatch(f"BatchNorm {name!r} has epsilon {klayer.epsilon} in Keras but {tmodule.eps} in torch")


# ---- per-kind layout conversion, both directions -------------------------------


def _dense_k2t(kernel: np.ndarray, hwc: Any) -> np.ndarray:
    if hwc is None:
        return kernel.T
    h, w, c = hwc
    # Keras row index = (h*W + w)*C + c; torch column index = (c*H + h)*W + w.
    return kernel.reshape(h, w, c, -1).transpose(3, 2, 0, 1).reshape(kernel.shape[1], -1)


def _dense_t2k(weight: np.ndarray, hwc: Any) -> np.ndarray:
    if hwc is None:
        return weight.T
    h, w, c = hwc
    return weight.reshape(-1, c, h, w).transpose(2, 3, 1, 0).reshape(h * w * c, weight.shape[0])


def _gates(m: np.ndarray, order: tuple[int, ...], axis: int) -> np.ndarray:
    """`m`'s gate blocks along `axis` in `order` (its inverse reorders back)."""
    blocks = np.split(m, len(order), axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(order))


def _recurrent_k2t(name: str, weights: list[np.ndarray], tmodule: nn.Module) -> None:
    """Keras kernel (in, G*u), recurrent kernel (u, G*u)[, bias (2, G*u) for GRU] -> PyTorch's weight_ih
    (G*u, in), weight_hh (G*u, u)[, bias_ih, bias_hh], gates reordered."""
    order = _GATES[type(tmodule)]
    arrays = [_gates(weights[0], order, 1).T, _gates(weights[1], order, 1).T]
    targets = [tmodule.weight_ih_l0, tmodule.weight_hh_l0]
    if len(weights) == 3:
        arrays += [_gates(weights[2][0], order, 0), _gates(weights[2][1], order, 0)]
        targets += [tmodule.bias_ih_l0, tmodule.bias_hh_l0]
    if len(targets) != len([p for p in tmodule.parameters()]):
        raise _mismatch(f"layer {name!r} has biases on one side only")
    for i, (src, dst) in enumerate(zip(arrays, targets)):
        _check_shape(name, f"weight {i}", src.shape, dst.shape)
        dst.copy_(torch.from_numpy(np.ascontiguousarray(src)))


def _recurrent_t2k(tmodule: nn.Module) -> list[np.ndarray]:
    back = _inverse(_GATES[type(tmodule)])
    np_ = [p.detach().cpu().numpy().astype(np.float32) for p in tmodule.parameters()]
    out = [_gates(np_[0].T, back, 1), _gates(np_[1].T, back, 1)]
    if len(np_) == 4:
        out.append(np.stack([_gates(np_[2], back, 0), _gates(np_[3], back, 0)]))
    return out


def keras_to_torch(kmodel: keras.Model, tmodel: nn.Module) -> None:
    with torch.no_grad():
        for name, klayer, tmodule in _paired(kmodel, tmodel):
            weights = [np.asarray(w, dtype=np.float32) for w in klayer.get_weights()]
            if isinstance(tmodule, (nn.LSTM, nn.GRU)):
                _recurrent_k2t(name, weights, tmodule)
                continue
            if isinstance(tmodule, nn.BatchNorm2d):
                _check_bn(name, klayer, tmodule)
                targets = [tmodule.weight, tmodule.bias, tmodule.running_mean, tmodule.running_var]
            else:
                if (tmodule.bias is None) != (len(weights) == 1):
                    raise _mismatch(f"layer {name!r} has a bias on one side only")
                if isinstance(tmodule, nn.Conv2d):
                    weights[0] = weights[0].transpose(3, 2, 0, 1)  # HWIO -> OIHW
                else:
                    weights[0] = _dense_k2t(weights[0], _flattened_hwc(kmodel, klayer))
                targets = [tmodule.weight] + ([] if tmodule.bias is None else [tmodule.bias])
            for i, (src, dst) in enumerate(zip(weights, targets)):
                _check_shape(name, f"weight {i}", src.shape, dst.shape)
                dst.copy_(torch.from_numpy(np.ascontiguousarray(src)))


def torch_to_keras(tmodel: nn.Module, kmodel: keras.Model) -> None:
    for name, klayer, tmodule in _paired(kmodel, tmodel):
        if isinstance(tmodule, (nn.LSTM, nn.GRU)):
            arrays = _recurrent_t2k(tmodule)
            current = klayer.get_weights()
            if len(current) != len(arrays):
                raise _mismatch(f"layer {name!r} has {len(current)} weights in Keras but {len(arrays)} in torch")
            for i, (src, dst) in enumerate(zip(arrays, current)):
                _check_shape(name, f"weight {i}", src.shape, dst.shape)
            klayer.set_weights([np.ascontiguousarray(a) for a in arrays])
            continue
        if isinstance(tmodule, nn.BatchNorm2d):
            _check_bn(name, klayer, tmodule)
            sources = [tmodule.weight, tmodule.bias, tmodule.running_mean, tmodule.running_var]
        else:
            sources = [tmodule.weight] + ([] if tmodule.bias is None else [tmodule.bias])
        arrays = [s.detach().cpu().numpy().astype(np.float32) for s in sources]
        if isinstance(tmodule, nn.Conv2d):
            arrays[0] = arrays[0].transpose(2, 3, 1, 0)  # OIHW -> HWIO
        elif isinstance(tmodule, nn.Linear):
            arrays[0] = _dense_t2k(arrays[0], _flattened_hwc(kmodel, klayer))
        current = klayer.get_weights()
        if len(current) != len(arrays):
            raise _mismatch(f"layer {name!r} has {len(current)} weights in Keras but {len(arrays)} in torch")
        for i, (src, dst) in enumerate(zip(arrays, current)):
            _check_shape(name, f"weight {i}", src.shape, dst.shape)
        klayer.set_weights([np.ascontiguousarray(a) for a in arrays])
