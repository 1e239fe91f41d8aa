"""`deploytool study pitfalls`: what one preprocessing mistake at a time costs in accuracy, on the PC model
and on every migrated artifact (seed 003, MLModelScope: a missing centre crop costs 1.45–7.5 points of
top-1, a layout mistake far more).

The mistakes (deploytool/data/mistakes.py) are built from the raw test images and fed through migrate's own
machinery: per source framework, the clean test set and each mistaken copy are concatenated into one test
set, handed to `migrate` as a user's test set (the trained model file, preprocessing already applied), and
each row's stored per-sample outputs are scored per segment. Conversions come from migrate's cache (the
calibration set is the zoo run's), so each artifact is converted once and loaded once per target. The int8
mistake needs each int8-input artifact's own scale and zero point: it gets one more migrate run per such
artifact. Nothing is scored twice: points are keyed per framework and per int8 artifact, and resumed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from deploytool.study.report import Section, Table

HELP = ("what one preprocessing mistake at a time (no normalisation, 0–255 range, swapped height/width or "
        "layout, BGR, off-centre crop, int8 scaling skipped) costs on the PC model and every migrated artifact")
EXAMPLES = ("deploytool study pitfalls --model lenet5 --target host,web",
            "deploytool study pitfalls --model lenet5 --target host --format tflite --quantize none,int8-io "
            "--samples 200")

# Seed 003 (Dakkak et al., "Frustrated with Replicating Claims of a Shared Model? A Solution", MLModelScope,
# arXiv 2018), as /work/shared/seeds/003_*.txt states them: ImageNet models, top-1 points lost.
PUBLISHED: dict[str, str] = {
    "off_centre_crop": "1.45–7.5 (no centre crop; top-5 0.36–4.22)",
    "nchw_as_nhwc": "“extremely low accuracy” (no figure given)",
}
NOT_PUBLISHED = "—"
SEED = "seed 003, MLModelScope (Dakkak et al. 2018)"


def add_cli(p: argparse.ArgumentParser) -> None:
    from deploytool.targets import all_targets

    p.add_argument("--target", default="host", help="host, web, android (comma-separated, or all; default: host)")
    p.add_argument("--format", default="tflite,onnx,tfjs",
                   help="formats to migrate to, as for migrate (default: tflite,onnx,tfjs)")
    p.add_argument("--quantize", default="none,int8-io",
                   help="quantizations, as for migrate (default: none,int8-io; int8-io artifacts also get the "
                        "'int8 scaling skipped' mistake)")
    p.add_argument("--samples", type=int, default=500,
                   help="test samples per mistake (default: 500; each mistake is one more copy of them)")
    for target in all_targets():
        target.add_cli_options(p)


def run(args: argparse.Namespace) -> int:
    from deploytool.errors import UnknownOption
    from deploytool.study.base import StudyRun
    from deploytool.study.report import write_study_report
    from deploytool.targets import all_targets

    if args.samples < 1:
        raise UnknownOption(f"--samples {args.samples}: must be >= 1")
    plan = Plan.build(args.model, args.framework, args.data_dir, args.epochs, args.samples)
    target_options = {t.name: opts for t in all_targets() if (opts := t.options_from_cli(args))}
    request = {**plan.identity(), "formats": args.format, "quantize": args.quantize, "targets": args.target,
               "target_options": target_options}
    srun = StudyRun.open("pitfalls", plan.spec.name, request, args.workspace, args.db, args.run_id, args.fresh)
    try:
        measure(srun, plan, request, args.db, progress=not args.quiet)
    except BaseException:
        srun.finish("interrupted")
        raise
    srun.finish()
    paths = write_study_report(srun, report(srun))
    print(summary_text(srun.points()))
    print(f"report: {paths.html}")
    print(f"study run {srun.run_id}")
    return 0


class Plan:
    """The zoo model, its raw test images and the mistaken copies of them: everything but the targets."""

    def __init__(self, spec: Any, dataset: Any, raw_x: np.ndarray, y: np.ndarray, frameworks: list[str],
                 epochs: int | None):
        self.spec, self.dataset, self.raw_x, self.y = spec, dataset, raw_x, y
        self.frameworks, self.epochs = frameworks, epochs

    @classmethod
    def build(cls, model: str, framework: str, data_dir: Any, epochs: int | None, samples: int) -> "Plan":
        from deploytool.data import _as_nhwc, load_dataset, load_raw
        from deploytool.errors import UnknownOption
        from deploytool.spec import load_spec
        from deploytool.targets import expand
        from deploytool.usermodel import is_model_file

        if is_model_file(model):
            raise UnknownOption(f"{model}: the pitfalls study takes a model of the zoo (`deploytool models`): "
                                "it needs the raw images and the preprocessing the model was trained with")
        spec = load_spec(model)
        dataset = load_dataset(spec, data_dir)
        raw = load_raw(spec.dataset, spec, data_dir)
        raw_x = _as_nhwc(raw.x_test, spec.input_shape, spec.dataset)
        idx = spread(len(raw_x), samples)
        return cls(spec, dataset, np.asarray(raw_x[idx], np.float32), raw.y_test.astype(np.int64).ravel()[idx],
                   expand((framework,), spec.frameworks, "framework"), epochs)

    def identity(self) -> dict[str, Any]:
        return {"model": self.spec.name, "spec": self.spec.content_hash(), "data": self.dataset.sha256,
                "frameworks": self.frameworks, "epochs": self.epochs, "samples": len(self.y)}

    def segments(self) -> tuple[list[tuple[str, np.ndarray]], dict[str, str], dict[str, bool]]:
        """([(name, fed tensor)] starting with "clean"; mistake -> why not applicable;
        mistake -> whether migrate's pitfall check warns on the data a user would hand over)."""
        from deploytool.data.check import preprocessing_warnings
        from deploytool.data.mistakes import MISTAKES, preprocess

        p, shape = self.spec.preprocess, self.spec.input_shape
        out, skipped, caught = [("clean", preprocess(self.raw_x, p))], {}, {}
        for m in MISTAKES:
            why = m.not_applicable(shape, p)
            if why:
                skipped[m.name] = why
                continue
            x, declared = m.user_data(self.raw_x, p)
            caught[m.name] = bool(preprocessing_warnings(x, declared))
            out.append((m.name, m.feed(self.raw_x, p)))
        return out, skipped, caught


def spread(total: int, n: int) -> np.ndarray:
    """`n` indices spread evenly over the test set: the bundled MNIST split is sorted by label, so its
    first samples are all zeros."""
    return np.unique(np.linspace(0, total - 1, min(n, total)).round().astype(int))


def _test_npz(ws: Any, x: np.ndarray, y: np.ndarray, calibration: np.ndarray) -> Any:
    """The test set as a user's .npz in the workspace, named by its content (written once). x_train is the
    zoo run's int8 calibration set (its labels are unused), so conversions are the cached ones."""
    import hashlib

    from deploytool.workspace import stable_hash

    digest = hashlib.sha256(x.tobytes() + y.tobytes() + calibration.tobytes()).hexdigest()[:16]
    path = ws.root / "study" / "pitfalls" / f"{stable_hash([digest, list(x.shape)], 16)}.npz"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, x=x, y=y, x_train=calibration, y_train=np.zeros(len(calibration), np.int64))
        tmp.replace(path)
    return path


