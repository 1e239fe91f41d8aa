"""The Keras and PyTorch twins of every zoo architecture, built for real: equal
parameter counts (and equal to the count worked out by hand from the paper's
layer list), and weight transfer in both directions that gives the same logits
on random inputs, with BatchNorm running statistics made non-trivial by real
training-mode forward passes.
"""

import numpy as np
import pytest
import torch

from deploytool import zoo
from deploytool.errors import BadModelFile, UnknownModel
from deploytool.zoo.plans import INPUT_KINDS

pytestmark = pytest.mark.slow

torch.set_num_threads(1)

INPUT_HWC = {
    "lenet1": (28, 28, 1),
    "lenet5": (28, 28, 1),
    "resnet20": (32, 32, 3),
    "vgg_small": (32, 32, 3),
    "mlp": (28, 28, 1),  # read as 784 features
    "lstm": (28, 28, 1),  # read as 28 rows of 28 pixels
    "gru": (28, 28, 1),
}
NUM_CLASSES = 10
MAX_ABS_DIFF = 1e-4


def _conv(cin, cout, k, bias=True):
    return cin * cout * k * k + (cout if bias else 0)


def _dense(fin, fout):
    return fin * fout + fout


def _expected_counts():
    """(trainable, BN running statistics) per architecture, from the layer lists."""
    lenet1 = _conv(1, 4, 5) + _conv(4, 12, 5) + _dense(4 * 4 * 12, 10)
    lenet5 = _conv(1, 6, 5) + _conv(6, 16, 5) + _dense(5 * 5 * 16, 120) + _dense(120, 84) + _dense(84, 10)

    res_train = _conv(3, 16, 3, bias=False) + 2 * 16
    res_bn_channels = 16
    cin = 16
    for cout in (16, 32, 64):
        for _block in range(3):
            res_train += _conv(cin, cout, 3, False) + _conv(cout, cout, 3, False) + 2 * (2 * cout)
            res_bn_channels += 2 * cout
            if cin != cout:
                res_train += _conv(cin, cout, 1, False) + 2 * cout
                res_bn_channels += cout
            cin = cout
    res_train += _dense(64, 10)

    vgg_train, vgg_bn_channels, cin = 0, 0, 3
    for cout in (32, 32, 64, 64, 128, 128):
        vgg_train += _conv(cin, cout, 3, False) + 2 * cout
        vgg_bn_channels += cout
        cin = cout
    vgg_train += _dense(4 * 4 * 128, 128) + _dense(128, 10)

    u, steps = 64, 28
    lstm = 4 * (steps * u + u * u) + _dense(u, 10)  # no biases (Keras has one per gate, PyTorch two)
    gru = 3 * (steps * u + u * u) + 2 * 3 * u + _dense(u, 10)  # reset_after: an input and a recurrent bias
    mlp = _dense(784, 256) + _dense(256, 128) + _dense(128, 10)
    return {
        "mlp": (mlp, 0),
        "lstm": (lstm, 0),
        "gru": (gru, 0),
        "lenet1": (lenet1, 0),
        "lenet5": (lenet5, 0),
        "resnet20": (res_train, 2 * res_bn_channels),
        "vgg_small": (vgg_train, 2 * vgg_bn_channels),
    }


def _inputs_nhwc(hwc, n=48, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(0.3, 1.0, size=(n, *hwc)).astype(np.float32)


def _as_read(arch, x_nhwc, torch_side=False):
    """The images as `arch` reads them: NHWC (NCHW for PyTorch), or rows as steps, or flat features."""
    kind, (n, h, w, c) = INPUT_KINDS[arch], x_nhwc.shape
    if kind == "sequence":
        return np.ascontiguousarray(x_nhwc.reshape(n, h, w * c))
    if kind == "features":
        return np.ascontiguousarray(x_nhwc.reshape(n, h * w * c))
    return np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)) if torch_side else x_nhwc


def _keras_logits(kmodel, x_nhwc):
    return np.asarray(kmodel(_as_read(kmodel.name, x_nhwc), training=False))


def _torch_logits(tmodel, x_nhwc):
    tmodel.eval()
    with torch.no_grad():
        return tmodel(torch.from_numpy(_as_read(tmodel.arch, x_nhwc, torch_side=True))).numpy()


def _perturb_keras(kmodel, hwc, seed=1):
    """Move every BN layer off its defaults: running stats by real training-mode
    passes on shifted data, scale/offset by random draws."""
    rng = np.random.default_rng(seed)
    for _ in range(3):
        kmodel(_as_read(kmodel.name, _inputs_nhwc(hwc, 16, seed=int(rng.integers(1 << 30))) * 1.5 + 0.5),
               training=True)
    for layer in kmodel.layers:
        if layer.__class__.__name__ == "BatchNormalization":
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([
                rng.uniform(0.5, 1.5, gamma.shape).astype(np.float32),
                rng.normal(0.0, 0.2, beta.shape).astype(np.float32),
                mean, var,
            ])


