"""Every bad input a hostile user found, through the real CLI: exit code 2, one
line on stderr that names the problem, no traceback, nothing written outside
the workspace, and the workspace still usable afterwards. The model is a tiny
ONNX classifier on 8x8 images (onnxruntime is its own baseline), so each case
costs a process start, not a training run."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.integration.test_usermodel import onnx_model
from tests.unit.test_onnx_external import tiny_onnx

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """inputs/ (a model and data the user owns), ws/ (the workspace), cwd/ (where the CLI runs)."""
    root = tmp_path_factory.mktemp("hostile")
    inputs = root / "inputs"
    inputs.mkdir()
    model = onnx_model(inputs / "m.onnx", [None, 8, 8, 1])
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (64, 8, 8, 1)).astype(np.uint8)
    np.savez(inputs / "t.npz", x=x, y=rng.integers(0, 10, 64))
    (root / "cwd").mkdir()
    return root, model, inputs / "t.npz"


def _tree(root: Path, skip: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if skip not in p.parents and p != skip}


def _npz(path: Path, **arrays) -> Path:
    np.savez(path, **arrays)
    return path


def _huge_npz(path: Path) -> Path:
    """An .npz whose x header declares 10^11 float32 pixels but holds a few bytes."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False,
                                              "shape": (10**9, 10, 10, 1)})
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", buf.getvalue() + b"\0" * 64)
        y = io.BytesIO()
        np.save(y, np.zeros(4, np.int64))
        zf.writestr("y.npy", y.getvalue())
    return path


def _manifest(path: Path, **override) -> Path:
    """lenet1's manifest with `section.key=value` overrides (a dotted name per keyword: model__name)."""
    import tomllib

    import tomli_w

    data = tomllib.loads((Path(__file__).resolve().parents[2] / "models" / "lenet1.toml").read_text())
    for dotted, value in override.items():
        *parents, key = dotted.split("__")
        node = data
        for part in parents:
            node = node[part]
        node[key] = value
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


def _section(path: Path, name: str) -> Path:
    """lenet1's manifest with one more section, `name` (a typo of a real one)."""
    text = _manifest(path).read_text()
    path.write_text(text + f"\n[{name}.none]\nagreement = [1.0, 0.99]\n")
    return path


