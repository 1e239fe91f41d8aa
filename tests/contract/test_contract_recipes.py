"""Every registered converter step can be reproduced without deploytool and is owned by a project: for each of
its modes and each source format it serves, its recipe (the call reproduce_convert.py makes) compiles inside the
template, names the distributions it imports, and says what it writes; every step but deploytool's own copy and
every built-in runtime declares where its bugs are reported (a finding is never addressed to "unknown")."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploytool import runtimes
from deploytool.artifact import Artifact, implied_signature
from deploytool.bugs.bundle import RECIPE_MARK, RECIPE_TEMPLATE
from deploytool.convert.registry import STEPS, _ROUTES
from deploytool.modelfiles.signature import Signature, TensorSpec

SIG = Signature((TensorSpec("ids", "int64", (None, 12), "tokens"), TensorSpec("mask", "int64", (None, 12), "tokens")),
                (TensorSpec("logits", "float32", (None, 3)),))
STEP_SOURCES = sorted({(routed.step, source) for (source, _), routed in _ROUTES.items()})


@pytest.mark.parametrize("step_name, source_format", STEP_SOURCES, ids=lambda v: str(v))
def test_every_step_has_a_recipe_for_each_of_its_modes_that_compiles_in_the_template(step_name, source_format):
    step = STEPS[step_name]
    if step.copies:  # a copy of the user's own file: nothing to reproduce
        return
    assert step.recipe is not None and step.owner, step_name
    for signature in (implied_signature((8, 8, 1), 10), SIG):
        source = Artifact(path=Path("model/m"), format=source_format, framework=source_format, layout="NHWC",
                          input_shape=(8, 8, 1), num_outputs=10, signature=signature)
        for quantize in step.modes:
            recipe = step.recipe(source, quantize)
            body = "\n".join("    " + line if line else "" for line in recipe.code.splitlines())
            text = RECIPE_TEMPLATE.read_text().replace(RECIPE_MARK, body)
            assert RECIPE_MARK not in text
            compile(text, f"{step_name}-{quantize}.py", "exec")
            assert recipe.imports and recipe.output and "OUT" in recipe.code and "SOURCE" in recipe.code


def test_every_runtime_names_its_owner_for_every_format_it_runs():
    for (target, fmt, name), _ in runtimes.REGISTRY.items():
        cls = runtimes.runtime_class(target, fmt, name)
        assert cls.owner_for(fmt), (target, fmt, name)