def _perturb_torch(tmodel, hwc, seed=2):
    rng = np.random.default_rng(seed)
    tmodel.train()
    with torch.no_grad():
        for _ in range(3):
            x = _inputs_nhwc(hwc, 16, seed=int(rng.integers(1 << 30))) * 1.5 + 0.5
            tmodel(torch.from_numpy(_as_read(tmodel.arch, x, torch_side=True)))
        for module in tmodel.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, module.weight.shape).astype(np.float32)))
                module.bias.copy_(torch.from_numpy(rng.normal(0.0, 0.2, module.bias.shape).astype(np.float32)))
    tmodel.eval()


def _bn_stats_are_nontrivial(kmodel):
    bns = [layer for layer in kmodel.layers if layer.__class__.__name__ == "BatchNormalization"]
    for layer in bns:
        _, _, mean, var = layer.get_weights()
        assert np.abs(mean).max() > 1e-2 and np.abs(var - 1.0).max() > 1e-2, layer.name
    return len(bns)


@pytest.mark.parametrize("arch", tuple(zoo.ARCHITECTURES))
def test_twins_have_equal_parameter_counts_matching_the_layer_list(arch):
    kmodel = zoo.build_keras(arch, INPUT_HWC[arch], NUM_CLASSES)
    tmodel = zoo.build_torch(arch, INPUT_HWC[arch], NUM_CLASSES)
    trainable, bn_stats = _expected_counts()[arch]

    assert zoo.count_params(kmodel, trainable_only=True) == trainable
    assert zoo.count_params(tmodel, trainable_only=True) == trainable
    assert zoo.count_params(kmodel) == trainable + bn_stats
    assert zoo.count_params(tmodel) == trainable + bn_stats


@pytest.mark.parametrize("arch", tuple(zoo.ARCHITECTURES))
def test_keras_to_torch_gives_the_same_logits(arch):
    hwc = INPUT_HWC[arch]
    kmodel = zoo.build_keras(arch, hwc, NUM_CLASSES)
    tmodel = zoo.build_torch(arch, hwc, NUM_CLASSES)
    _perturb_keras(kmodel, hwc)
    if arch in ("resnet20", "vgg_small"):
        assert _bn_stats_are_nontrivial(kmodel) > 0
    x = _inputs_nhwc(hwc)
    keras_logits = _keras_logits(kmodel, x)
    # Independent initialisations must disagree, or the check below proves nothing.
    assert np.abs(keras_logits - _torch_logits(tmodel, x)).max() > 1e-2

    zoo.keras_to_torch(kmodel, tmodel)

    torch_logits = _torch_logits(tmodel, x)
    assert torch_logits.shape == (len(x), NUM_CLASSES)
    assert np.array_equal(keras_logits.argmax(1), torch_logits.argmax(1))
    assert np.abs(keras_logits - torch_logits).max() < MAX_ABS_DIFF


@pytest.mark.parametrize("arch", tuple(zoo.ARCHITECTURES))
def test_torch_to_keras_gives_the_same_logits(arch):
    hwc = INPUT_HWC[arch]
    kmodel = zoo.build_keras(arch, hwc, NUM_CLASSES)
    tmodel = zoo.build_torch(arch, hwc, NUM_CLASSES)
    _perturb_torch(tmodel, hwc)
    x = _inputs_nhwc(hwc, seed=3)
    torch_logits = _torch_logits(tmodel, x)
    assert np.abs(torch_logits - _keras_logits(kmodel, x)).max() > 1e-2

    zoo.torch_to_keras(tmodel, kmodel)

    keras_logits = _keras_logits(kmodel, x)
    if arch in ("resnet20", "vgg_small"):
        assert _bn_stats_are_nontrivial(kmodel) > 0
    assert np.array_equal(keras_logits.argmax(1), torch_logits.argmax(1))
    assert np.abs(keras_logits - torch_logits).max() < MAX_ABS_DIFF


@pytest.mark.parametrize("arch", tuple(zoo.ARCHITECTURES))
def test_round_trip_keras_torch_keras_is_exact(arch):
    hwc = INPUT_HWC[arch]
    source = zoo.build_keras(arch, hwc, NUM_CLASSES)
    _perturb_keras(source, hwc)
    tmodel = zoo.build_torch(arch, hwc, NUM_CLASSES)
    back = zoo.build_keras(arch, hwc, NUM_CLASSES)

    zoo.keras_to_torch(source, tmodel)
    zoo.torch_to_keras(tmodel, back)

    for a, b in zip(source.weights, back.weights):
        assert a.path == b.path
        assert np.array_equal(np.asarray(a), np.asarray(b)), a.path


@pytest.mark.parametrize("arch,hwc", [("lenet5", (28, 36, 1)), ("vgg_small", (32, 48, 3))])
def test_flatten_permutation_holds_on_non_square_inputs(arch, hwc):
    # With H != W, mixing up the two spatial axes in the Dense-after-Flatten
    # permutation cannot go unnoticed.
    kmodel = zoo.build_keras(arch, hwc, NUM_CLASSES)
    tmodel = zoo.build_torch(arch, hwc, NUM_CLASSES)
    _perturb_keras(kmodel, hwc)
    x = _inputs_nhwc(hwc, n=16)

    zoo.keras_to_torch(kmodel, tmodel)
    assert np.abs(_keras_logits(kmodel, x) - _torch_logits(tmodel, x)).max() < MAX_ABS_DIFF

    other = zoo.build_keras(arch, hwc, NUM_CLASSES)
    zoo.torch_to_keras(tmodel, other)
    assert np.abs(_keras_logits(other, x) - _torch_logits(tmodel, x)).max() < MAX_ABS_DIFF