def _migrate(srun: Any, plan: Plan, request: dict[str, Any], db: str | None, artifact: Any, npz: Any, formats: str,
             quantize: str, progress: bool) -> tuple[Any, list[str]]:
    from deploytool.migrate import MigrateRequest, migrate

    req = MigrateRequest(model=str(artifact.path), frameworks=("all",), formats=(formats,), quantize=(quantize,),
                         targets=(request["targets"],), target_options=request["target_options"], test_npz=npz,
                         layout=artifact.layout, data_layout="NHWC", labels=plan.spec.labels, warmup_runs=2,
                         latency_samples=10)
    warned: list[str] = []
    out = migrate(req, srun.ws.root, db, progress=progress, log=lambda s: print(s, file=sys.stderr),
                  warn=warned.append)
    return out, warned


def _per_segment(outputs: np.ndarray, y: np.ndarray, names: list[str]) -> dict[str, float]:
    n = len(y)
    pred = np.asarray(outputs).argmax(1)
    return {name: float(np.mean(pred[i * n:(i + 1) * n] == y)) for i, name in enumerate(names)}


def _row(r: Any, y: np.ndarray, names: list[str]) -> dict[str, Any]:
    c = r.combo
    row = {"label": c.label, "framework": c.framework, "format": c.format, "quantize": c.quantize,
           "where": c.where, "status": str(r.status), "reason": r.reason or "", "accuracy": {},
           "artifact_sha256": r.artifact.sha256 if r.artifact else "",
           "artifact_path": str(r.artifact.path) if r.artifact else ""}
    if r.comparison is not None and r.outputs_path:
        row["accuracy"] = _per_segment(np.load(r.outputs_path, allow_pickle=False), y, names)
    return row


