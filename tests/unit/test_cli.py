import argparse
import subprocess
import sys

import pytest

from deploytool.cli import COMMANDS, build_parser
from tests.conftest import run_cli

HEAVY = ("tensorflow", "torch", "keras", "onnxruntime", "jax", "playwright", "adbutils", "sqlalchemy")


def test_help_imports_nothing_heavy():
    code = ("import sys, io, contextlib; from deploytool.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _command(parser: argparse.ArgumentParser, name: str, dest: str = "command") -> argparse.ArgumentParser:
    """The sub-parser `name` of the parser's sub-commands stored as `dest`."""
    commands = next(a for a in parser._actions if a.dest == dest)
    assert isinstance(commands, argparse._SubParsersAction)
    return commands.choices[name]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(command):
    parser = build_parser()
    sub = _command(parser, command)
    text = sub.format_help()
    assert "example:" in text and f"deploytool {command}" in text
    assert sub.description


def test_top_level_help_lists_commands():
    r = run_cli("--help")
    assert r.returncode == 0
    for c in COMMANDS:
        assert c in r.stdout


@pytest.mark.parametrize("args, needle", [
    (["train", "--model", "lenet7"], "unknown model 'lenet7'"),
    (["baseline", "--model", "resnet20", "--framework", "keras"], "CIFAR-10 is not bundled"),
    (["migrate", "--model", "lenet5", "--format", "coreml"], "unknown format 'coreml'"),
    (["migrate", "--model", "lenet5", "--quantize", "int3"], "unknown quantization 'int3'"),
    (["migrate", "--model", "lenet5", "--target", "mars"], "unknown target 'mars'"),
    (["migrate", "--model", "lenet5", "--data", "missing.npz"], "missing.npz: no such file"),
    (["report", "no-such-run"], "no stored run"),
])
def test_user_mistakes_give_one_line_and_exit_2(tmp_path, args, needle):
    r = run_cli(*args, "--workspace", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("deploytool: error:") and needle in lines[0]
    assert "Traceback" not in r.stderr


def test_models_lists_manifests(tmp_path):
    r = run_cli("models", cwd=tmp_path)
    assert r.returncode == 0
    assert "lenet5" in r.stdout and "resnet20" in r.stdout and "cifar10" in r.stdout
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[1:] if line.strip()}
    # what each architecture's input kind makes of the 28x28x1 digits: the image, its rows as steps, its values
    assert rows["lenet5"][3:6] == ["28x28x1", "image", "28x28x1"], rows["lenet5"]
    assert rows["gru"][3:6] == ["28x28x1", "sequence", "28x28"], rows["gru"]
    assert rows["mlp"][3:6] == ["28x28x1", "features", "784"], rows["mlp"]


def test_study_parsers_are_built_only_for_the_study_command():
    """`deploytool migrate ...` does not build the study parsers; `deploytool --help` reads the same either way,
    and `study`'s own help lists every study."""
    import contextlib
    import io

    from deploytool.cli import command_of
    from deploytool.study import STUDIES

    assert command_of(["migrate", "--model", "m.onnx"]) == "migrate" and command_of(["--help"]) is None
    assert command_of(["--version", "study", "robustness"]) == "study"
    lean, full = build_parser(studies=False), build_parser()
    assert all(c in lean.format_help() for c in COMMANDS) and all(name in full.format_help() for name in STUDIES)
    study = _command(full, "study")
    text = study.format_help()
    assert all(name in text for name in STUDIES) and "STUDY" in text
    robust = _command(study, "robustness", dest="study")
    assert "--eps" in robust.format_help() and "deploytool study robustness" in robust.format_help()
    with contextlib.redirect_stdout(io.StringIO()) as shown, contextlib.suppress(SystemExit):
        from deploytool.cli import main

        main(["study", "robustness", "--help"])
    assert "--eps" in shown.getvalue()


def test_a_migrate_loads_neither_the_lab_nor_the_studies():
    """Only the command that runs is imported (cli.COMMANDS): a user model's migrate pays for neither the lab
    (Dask's engine, regression statistics) nor the seed studies (15 modules)."""
    code = ("import sys; from deploytool.cli import build_parser, command_of\n"
            "build_parser(studies=command_of(['migrate']) in (None, 'study')); import deploytool.commands.runs\n"
            "print(' '.join(sorted({m.split('.')[1] for m in sys.modules if m.startswith('deploytool.')})))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert "migrate" in loaded and not loaded & {"lab", "study"}, loaded
