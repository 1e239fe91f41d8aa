"""LAB.toml: what a night runs. Checked like the model manifests: a mistake is
one line naming the file and the field."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import field, replace
from pathlib import Path
from typing import Any, Callable

from deploytool.atlas import ATLAS, TIERS
from deploytool.atlas.build import build_all
from deploytool.errors import DeploytoolError, SpecError
from deploytool.spec import _Reader
from deploytool.tolerances import TOLERANCE_METRICS
from deploytool.targets import get_target
from deploytool.value import value
from deploytool.workspace import Workspace


# A night bigger than this is almost surely a mistake (threads = [1..1000]); `[lab] max_cells` raises it.
MAX_CELLS = 5000


@value
class LabModel:
    name: str  # a zoo name, or a model file (an atlas architecture's, once built)
    frameworks: tuple[str, ...] = ("all",)
    data: str | None = None  # a model file's test set
    scale: float = 1.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    layout: str | None = None
    architecture: str = ""  # an atlas architecture (`deploytool atlas --list`), built before the night plans
    tier: str = "quick"  # its size: quick or full
    # migrate's --random-weights: quantized rows drifting from the baseline are expected, a route far off its peers
    # is an upstream candidate (default: an atlas architecture's weights are random, any other model's trained)
    random_weights: bool = False


@value
class Regression:
    min_accuracy_drop_points: float = 0.5
    latency_min_relative: float = 0.05
    latency_k_iqr: float = 0.5
    memory_max_relative: float = 0.10
    size_max_relative: float = 0.01
    # latency is not judged between rows whose machines' loads (other processes' CPUs) differ this much, or when
    # either had fewer CPUs free than its threads (deploytool.lab.regress.load_confounds)
    load_difference_cpus: float = 0.5
    # a latency change is measured again in up to this many new processes, and tonight's row is the fastest of them
    # (deploytool.lab.night): a runtime's speed can differ by process (onnxruntime's LeNet-5 is +25% in about one
    # process in four beside the PC baseline on the 2-core VM), and a slower process only adds time
    latency_measure_again: int = 3


@value
class Lab:
    path: Path
    name: str
    models: tuple[LabModel, ...]
    formats: tuple[str, ...] = ("all",)
    quantize: tuple[str, ...] = ("all",)
    targets: tuple[str, ...] = ("host",)
    threads: tuple[int, ...] = (1,)
    runtimes: tuple[str, ...] = ()  # as --runtime: empty = each target's default
    repeats: int = 1
    latency_samples: int | None = None
    test_samples: int | None = None
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    target_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # passed to each target as-is
    regression: Regression = Regression()
    browsers_per_host: int = 1
    report_nights: int = 14  # the lab report's matrix and trend plots span this many nights
    max_cells: int = MAX_CELLS  # a plan with more cells is refused before anything trains


LAB_KEYS = ("name", "repeats", "latency_samples", "test_samples", "browsers_per_host", "report_nights", "max_cells")
MATRIX_KEYS = ("formats", "quantize", "targets", "threads", "runtimes")
MODEL_KEYS = ("name", "file", "architecture", "tier", "frameworks", "data", "scale", "mean", "std", "layout",
              "random_weights")


def _refuse_unknown(r: _Reader, section: str, table: Any, allowed: tuple[str, ...]) -> None:
    """A key the lab does not read is a typo (`format =` for `formats =`): refused, with the nearest key, rather
    than silently running the defaults."""
    if not isinstance(table, dict):
        raise r.fail(section, "must be a table")
    for key in table:
        if key not in allowed:
            near = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise r.fail(f"{section}.{key}", f"is not a key of [{section.split('[')[0]}]; {hint}"
                                              f"keys are {', '.join(allowed)}")


def _strings(r: _Reader, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    v = r.get(key, list, list(default))
    if not v or not all(isinstance(x, str) and x for x in v):
        raise r.fail(key, "must be a non-empty list of strings")
    return tuple(v)


def _lab_models(r: _Reader, path: Path) -> tuple[LabModel, ...]:
    """The lab file's [[models]]: each a zoo name, a model `file` or an atlas `architecture`, with its data and
    preprocessing."""
    raw_models = r.get("models", list)
    if not raw_models:
        raise r.fail("models", "must list at least one model")
    models: list[LabModel] = []
    for i, m in enumerate(raw_models):
        if not isinstance(m, dict):
            raise r.fail(f"models[{i}]", "must be a table")
        mr = _Reader(path, m)
        _refuse_unknown(r, f"models[{i}]", m, MODEL_KEYS)
        architecture, tier = _architecture(r, mr, i)
        name = mr.get("name", str, "") or mr.get("file", str, "") or architecture
        if not name:
            raise r.fail(f"models[{i}].name", "is missing (a zoo name, `file` for a model file, or `architecture`)")
        models.append(LabModel(name=name, architecture=architecture, tier=tier,
                               frameworks=_strings(mr, "frameworks", ("all",)), data=mr.get("data", str, None),
                               scale=mr.get("scale", float, 1.0), mean=tuple(mr.numbers("mean", None, (0.0,))),
                               std=tuple(mr.numbers("std", None, (1.0,))), layout=mr.get("layout", str, None),
                               random_weights=mr.get("random_weights", bool, bool(architecture))))
    return tuple(models)


def load_lab(path: str | Path) -> Lab:
    path = Path(path).expanduser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: no such lab file; see examples/lab.toml") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: not valid TOML ({e})") from None
    r = _Reader(path, data)
    unknown = sorted(set(data) - {"lab", "models", "matrix", "tolerance", "regression", "target_options"})
    if unknown:
        raise r.fail(unknown[0], "is not a section of a lab file "
                                 "(lab, models, matrix, target_options, tolerance, regression)")
    _refuse_unknown(r, "lab", data.get("lab", {}), LAB_KEYS)
    _refuse_unknown(r, "matrix", data.get("matrix", {}), MATRIX_KEYS)
    _refuse_unknown(r, "regression", data.get("regression", {}), tuple(Regression.__dataclass_fields__))
    target_options = {}
    for t, opts in (data.get("target_options") or {}).items():
        try:
            get_target(t).options(opts)  # the target's typed options refuse unknown keys and bad values
        except DeploytoolError as e:
            raise r.fail(f"target_options.{t}", f"is wrong: {e}") from None
        target_options[t] = dict(opts)
    models = _lab_models(r, path)
    threads = r.get("matrix.threads", list, [1])
    if not threads or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in threads):
        raise r.fail("matrix.threads", "must be a list of whole numbers >= 1")
    tolerances: dict[str, tuple[float, float]] = {}
    for metric in data.get("tolerance") or {}:
        if metric not in TOLERANCE_METRICS:
            raise r.fail(f"tolerance.{metric}", f"is unknown; metrics are {', '.join(TOLERANCE_METRICS)}")
        passes, fails = r.numbers(f"tolerance.{metric}", 2)
        tolerances[metric] = (passes, fails)
    reg = Regression(**{k: r.get(f"regression.{k}", type(getattr(Regression(), k)), getattr(Regression(), k))
                        for k in Regression.__dataclass_fields__})
    for k, v in reg.__dict__.items():
        if v < 0:
            raise r.fail(f"regression.{k}", "must be >= 0")
    repeats = r.get("lab.repeats", int, 1)
    if repeats < 1:
        raise r.fail("lab.repeats", "must be >= 1")
    max_cells = r.get("lab.max_cells", int, MAX_CELLS)
    if max_cells < 1:
        raise r.fail("lab.max_cells", "must be >= 1")
    report_nights = r.get("lab.report_nights", int, 14)
    if report_nights < 1:
        raise r.fail("lab.report_nights", "must be >= 1")
    return Lab(path=path, name=r.get("lab.name", str, path.stem), models=models,
               formats=_strings(r, "matrix.formats", ("all",)), quantize=_strings(r, "matrix.quantize", ("all",)),
               targets=_strings(r, "matrix.targets", ("host",)),
               threads=tuple(threads), runtimes=tuple(r.get("matrix.runtimes", list, [])),
               target_options=target_options, repeats=repeats, latency_samples=r.get("lab.latency_samples", int, None),
               test_samples=r.get("lab.test_samples", int, None), tolerances=tolerances, regression=reg,
               browsers_per_host=r.get("lab.browsers_per_host", int, 1), report_nights=report_nights,
               max_cells=max_cells)


def _architecture(r: _Reader, mr: _Reader, i: int) -> tuple[str, str]:
    """A model's atlas architecture and tier ("" when it names none), checked against the atlas."""
    name, tier = mr.get("architecture", str, ""), mr.get("tier", str, "quick")
    if tier not in TIERS:
        raise r.fail(f"models[{i}].tier", f"must be one of {', '.join(TIERS)}")
    if name and name not in ATLAS:
        near = difflib.get_close_matches(name, list(ATLAS), n=1)
        raise r.fail(f"models[{i}].architecture", f"{name!r} is not an atlas architecture"
                                                   + (f"; did you mean {near[0]!r}?" if near else "")
                                                   + " (`deploytool atlas --list` lists them)")
    if name and (mr.get("file", str, "") or mr.get("data", str, "")):
        raise r.fail(f"models[{i}].architecture", "is built with its own test set: leave `file` and `data` out")
    return name, tier


def with_built_architectures(lab: Lab, ws: Workspace, log: Callable[[str], None] = print) -> Lab:
    """The lab with each atlas architecture built (cached in the workspace) and named by its model file and test
    set, as any model file is; an architecture that fails to build is refused in one line."""
    models = []
    for m in lab.models:
        if not m.architecture:
            models.append(m)
            continue
        built = build_all([m.architecture], m.tier, ws, log)[m.architecture]
        if isinstance(built, str):
            raise SpecError(f"{lab.path}: models: {m.architecture} ({m.tier}): {built}")
        models.append(replace(m, name=str(built.model), data=str(built.data)))
    return replace(lab, models=tuple(models))


def describe(lab: Lab) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(lab)
    d["path"] = str(lab.path)
    return d