def _cases(root: Path, model: Path, data: Path) -> list[tuple[str, list[str], str]]:
    bad = root / "bad"
    bad.mkdir(exist_ok=True)
    user = ["migrate", "--model", str(model), "--data", str(data), "--format", "onnx", "--quantize", "none"]
    not_utf8 = bad / "latin1.toml"
    not_utf8.write_bytes(_manifest(bad / "tmp.toml").read_bytes().replace(b'description = "', b'description = "\xe9'))
    inverted = _manifest(bad / "inverted.toml", tolerance__quantized__agreement=[0.90, 0.99])
    rng = np.random.default_rng(1)
    x = rng.random((16, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    nan_x = x.copy()
    nan_x[3, 2, 2, 0] = np.nan
    inf_x = x.copy()
    inf_x[5, 0, 0, 0] = np.inf
    sparse = tiny_onnx(bad / "sparse" / "m.onnx")  # its weights file: 192 bytes written, then 1 TiB of holes
    with open(bad / "sparse" / "m.onnx.data", "r+b") as fh:
        fh.truncate(2**40)
    return [
        # model files
        ("sparse external weights", ["migrate", "--model", str(sparse), "--data", str(data), "--format", "onnx"],
         "is sparse"),
        # names that would become paths outside the workspace
        ("run id with ..", [*user, "--run-id", "../../x"], "cannot name a folder"),
        ("absolute run id", [*user, "--run-id", str(root / "abs")], "cannot name a folder"),
        ("manifest name ../../x", ["migrate", "--model", str(_manifest(bad / "escape.toml", model__name="../../x"))],
         "field 'model.name'"),
        # data
        ("empty test set", ["migrate", "--model", str(model), "--data",
                            str(_npz(bad / "empty.npz", x=x[:0], y=y[:0])), "--format", "onnx"], "0 samples"),
        ("huge declared shape", ["migrate", "--model", str(model), "--data", str(_huge_npz(bad / "huge.npz")),
                                 "--format", "onnx"], "more than this machine can hold"),
        ("NaN pixel", ["migrate", "--model", str(model), "--data", str(_npz(bad / "nan.npz", x=nan_x, y=y))],
         "contain NaN or infinity"),
        ("inf pixel", ["migrate", "--model", str(model), "--data", str(_npz(bad / "inf.npz", x=inf_x, y=y))],
         "contain NaN or infinity"),
        ("complex pixels", ["migrate", "--model", str(model), "--data",
                            str(_npz(bad / "cplx.npz", x=x.astype(np.complex64), y=y))], "complex"),
        ("0-d x", ["migrate", "--model", str(model), "--data", str(_npz(bad / "x0.npz", x=np.float32(3), y=y))],
         "x is a single value"),
        ("0-d y", ["migrate", "--model", str(model), "--data", str(_npz(bad / "y0.npz", x=x, y=np.int64(1)))],
         "y is a single value"),
        # manifests
        ("manifest not UTF-8", ["migrate", "--model", str(not_utf8)], "not UTF-8"),
        ("lr = nan", ["migrate", "--model", str(_manifest(bad / "lr.toml", train__learning_rate=float("nan")))],
         "learning_rate must be positive finite"),
        ("scale = 0", ["migrate", "--model", str(_manifest(bad / "scale.toml", preprocess__scale=0.0))], "must not be 0"),
        ("infinite mean", ["migrate", "--model", str(_manifest(bad / "mean.toml", preprocess__mean=[float("inf")]))],
         "must be finite"),
        ("duplicate labels", ["migrate", "--model", str(_manifest(bad / "labels.toml",
                                                                   data__labels=["a", "b", "a"]))], "more than once"),
        ("inverted tolerances", ["migrate", "--model", str(inverted)], "inverted"),
        # flags
        ("latency samples 0", [*user, "--latency-samples", "0"], "--latency-samples"),
        ("latency samples -3", [*user, "--latency-samples", "-3"], "--latency-samples"),
        ("epochs 0", ["migrate", "--model", "lenet1", "--epochs", "0"], "--epochs"),
        ("train epochs 0", ["train", "--model", "lenet1", "--epochs", "0"], "--epochs"),
        ("threads 0", [*user, "--threads", "0"], "--threads"),
        ("timeout 0", [*user, "--timeout", "0"], "--timeout"),
        ("timeout nan", [*user, "--timeout", "nan"], "--timeout"),
        ("timeout -5", [*user, "--timeout", "-5"], "--timeout"),
        ("warmup -1", [*user, "--warmup", "-1"], "--warmup"),
        ("tolerance nan", [*user, "--tolerance", "agreement=nan,nan"], "finite"),
        ("tolerance inverted", [*user, "--tolerance", "accuracy_drop_points=3,1"], "inverted"),
        ("scale 0", [*user, "--scale", "0"], "--scale"),
        ("std 0", [*user, "--std", "0"], "--std"),
        ("mean nan", [*user, "--mean", "nan"], "--mean"),
        ("duplicate --labels", [*user, "--labels", "a,b,c,d,e,f,g,h,i,a"], "class names must differ"),
        ("unwritable workspace", [*user, "--workspace", str(data / "ws")], "not writable"),
        # round 4
        ("threads beyond the cores", [*user, "--threads", "100000"], "CPU(s)"),
        ("--backend with --target host", [*user, "--target", "host", "--backend", "webgpu"], "applies to --target web"),
        ("--backend empty", [*user, "--target", "host,web", "--backend", ""], "--backend is empty"),
        ("--tolerance twice", [*user, "--tolerance", "agreement=1,0.9", "--tolerance", "agreement=0.9,0.8"],
         "given twice"),
        ("agreement above 1", [*user, "--tolerance", "agreement=1.5,1.2"], "must lie in 0..1"),
        ("negative max error", [*user, "--tolerance", "max_abs_error=-1,-0.5"], "must lie in >= 0"),
        ("tolerance none = 5", ["migrate", "--model", str(_manifest(bad / "none5.toml", tolerance__none=5))],
         "must be a table"),
        ("unknown manifest section", ["migrate", "--model", str(_section(bad / "sect.toml", "tolerances"))],
         "did you mean [tolerance]"),
        ("no --output of that name", [*user, "--output", "nope"], "--output nope"),
        ("float labels on a classifier", ["migrate", "--model", str(model), "--data", str(_npz(
            bad / "yf.npz", x=x, y=y.astype(np.float32) + 0.5)), "--task", "classification"], "y holds floats"),
        ("regression targets of another width", ["migrate", "--model", str(model), "--data", str(_npz(
            bad / "yw.npz", x=x, y=np.zeros((16, 3), np.float32))), "--task", "regression"], "3 value(s) per sample"),
    ]


def test_every_bad_input_is_one_line_exit_2_and_writes_nothing_outside(sandbox):
    root, model, data = sandbox
    ws = root / "ws"
    cases = _cases(root, model, data)
    before = _tree(root, ws)
    failures = []
    for name, args, needle in cases:
        if "--workspace" not in args:
            args = [*args, "--workspace", str(ws)]
        r = run_cli(*args, "--quiet", cwd=root / "cwd", timeout=120)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        ok = (r.returncode == 2 and len(lines) == 1 and lines[0].startswith("deploytool: error:")
              and needle in lines[0] and "Traceback" not in r.stderr)
        if not ok:
            failures.append(f"{name}: exit {r.returncode}, stderr {r.stderr[-600:]!r}")
    assert not failures, "\n".join(failures)
    assert _tree(root, ws) == before, "a bad input wrote outside the workspace"
    assert not (root.parent / "x").exists() and not (root / "abs").exists()
    # the workspace is still usable: a good run, then its report from another directory
    r = run_cli("migrate", "--model", str(model), "--data", str(data), "--format", "onnx", "--quantize", "none",
                "--workspace", str(ws), "--quiet", cwd=root / "cwd", timeout=300)
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.strip().splitlines()[-1].split()[1].rstrip(":")
    r = run_cli("report", run_id, "--workspace", str(ws), cwd=root, timeout=120)
    assert r.returncode == 0 and "report:" in r.stdout, r.stderr


def test_workspace_failing_mid_run_leaves_an_interrupted_run_that_resumes(sandbox, tmp_path):
    _, model, data = sandbox
    ws = tmp_path / "ws"
    args = ["migrate", "--model", str(model), "--data", str(data), "--format", "onnx", "--quantize", "none,dynamic",
            "--run-id", "mid-run", "--workspace", str(ws), "--quiet"]
    (ws / "outputs").mkdir(parents=True)
    (ws / "outputs" / "mid-run").write_text("a file where the run's output folder must go")
    r = run_cli(*args, cwd=tmp_path, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("deploytool: warning")]
    assert r.returncode == 2 and len(lines) == 1 and "failed mid-run" in lines[0] and "Traceback" not in r.stderr
    with sqlite3.connect(ws / "results.db") as db:
        assert db.execute("select status from runs where run_id = 'mid-run'").fetchone() == ("interrupted",)
    (ws / "outputs" / "mid-run").unlink()
    r = run_cli(*args, cwd=tmp_path, timeout=300)
    assert r.returncode in (0, 1) and "2 combinations" in r.stdout, r.stderr  # 1: the random model's dynamic row fails
    with sqlite3.connect(ws / "results.db") as db:
        assert db.execute("select status from runs where run_id = 'mid-run'").fetchone() == ("complete",)
        assert db.execute("select count(*) from results where run_id = 'mid-run' and status = 'measured'"
                          ).fetchone() == (2,)


def test_an_immutable_workspace_is_one_line(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    if subprocess.run(["chattr", "+i", str(ws)], capture_output=True).returncode != 0:
        pytest.fail("chattr +i is needed to make a folder unwritable for root (e2fsprogs, ext4 /tmp)")
    try:
        r = run_cli("report", "some-run", "--workspace", str(ws), cwd=tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(ws)], check=True)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("deploytool: warning")]
    assert r.returncode == 2 and len(lines) == 1 and "not writable" in lines[0], r.stderr


def test_a_bundled_command_is_quoted_complete_and_reproduces_the_verdict(tmp_path):
    """A model file named `a;touch x.onnx`, a forced failure, and the bundle's command run by a shell."""
    inputs = tmp_path / "in put"
    inputs.mkdir()
    model = onnx_model(inputs / "a;touch x.onnx", [None, 8, 8, 1])
    rng = np.random.default_rng(0)
    data = _npz(inputs / "t d.npz", x=rng.integers(0, 255, (48, 8, 8, 1)).astype(np.uint8),
                y=rng.integers(0, 10, 48))
    ws = tmp_path / "ws"
    r = run_cli("migrate", "--model", str(model), "--data", str(data), "--scale", "0.00392156862745098",
                "--format", "onnx", "--quantize", "dynamic", "--tolerance", "max_abs_error=0,0",
                "--latency-samples", "5", "--workspace", str(ws), "--quiet", cwd=tmp_path, timeout=300)
    assert r.returncode == 1, r.stderr
    (readme,) = (ws / "reports").glob("*/bugs/*/README.md")
    text = readme.read_text()
    command = text.split("With deploytool, the same combination again:")[1].split("```")[1].strip()
    for flag in ("--data", "--scale", "--tolerance", "--latency-samples", "--layout", "--format onnx",
                 "--quantize dynamic", "--target host", "--fresh"):
        assert flag in command, (flag, command)
    assert "--framework" not in command  # a user's model has no twin to choose
    shell_cwd = tmp_path / "shell"
    shell_cwd.mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", "-c", command], cwd=shell_cwd, env=env, capture_output=True, text=True, timeout=300)
    assert not (shell_cwd / "x").exists() and not (shell_cwd / "x.onnx").exists(), "the command ran `touch`"
    assert r.returncode == 1, r.stderr
    row = [ln for ln in r.stdout.splitlines() if ln.startswith("onnx ")]
    assert row and "fail" in row[0].split(), r.stdout


def test_two_fresh_runs_get_different_ids_and_a_changed_model_is_measured_again(sandbox, tmp_path):
    _, model, data = sandbox
    ws = tmp_path / "ws"
    work = tmp_path / "work"
    work.mkdir()
    m = work / "m.onnx"
    shutil.copy(model, m)
    base = ["migrate", "--model", str(m), "--data", str(data), "--format", "onnx", "--quantize", "none",
            "--workspace", str(ws), "--quiet"]
    procs = [subprocess.Popen([sys.executable, "-m", "deploytool", *base, "--fresh"], cwd=work, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    ids = {o[0].strip().splitlines()[-1].split()[1] for o in outs}
    assert len(ids) == 2, ids
    first = run_cli(*base, cwd=work, timeout=300)
    assert first.returncode == 0, first.stderr
    # replace the file with another model under the same name: the same command must not reuse the old row
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(m))
    w = numpy_helper.to_array(proto.graph.initializer[0])
    proto.graph.initializer[0].CopyFrom(numpy_helper.from_array(-w, "W"))
    onnx.save(proto, str(m))
    second = run_cli(*base, cwd=work, timeout=300)
    assert second.returncode == 0, second.stderr
    run1, run2 = (o.stdout.strip().splitlines()[-1].split()[1] for o in (first, second))
    assert run1 != run2 and "already measured" not in second.stdout
    outputs = [np.load(next((ws / "outputs" / run.rstrip(":")).glob("*.npy"))) for run in (run1, run2)]
    assert not np.array_equal(*outputs), "the second run reported the first model's outputs"


# ---- round 3: the lab, findings and a user's model its own runtime cannot run ---------------------------------
def _one_line(r, needle: str) -> str | None:
    """None when `r` is one `deploytool: error:` line naming `needle` with exit 2, else what went wrong."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    if r.returncode == 2 and len(lines) == 1 and lines[0].startswith("deploytool: error:") and needle in lines[0] \
            and "Traceback" not in r.stderr:
        return None
    return f"exit {r.returncode}, stderr {r.stderr[-600:]!r}"


def _lab_file(path: Path, extra: str = "", matrix: str = 'formats = ["onnx"]\nquantize = ["none"]') -> Path:
    path.write_text(f'[lab]\nname = "h"\n{extra}\n[[models]]\nname = "lenet1"\nframeworks = ["keras"]\n\n'
                    f'[matrix]\n{matrix}\n')
    return path


def test_lab_and_sweep_refuse_what_cannot_be_meant(tmp_path):
    import time

    ws = ["--workspace", str(tmp_path / "ws")]
    typo_in_models = tmp_path / "d.toml"
    typo_in_models.write_text('[lab]\nname = "h"\n[[models]]\nname = "lenet1"\nframwork = ["keras"]\n')
    cases = [
        (["lab", "worker", "--scheduler", "notaurl"], "needs a host and a port"),
        (["lab", "worker", "--scheduler", "garbage://%%%"], "unknown scheme 'garbage'"),
        (["lab", "worker", "--scheduler", "tcp://[::1"], "is not an address"),
        (["lab", "run", str(_lab_file(tmp_path / "a.toml")), "--scheduler", "notaurl", *ws], "needs a host and a port"),
        (["lab", "run", str(_lab_file(tmp_path / "b.toml", "bogus_key = 1")), *ws], "field 'lab.bogus_key'"),
        (["lab", "run", str(_lab_file(tmp_path / "c.toml", matrix='format = ["onnx"]')), *ws],
         "did you mean 'formats'"),
        (["lab", "run", str(typo_in_models), *ws], "did you mean 'frameworks'"),
        (["lab", "run", str(_lab_file(tmp_path / "e.toml", matrix=f"threads = {list(range(1, 1001))}")), *ws],
         "more than [lab] max_cells = 5000"),
        (["study", "sweep", "--model", "lenet1", "--threads", "1000", *ws], "--threads asks for 1000 threads"),
    ]
    failures = []
    for args, needle in cases:
        t = time.monotonic()
        r = run_cli(*args, "--quiet", cwd=tmp_path, timeout=120)
        why = _one_line(r, needle)
        if why or time.monotonic() - t > 60:  # refused before anything trains or waits
            failures.append(f"{args}: {why or f'took {time.monotonic() - t:.0f} s'}")
    assert not failures, "\n".join(failures)


def test_a_lab_worker_gives_up_on_an_unreachable_scheduler_within_its_bound(tmp_path):
    import time

    t = time.monotonic()
    r = run_cli("lab", "worker", "--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "3", cwd=tmp_path, timeout=60)
    assert _one_line(r, "cannot reach the Dask scheduler at tcp://127.0.0.1:1") is None, r.stderr
    assert time.monotonic() - t < 30


def test_findings_export_into_a_file_or_a_system_folder_is_one_line(tmp_path):
    from deploytool.bugs import upstream
    from deploytool.store import open_store
    from deploytool.workspace import Workspace
    from tests import results as factory

    ws = Workspace.open(tmp_path / "ws")
    store = open_store(None, ws.default_db_url)
    (f,) = upstream.record_and_write(store, ws, "r1", [factory.result("r1", "k", "conversion_failed")])
    (tmp_path / "a-file").write_text("x")
    for dest, needle in ((tmp_path / "a-file", "is a file, not a folder"), (Path("/proc/deploytool-x"), "cannot export"),
                         (Path("/sys/deploytool-x"), "cannot export")):
        r = run_cli("findings", "export", f.id, str(dest), "--workspace", str(ws.root), cwd=tmp_path)
        assert _one_line(r, needle) is None, (dest, r.stderr)
    r = run_cli("findings", "export", f.id, str(tmp_path / "out"), "--workspace", str(ws.root), cwd=tmp_path)
    # an unconfirmed candidate: what deploytool concluded, no issue addressed upstream
    assert r.returncode == 0 and (tmp_path / "out" / "finding.md").is_file(), r.stderr
    assert not (tmp_path / "out" / "issue.md").exists()


def _custom_op_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("<img src=x onerror=alert(1)>|`x`", ["x"], ["y"], domain="evil.domain")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8, 8, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("evil.domain", 1)]), str(path))
    return path


def _huge_initializer_onnx(path: Path) -> Path:
    """An initializer declaring 64 x 9,000,000 floats (2.3 GB) and holding none: a few hundred bytes on disk."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[64, 9_000_000])
    shape = numpy_helper.from_array(np.array([-1, 64], np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["f"]), helper.make_node("MatMul", ["f", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8, 8, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], [w, shape])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_users_model_its_own_runtime_cannot_run_is_one_line_and_no_finding(sandbox, tmp_path):
    _, _, data = sandbox
    ws = tmp_path / "ws"
    for model, needle in ((_custom_op_onnx(tmp_path / "custom.onnx"), "evil.domain:<img src=x onerror=alert(1)>"),
                          (_huge_initializer_onnx(tmp_path / "huge.onnx"), "Initializer 'W'")):
        r = run_cli("migrate", "--model", str(model), "--data", str(data), "--scale", "0.00392156862745098",
                    "--format", "onnx", "--quantize", "none", "--workspace", str(ws), "--quiet", cwd=tmp_path,
                    timeout=300)
        assert _one_line(r, needle) is None and "your model does not load in its own runtime" in r.stderr, r.stderr
    with sqlite3.connect(ws / "results.db") as db:
        assert db.execute("select count(*) from findings").fetchone() == (0,)
    assert not (ws / "findings").exists() or not any((ws / "findings").iterdir())


def _writing_saved_model(path: Path, target: Path) -> Path:
    """A SavedModel whose serving function writes `target` (a path of the graph's choosing) and then computes."""
    import tensorflow as tf

    class Writes(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable(tf.ones([4, 2]))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            tf.io.write_file(str(target), tf.strings.as_string(tf.reduce_sum(x)))
            return {"y": tf.matmul(x, self.w)}

    m = Writes()
    tf.saved_model.save(m, str(path), signatures={"serving_default": m.serve})
    return path


def test_a_savedmodel_whose_graph_writes_files_is_refused_before_anything_runs_it(tmp_path):
    """Security: a model file is a program. Its WriteFile op is found in saved_model.pb before TensorFlow loads it
    (the PC baseline, a converter or a signature reader would have run it): one line naming the op, exit 2, and no
    file anywhere outside the workspace. A traced graph holding one is refused the same way before its call."""
    from deploytool.errors import BadModelFile
    from deploytool.modelfiles.tf_graph import check_graph_def

    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "written-by-the-model.txt"
    model = _writing_saved_model(tmp_path / "model", target)
    data = _npz(tmp_path / "t.npz", x=np.ones((8, 4), np.float32))
    before = _tree(tmp_path, tmp_path / "ws")
    r = run_cli("migrate", "--model", str(model), "--data", str(data), "--target", "host", "--workspace",
                str(tmp_path / "ws"), "--quiet", cwd=tmp_path, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "WriteFile" in lines[0] and "refused" in lines[0], r.stderr
    assert not target.exists() and _tree(tmp_path, tmp_path / "ws") == before

    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def reads(name):
        return tf.io.read_file(name[0])

    with pytest.raises(BadModelFile, match="ReadFile"):
        check_graph_def(reads.get_concrete_function().graph.as_graph_def(), "traced")


def _plugin(tmp_path: Path, name: str, body: str) -> dict[str, str]:
    (tmp_path / f"{name}.py").write_text(body)
    return {"DEPLOYTOOL_PLUGINS": name, "PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"}


@pytest.mark.parametrize("name, body, needle", [
    ("raises", "raise RuntimeError('boom')\n", "failed while loading (RuntimeError: boom)"),
    ("exits", "import sys\nsys.exit(0)\n", "called sys.exit(0)"),
    ("function", "from deploytool.runtimes import register_runtime\n"
                 "register_runtime('host', 'onnx', 'mine')(lambda: None)\n", "a runtime is a subclass"),
    ("clash", "from deploytool.runtimes import register_runtime\nfrom deploytool.runtimes.onnxrt import OnnxRuntime\n"
              "@register_runtime('host', 'onnx', 'onnxruntime')\nclass Mine(OnnxRuntime):\n    pass\n",
     "must register under a name of its own"),
])
def test_a_plugin_that_fails_exits_or_takes_a_name_is_one_line(tmp_path, name, body, needle):
    for args in (["--help"], ["models"]):
        r = run_cli(*args, env=_plugin(tmp_path, f"plugin_{name}", body), cwd=tmp_path, timeout=120)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, \
            (args, r.returncode, r.stderr)


def test_a_run_id_given_again_with_another_judgement_is_refused_and_nothing_is_written_outside(sandbox, tmp_path):
    """--run-id reused with another tolerance would keep the first run's verdicts: one line. A run writes nothing in
    HOME or TMPDIR but deploytool's documented cache, which DEPLOYTOOL_CACHE moves (here into the workspace):
    onnxruntime's telemetry, Chromium's crash database and dconf stay out."""
    import tempfile

    _, model, data = sandbox
    home = tmp_path / "home"
    home.mkdir()
    # a short TMPDIR: Chromium's sockets live there, and a Unix socket path holds at most 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="dt-tmp-", dir="/tmp"))
    env = {"HOME": str(home), "TMPDIR": str(tmp), "DEPLOYTOOL_CACHE": str(tmp_path / "ws" / ".cache")}
    base = ["migrate", "--model", str(model), "--data", str(data), "--format", "onnx", "--quantize", "none",
            "--target", "host,web", "--latency-samples", "5", "--warmup", "1", "--workspace", str(tmp_path / "ws"),
            "--quiet", "--run-id", "mine"]
    r = run_cli(*base, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode in (0, 1), r.stderr
    assert not [p for p in (*home.rglob("*"), *tmp.rglob("*"))], sorted(map(str, (*home.rglob("*"), *tmp.rglob("*"))))
    assert "web:wasm" in r.stdout and "browser:" not in r.stdout, r.stdout  # the browser ran
    shutil.rmtree(tmp)
    r = run_cli(*base, "--tolerance", "agreement=0.5,0.4", env=env, cwd=tmp_path, timeout=600)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "--run-id mine holds a run" in lines[0], r.stderr


def _graph_onnx(path: Path, nodes, inputs, outputs, initializers=()) -> Path:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _odd_models(root: Path) -> list[tuple[str, Path, Path, str, str]]:
    """Models whose own outputs or declared inputs cannot be compared per sample, and token ids beyond a
    vocabulary: (case, model, data, words of the one line)."""
    from onnx import TensorProto, helper, numpy_helper

    f = TensorProto.FLOAT
    x = np.random.default_rng(0).random((16, 4)).astype(np.float32)
    data = _npz(root / "x.npz", x=x)
    nan = _graph_onnx(root / "nan.onnx", [helper.make_node("Log", ["m"], ["y"]), helper.make_node("Sub", ["x", "two"], ["m"])],
                      [helper.make_tensor_value_info("x", f, [None, 4])], [helper.make_tensor_value_info("y", f, [None, 4])],
                      [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    scalar = _graph_onnx(root / "scalar.onnx", [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)],
                         [helper.make_tensor_value_info("x", f, [None, 4])], [helper.make_tensor_value_info("y", f, [])])
    shapeless = _graph_onnx(root / "shapeless.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                            [helper.make_tensor_value_info("x", f, None)], [helper.make_tensor_value_info("y", f, None)])
    emb = _graph_onnx(root / "emb.onnx", [helper.make_node("Gather", ["E", "ids"], ["y"])],
                      [helper.make_tensor_value_info("ids", TensorProto.INT64, [None, 6])],
                      [helper.make_tensor_value_info("y", f, [None, 6, 3])],
                      [numpy_helper.from_array(np.ones((10, 3), np.float32), "E")])
    ids = _npz(root / "ids.npz", x=np.full((8, 6), 50, np.int64))
    import keras

    inp = keras.Input((6,), dtype="int32", name="ids")
    out = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(10, 3)(inp)))
    keras.Model(inp, out).save(root / "emb.keras")
    return [("a baseline of NaN", nan, data, "hold NaN or infinity for 16 of 16 samples", "none"),
            ("a rank-0 output", scalar, data, "output 'y' is one value for the whole batch", "none"),
            ("a shapeless input", shapeless, data, "declares this input without dimensions", "none"),
            ("token ids beyond the vocabulary", emb, ids, "check the test data against the model's inputs", "none"),
            ("token ids beyond a Keras embedding", root / "emb.keras", ids, "check the test data against the model's "
             "inputs", "none"),
            ("int8-io for token ids (every format)", emb, ids, "takes integers already", "int8-io")]


def test_models_that_cannot_be_compared_per_sample_are_one_line_and_no_finding(tmp_path):
    """A PC baseline of NaN, a rank-0 output, a shapeless input and token ids beyond the embedding (ONNX, Keras): the
    user's file or data, one line naming it, exit 2, nothing filed upstream, and the workspace's runs still report."""
    ws = tmp_path / "ws"
    failures = []
    for name, model, data, needle, quantize in _odd_models(tmp_path):
        formats = "onnx,tflite" if quantize == "int8-io" else "onnx"  # one format: no converter worker is started
        r = run_cli("migrate", "--model", str(model), "--data", str(data), "--format", formats, "--quantize",
                    quantize, "--target", "host", "--workspace", str(ws), "--quiet", cwd=tmp_path, timeout=300)
        if (why := _one_line(r, needle)) is not None:
            failures.append(f"{name}: {why}")
    assert not failures, "\n".join(failures)
    if (ws / "results.db").exists():
        with sqlite3.connect(ws / "results.db") as db:
            assert db.execute("select count(*) from findings").fetchone() == (0,)
            runs = [r for (r,) in db.execute("select run_id from runs")]
        for run in runs:  # a run refused mid-way still reports
            r = run_cli("report", run, "--workspace", str(ws), cwd=tmp_path, timeout=120)
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