def test_models_output_logits_with_the_documented_io():
    import keras

    kmodel = zoo.build_keras("lenet5", (28, 28, 1), NUM_CLASSES)
    assert kmodel.inputs[0].name == "input"
    assert tuple(kmodel.inputs[0].shape) == (None, 28, 28, 1)
    assert kmodel.inputs[0].dtype == "float32"
    assert kmodel.layers[-1].activation is keras.activations.linear
    tmodel = zoo.build_torch("lenet5", (28, 28, 1), NUM_CLASSES)
    assert isinstance(list(tmodel.children())[-1], torch.nn.Linear)
    logits = _torch_logits(tmodel, _inputs_nhwc((28, 28, 1), n=4))
    # Logits, not probabilities: rows do not sum to one.
    assert not np.allclose(logits.sum(1), 1.0, atol=1e-3)


def test_batchnorm_settings_are_identical_in_both_frameworks():
    kmodel = zoo.build_keras("resnet20", (32, 32, 3), NUM_CLASSES)
    tmodel = zoo.build_torch("resnet20", (32, 32, 3), NUM_CLASSES)
    kbns = [layer for layer in kmodel.layers if layer.__class__.__name__ == "BatchNormalization"]
    tbns = [m for m in tmodel.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(kbns) == len(tbns) == 1 + 9 * 2 + 2  # stem, blocks, projections
    for layer in kbns:
        assert layer.epsilon == pytest.approx(zoo.BN_EPSILON, rel=1e-9)
        assert layer.momentum == pytest.approx(zoo.BN_MOMENTUM_KERAS)
    for module in tbns:
        assert module.eps == pytest.approx(zoo.BN_EPSILON, rel=1e-9)
        assert module.momentum == pytest.approx(1.0 - zoo.BN_MOMENTUM_KERAS)


def test_no_stride_two_conv_relies_on_keras_same_padding():
    import keras

    kmodel = zoo.build_keras("resnet20", (32, 32, 3), NUM_CLASSES)
    strided = [c for c in kmodel.layers if isinstance(c, keras.layers.Conv2D) and c.strides != (1, 1)]
    assert len(strided) == 4  # two 3x3 convs and two 1x1 projections
    assert all(c.padding == "valid" for c in strided)


def test_transfer_between_different_architectures_is_refused():
    kmodel = zoo.build_keras("lenet1", (28, 28, 1), NUM_CLASSES)
    tmodel = zoo.build_torch("lenet5", (28, 28, 1), NUM_CLASSES)
    with pytest.raises(BadModelFile, match="only in Keras"):
        zoo.keras_to_torch(kmodel, tmodel)
    with pytest.raises(BadModelFile, match="only in Keras"):
        zoo.torch_to_keras(tmodel, kmodel)


def test_transfer_with_a_different_number_of_classes_is_refused():
    kmodel = zoo.build_keras("lenet5", (28, 28, 1), NUM_CLASSES)
    tmodel = zoo.build_torch("lenet5", (28, 28, 1), 5)
    with pytest.raises(BadModelFile, match="fc3"):
        zoo.keras_to_torch(kmodel, tmodel)
    with pytest.raises(BadModelFile, match="fc3"):
        zoo.torch_to_keras(tmodel, kmodel)


def test_unknown_architecture_raises_with_the_known_names():
    for build in (zoo.build_keras, zoo.build_torch):
        with pytest.raises(UnknownModel) as err:
            build("alexnet", (28, 28, 1), NUM_CLASSES)
        assert "alexnet" in str(err.value)
        assert all(name in str(err.value) for name in zoo.ARCHITECTURES)


def test_count_params_rejects_what_is_not_a_model():
    with pytest.raises(TypeError, match="keras.Model or torch.nn.Module"):
        zoo.count_params(object())


def test_an_architecture_reading_a_kind_of_its_own_has_twins_that_agree():
    """tests/columns_kind.py's `gru_columns` reads an image column by column: both builders take the kind's sample
    shape (width steps of height x channels), and the twins give the same logits on the kind's samples."""
    import importlib

    import tests.columns_kind as module

    importlib.reload(module)
    try:
        hwc = (6, 5, 2)  # not square: a column is not a row
        kmodel, tmodel = zoo.build_keras(module.ARCH, hwc, 4), zoo.build_torch(module.ARCH, hwc, 4)
        assert tuple(kmodel.input_shape) == (None, 5, 12)
        zoo.keras_to_torch(kmodel, tmodel)
        x = module.Columns().from_images(_inputs_nhwc(hwc, 8))
        tmodel.eval()
        with torch.no_grad():
            torch_logits = tmodel(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(np.asarray(kmodel(x, training=False)), torch_logits, atol=1e-5)
    finally:
        module.unregister()
