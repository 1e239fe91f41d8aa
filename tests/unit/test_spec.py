import pytest

from deploytool.errors import SpecError, UnknownModel
from deploytool.spec import load_spec, manifest_paths, parse_spec

GOOD = """
[model]
name = "m"
architecture = "lenet5"
[data]
dataset = "mnist"
input_shape = [28, 28, 1]
labels = ["a", "b"]
[train]
epochs = 1
batch_size = 8
optimizer = "adam"
learning_rate = 0.01
seed = 3
[expect]
accuracy = [0.5, 1.0]
"""


def write(tmp_path, text):
    p = tmp_path / "m.toml"
    p.write_text(text)
    return p


def test_every_shipped_manifest_parses():
    names = {parse_spec(p).name for p in manifest_paths()}
    assert {"lenet1", "lenet5", "resnet20", "vgg_small"} <= names


def test_lenet5_manifest_fields():
    s = load_spec("lenet5")
    assert s.input_shape == (28, 28, 1) and s.layout == "NHWC" and s.num_classes == 10
    assert s.train.schedule == "cosine" and s.expected_accuracy[0] >= 0.97
    assert s.tolerance_for("none")["agreement"] == (1.0, 0.99)
    assert s.tolerance_for("int8")["accuracy_drop_points"] == (1.0, 3.0)


def test_defaults_and_hash_is_stable(tmp_path):
    a = parse_spec(write(tmp_path, GOOD))
    assert a.preprocess.scale == 1.0 and a.tolerances["quantized"]["agreement"] == (0.98, 0.95)
    assert a.content_hash() == parse_spec(write(tmp_path, GOOD)).content_hash()
    b = parse_spec(write(tmp_path, GOOD.replace("seed = 3", "seed = 4")))
    assert a.content_hash() != b.content_hash()


@pytest.mark.parametrize("change, field", [
    (("epochs = 1\n", ""), "train.epochs"),
    (('architecture = "lenet5"', 'architecture = "alexnet"'), "model.architecture"),
    (('dataset = "mnist"', 'dataset = "imagenet"'), "data.dataset"),
    (("input_shape = [28, 28, 1]", "input_shape = [28, 28]"), "data.input_shape"),
    (("input_shape = [28, 28, 1]", 'input_shape = "28x28"'), "data.input_shape"),
    (('optimizer = "adam"', 'optimizer = "lbfgs"'), "train.optimizer"),
    (("learning_rate = 0.01", 'learning_rate = "fast"'), "train.learning_rate"),
    (("accuracy = [0.5, 1.0]", "accuracy = [0.9, 0.5]"), "expect.accuracy"),
    (('labels = ["a", "b"]', 'labels = ["a"]'), "data.labels"),
])
def test_malformed_manifest_names_file_and_field(tmp_path, change, field):
    p = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(SpecError) as e:
        parse_spec(p)
    assert str(p) in str(e.value) and f"'{field}" in str(e.value)


def test_unknown_tolerance_metric_and_bad_toml(tmp_path):
    with pytest.raises(SpecError, match="tolerance.none.speed"):
        parse_spec(write(tmp_path, GOOD + "[tolerance.none]\nspeed = [1, 2]\n"))
    with pytest.raises(SpecError, match="not valid TOML"):
        parse_spec(write(tmp_path, GOOD + "[[[\n"))


def test_unknown_model_lists_known_ones():
    with pytest.raises(UnknownModel, match="lenet5"):
        load_spec("lenet7")
