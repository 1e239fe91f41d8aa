"""What every runtime registry entry must do, as functions both tiers call
(tests/contract for in-process runtimes, tests/integration/test_contract_devices.py
for the browser and the phone). A runtime is built the way the pipeline
builds it: the target's options, preflight and first position, then
`target.runtime_options`, then `runtimes.make_runtime`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psutil

from deploytool.data.feed import Feed
from deploytool import runtimes, targets
from deploytool.artifact import Artifact
from deploytool.errors import DeploytoolError, StageFailed
from deploytool.targets import Preflight, RunSettings

N_SAMPLES = 6
TIMED_SAMPLES = 3  # fewer than N_SAMPLES: the runtime must time what it is asked to, not the whole set
SETTINGS = RunSettings(threads=1, warmup_runs=1, latency_samples=TIMED_SAMPLES, timeout_s=120)


def one_line(e: BaseException) -> str:
    text = str(e)
    assert text.strip() and "\n" not in text.strip(), f"not one line: {text!r}"
    return text


def runtime_options(key: tuple[str, str, str], target_options: dict[str, Any] | None = None,
                    preflight: Preflight | None = None) -> dict[str, Any]:
    target, fmt, _ = key
    t = targets.get_target(target)
    options = t.options(target_options)
    pre = preflight if preflight is not None else t.preflight(options)
    positions = t.positions(options, pre, fmt)
    assert positions, f"the {target} target offers no position for {fmt} (preflight found {pre})"
    return t.runtime_options(options, SETTINGS, positions[0])


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}


def check_lifecycle(key: tuple[str, str, str], artifact: Artifact, inputs: np.ndarray, options: dict[str, Any],
                    num_classes: int = 10) -> runtimes.Outputs:
    """load, run, close; then load twice and close twice: safe, or refused in one line; no process left."""
    target, fmt, name = key
    cls = runtimes.runtime_class(target, fmt, name)
    assert fmt in cls.formats, f"{cls.__name__} is registered for {fmt} but its formats are {cls.formats}"
    before = _children()

    rt = runtimes.make_runtime(target, fmt, name, **options)
    try:
        rt.load(artifact)
        out = rt.run(Feed.one("input", inputs))
    finally:
        rt.close()
    rt.close()  # a second close is a no-op, never an error

    n = len(inputs)
    assert isinstance(out, runtimes.Outputs)
    assert out.outputs.shape == (n, num_classes), out.outputs.shape
    assert out.outputs.dtype == np.float32 and np.isfinite(out.outputs).all()
    lat = np.asarray(out.latency_ms)
    assert lat.shape == (TIMED_SAMPLES,), f"latency_ms has {lat.shape} values for {TIMED_SAMPLES} timed samples"
    assert np.isfinite(lat).all() and (lat > 0).all(), lat
    assert all(np.isfinite(v) and v >= 0 for v in out.memory_bytes.values()), out.memory_bytes
    assert all(k.endswith("_bytes") for k in out.memory_bytes), f"memory names lack a unit: {list(out.memory_bytes)}"
    said = {cls.name, str(out.environment.get("runtime", ""))}
    assert name in said, (f"registry name {name!r} is neither the class's name {cls.name!r} nor the "
                          f"environment's runtime {out.environment.get('runtime')!r}")

    # Loading twice on one instance: either it works (and leaks nothing) or it is refused in one line.
    rt = runtimes.make_runtime(target, fmt, name, **options)
    try:
        rt.load(artifact)
        try:
            rt.load(artifact)
        except (DeploytoolError, StageFailed, RuntimeError) as e:
            assert "load" in one_line(e), f"a second load() refused without saying why: {e}"
        else:
            again = rt.run(Feed.one("input", inputs))
            assert again.outputs.shape == (n, num_classes)
    finally:
        rt.close()
        rt.close()
    left = _children() - before
    assert not left, f"processes left after close(): {[psutil.Process(p).name() for p in left if psutil.pid_exists(p)]}"
    return out


def check_refuses_bad_options(key: tuple[str, str, str], options: dict[str, Any]) -> None:
    """A runtime that checks its options (the out-of-process ones must) refuses an unknown option and an
    out-of-range value with one typed line that names the option; one that does not check must still build."""
    target, fmt, name = key
    cls = runtimes.runtime_class(target, fmt, name)
    must_check = not cls.in_process
    for bad, word in (({"no_such_option": 1}, "no_such_option"), ({"threads": 0}, "threads")):
        try:
            rt = runtimes.make_runtime(target, fmt, name, **{**options, **bad})
        except DeploytoolError as e:
            assert word in one_line(e), f"{e} does not name {word}"
        else:
            rt.close()
            assert not must_check, f"{name} ({cls.__name__}) accepted {bad}"