def measure(srun: Any, plan: Plan, request: dict[str, Any], db: str | None = None, progress: bool = False) -> None:
    from deploytool.train import train

    done = srun.points()
    segments, skipped, caught = plan.segments()
    names = [n for n, _ in segments]
    x = np.concatenate([s for _, s in segments])
    y = np.tile(plan.y, len(segments))
    calibration = np.ascontiguousarray(plan.dataset.calibration())
    for fw in plan.frameworks:
        artifact = train(plan.spec, fw, plan.dataset, srun.ws, epochs=plan.epochs, progress=progress).get_artifact()
        key = f"rows/{fw}"
        if key not in done:
            npz = _test_npz(srun.ws, x, y, calibration)
            out, warned = _migrate(srun, plan, request, db, artifact, npz, request["formats"], request["quantize"],
                                   progress)
            pc = _per_segment(out.baselines[fw].outputs(), plan.y, names)
            done[key] = {"framework": fw, "migrate_run": out.run_id, "segments": names, "samples": len(plan.y),
                         "pc": pc, "rows": [_row(r, plan.y, names) for r in out.results],
                         "not_applicable": skipped, "check_warns": caught, "warnings": warned}
            srun.save(key, done[key])
        for row in done[key]["rows"]:
            _int8_point(srun, plan, request, db, done, fw, artifact, row, segments[0][1], progress)


def _int8_point(srun: Any, plan: Plan, request: dict[str, Any], db: str | None, done: dict[str, Any], fw: str,
                artifact: Any, row: dict[str, Any], clean: np.ndarray, progress: bool) -> None:
    """The int8-scaling mistake for one int8-input artifact: its rows on every target, fed the unscaled set."""
    from deploytool.data.mistakes import int8_unscaled
    from deploytool.runtimes.tflite_io import read_io

    if row["format"] not in ("tflite", "tflite-onnx2tf") or not row["artifact_sha256"] or not row["accuracy"]:
        return
    key = f"int8/{fw}/{row['format']}/{row['quantize']}"
    if key in done:
        return
    inp = read_io(row["artifact_path"])[0][0]
    if not inp.quantized:
        return
    x = int8_unscaled(clean, inp.scale, inp.zero_point, inp.dtype)
    npz = _test_npz(srun.ws, x, plan.y, np.ascontiguousarray(plan.dataset.calibration()))
    out, warned = _migrate(srun, plan, request, db, artifact, npz, row["format"], row["quantize"], progress)
    rows = [_row(r, plan.y, ["int8_unscaled"]) for r in out.results
            if r.artifact is not None and r.artifact.sha256 == row["artifact_sha256"]]
    done[key] = {"framework": fw, "format": row["format"], "quantize": row["quantize"], "migrate_run": out.run_id,
                 "input": {"dtype": inp.dtype, "scale": inp.scale, "zero_point": inp.zero_point},
                 "rows": rows, "warnings": warned}
    srun.save(key, done[key])


# ------------------------------------------------------------------------------------------- the report


def drops(points: dict[str, dict[str, Any]]) -> tuple[list[str], list[str], dict[tuple[str, str], Any], dict]:
    """(row labels, mistake names, (label, mistake) -> accuracy drop in points or a reason string, extras).
    A row's drop is its clean accuracy minus its accuracy on the mistaken copy, both on the same samples."""
    from deploytool.data.mistakes import NAMES

    labels: list[str] = []
    cells: dict[tuple[str, str], Any] = {}
    clean: dict[str, float] = {}
    skipped: dict[str, str] = {}
    caught: dict[str, bool] = {}
    for key, pt in sorted(points.items()):
        if not key.startswith("rows/"):
            continue
        skipped.update(pt["not_applicable"])
        caught.update(pt["check_warns"])
        fw = pt["framework"]
        entries = [(f"{fw} (PC model)", pt["pc"])] + [(r["label"], r["accuracy"]) for r in pt["rows"]]
        for label, acc in entries:
            if not acc:
                continue  # not measured (unsupported, failed): the migrate run's report says why
            labels.append(label)
            clean[label] = acc["clean"]
            for name in NAMES:
                if name in acc:
                    cells[(label, name)] = 100.0 * (acc["clean"] - acc[name])
                elif name in pt["not_applicable"]:
                    cells[(label, name)] = "n/a"
                elif name == "int8_unscaled":
                    cells[(label, name)] = "float input"  # replaced below for int8-input artifacts
    for key, pt in points.items():
        if key.startswith("int8/"):
            for r in pt["rows"]:
                if r["accuracy"] and r["label"] in clean:
                    cells[(r["label"], "int8_unscaled")] = 100.0 * (clean[r["label"]] - r["accuracy"]["int8_unscaled"])
    names = [n for n in NAMES if any(isinstance(cells.get((lbl, n)), float) for lbl in labels)] + \
            [n for n in NAMES if not any(isinstance(cells.get((lbl, n)), float) for lbl in labels)]
    return labels, names, cells, {"clean": clean, "not_applicable": skipped, "check_warns": caught}


