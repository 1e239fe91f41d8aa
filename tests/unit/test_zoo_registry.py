"""The zoo registry without the frameworks: importing deploytool.zoo and asking
for a wrong name or a too-small input must not import TensorFlow, Keras or
PyTorch, and the neutral layer plans have the shapes of the published nets.
"""

import ast
import subprocess
import sys
import textwrap

import pytest

from deploytool import zoo
from deploytool.zoo import plans
from deploytool.errors import ShapeError, SpecError, UnknownModel

HEAVY = ("tensorflow", "keras", "torch", "jax")


def _run_and_report_heavy_modules(code: str) -> list[str]:
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import sys
        print(sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_importing_the_zoo_imports_no_framework():
    assert _run_and_report_heavy_modules("import deploytool.zoo") == []


def test_bad_names_and_shapes_fail_before_any_framework_import():
    code = """
        from deploytool import zoo
        from deploytool.errors import ShapeError, UnknownModel
        for build in (zoo.build_keras, zoo.build_torch):
            try:
                build("alexnet", (28, 28, 1), 10)
            except UnknownModel:
                pass
            else:
                raise SystemExit("no UnknownModel")
            try:
                build("lenet5", (8, 8, 1), 10)
            except ShapeError:
                pass
            else:
                raise SystemExit("no ShapeError")
    """
    assert _run_and_report_heavy_modules(code) == []


def test_registry_lists_the_architectures_and_what_each_reads():
    assert tuple(zoo.ARCHITECTURES) == ("lenet1", "lenet5", "resnet20", "vgg_small", "mlp", "lstm", "gru")
    assert {a: k for a, k in plans.INPUT_KINDS.items() if k != "image"} == {
        "mlp": "features", "lstm": "sequence", "gru": "sequence"}
    assert set(plans.INPUT_KINDS) == set(zoo.ARCHITECTURES)
    assert plans.input_shape_of("lstm", (28, 28, 1)) == (28, 28)
    assert plans.input_shape_of("mlp", (28, 28, 1)) == (784,)
    assert plans.input_shape_of("lenet5", (28, 28, 1)) == (28, 28, 1)
    assert zoo.trace_shapes("lstm", zoo.layer_plan("lstm", 10), (28, 28, 1)) == [(64,), (10,)]
    assert zoo.trace_shapes("mlp", zoo.layer_plan("mlp", 10), (28, 28, 1))[-1] == (10,)


def test_an_architecture_registers_itself_with_the_decorator():
    @zoo.register_architecture("tiny_test_net")
    def _tiny(num_classes: int):
        return (plans.Flatten("flatten"), plans.Dense("fc", num_classes))

    try:
        assert "tiny_test_net" in zoo.ARCHITECTURES and tuple(zoo.ARCHITECTURES)[-1] == "tiny_test_net"
        assert zoo.layer_plan("tiny_test_net", 3)[-1] == plans.Dense("fc", 3)
        assert zoo.trace_shapes("tiny_test_net", _tiny(3), (4, 4, 1)) == [(16,), (3,)]
    finally:
        zoo.ARCHITECTURES.unregister("tiny_test_net")
    assert "tiny_test_net" not in zoo.ARCHITECTURES


def test_unknown_architecture_message_lists_the_known_ones():
    with pytest.raises(UnknownModel) as err:
        zoo.layer_plan("lenet7", 10)
    message = str(err.value)
    assert "lenet7" in message and "\n" not in message
    assert all(name in message for name in zoo.ARCHITECTURES)


@pytest.mark.parametrize(
    "arch,hwc,flattened",
    [
        ("lenet1", (28, 28, 1), (4, 4, 12)),
        ("lenet5", (28, 28, 1), (5, 5, 16)),
        ("vgg_small", (32, 32, 3), (4, 4, 128)),
    ],
)
def test_feature_map_before_flatten_matches_the_published_nets(arch, hwc, flattened):
    plan = zoo.layer_plan(arch, 10)
    shapes = zoo.trace_shapes(arch, plan, hwc)
    flatten_at = next(i for i, op in enumerate(plan) if isinstance(op, plans.Flatten))
    assert shapes[flatten_at - 1] == flattened
    assert shapes[-1] == (10,)


def test_resnet20_has_three_stages_of_three_blocks_ending_in_64_channels():
    plan = zoo.layer_plan("resnet20", 10)
    blocks = [op for op in plan if isinstance(op, plans.BasicBlock)]
    assert [b.filters for b in blocks] == [16] * 3 + [32] * 3 + [64] * 3
    assert [b.stride for b in blocks] == [1, 1, 1, 2, 1, 1, 2, 1, 1]
    shapes = zoo.trace_shapes("resnet20", plan, (32, 32, 3))
    assert shapes[plan.index(blocks[-1])] == (8, 8, 64)


@pytest.mark.parametrize("hwc", [(28, 28), (28, 28, 0), (28.0, 28, 1), "28x28x1"])
def test_malformed_input_shape_is_a_shape_error(hwc):
    with pytest.raises(ShapeError, match="height, width, channels"):
        zoo.trace_shapes("lenet5", zoo.layer_plan("lenet5", 10), hwc)


@pytest.mark.parametrize("num_classes", [0, 1, 2.5, True])
def test_bad_number_of_classes_is_a_spec_error(num_classes):
    with pytest.raises(SpecError, match="num_classes"):
        zoo.layer_plan("lenet1", num_classes)