def _cell_text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:+.1f}"
    return "" if v is None else str(v)


def _titles() -> dict[str, str]:
    from deploytool.data.mistakes import INT8_UNSCALED, MISTAKES

    return {**{m.name: m.title for m in MISTAKES}, INT8_UNSCALED[0]: INT8_UNSCALED[1]}


def report(srun: Any) -> list[Section]:
    from deploytool.report.svg import heatmap

    points = srun.points()
    labels, names, cells, extra = drops(points)
    titles = _titles()
    published = tuple(PUBLISHED.get(n, NOT_PUBLISHED) for n in names)
    checked = tuple("warns" if extra["check_warns"].get(n) else ("silent" if n in extra["check_warns"] else "—")
                    for n in names)
    rows = [(f"published ({SEED})", *published), ("migrate's pitfall check", *checked)]
    rows += [(lbl, *(_cell_text(cells.get((lbl, n))) for n in names)) for lbl in labels]
    table = Table(("row", *names), tuple(rows), caption="accuracy drop in points (clean minus mistaken, same "
                                                        "samples); n/a: cannot happen to this data")
    grid = [[_heat(cells.get((lbl, n))) for n in names] for lbl in labels]
    figure = heatmap(grid, labels, names, title="accuracy drop (points) per mistake and row") if labels else ""
    samples = next((pt["samples"] for k, pt in points.items() if k.startswith("rows/")), 0)
    legend = Table(("mistake", "what the user did", "not applicable because"),
                   tuple((n, titles[n], extra["not_applicable"].get(n, "")) for n in names))
    clean = Table(("row", "clean accuracy"), tuple((lbl, f"{100 * a:.2f}%") for lbl, a in extra["clean"].items()))
    runs = Table(("point", "migrate run", "pitfall-check warnings"),
                 tuple((k, pt["migrate_run"], "; ".join(pt["warnings"]) or "none") for k, pt in sorted(points.items())))
    return [
        Section("drops", "Accuracy drop per mistake", f"Each row fed {samples} test samples clean and with one "
                "mistake at a time; the first line is what seed 003 published for the same mistake on ImageNet "
                "models, the second whether migrate's pitfall check warns on the data a user would hand over.",
                tables=(table,), figures=(figure,) if figure else (),
                data={"drop_points": {f"{lbl}|{n}": cells.get((lbl, n)) for lbl in labels for n in names},
                      "published": PUBLISHED, "check_warns": extra["check_warns"]}),
        Section("mistakes", "The mistakes", "How each mistaken copy was made (deploytool/data/mistakes.py).",
                tables=(legend,)),
        Section("clean", "Clean accuracy", "Each row's accuracy on the same samples without a mistake.",
                tables=(clean,)),
        Section("runs", "Migrate runs", "The migrate runs behind each point (`deploytool report RUN` shows one).",
                tables=(runs,)),
    ]


def _heat(v: Any) -> Any:
    from deploytool.report.svg import Cell

    if not isinstance(v, float):
        return Cell("#eeeeee", "n/a" if v == "n/a" else "", str(v or "not measured")) if v else None
    t = max(0.0, min(1.0, v / 80.0))
    red, green = int(255 - 40 * t), int(245 - 200 * t)
    return Cell(f"#{red:02x}{green:02x}{int(235 - 200 * t):02x}", f"{v:+.1f}", f"{v:+.2f} points", dark=t > 0.6)


def summary_text(points: dict[str, dict[str, Any]]) -> str:
    labels, names, cells, _ = drops(points)
    widths = [max(len(lbl) for lbl in labels)] if labels else [10]
    head = "row".ljust(widths[0]) + "  " + "  ".join(n[:16].rjust(16) for n in names)
    lines = ["accuracy drop in points (clean - mistaken):", head]
    for lbl in labels:
        lines.append(lbl.ljust(widths[0]) + "  " + "  ".join(_cell_text(cells.get((lbl, n)))[:16].rjust(16)
                                                             for n in names))
    return "\n".join(lines)
