"""`deploytool study frameworks`: the seed study's development question — under the same training settings, and
then with the same weights, do Keras and PyTorch give the same model? Both twins of a zoo model train with the
manifest's hyper-parameters over N seeds, each in a spawned process pinned to the same thread count
(deploytool.train, cached by content with the seed in the key); each trained Keras model then moves to PyTorch
and back (same_weights.py). Points: `train/<framework>/seed<S>` and `same_weights/seed<S>`. The report is built
from stored points only. It never converts or runs targets: that is `migrate`.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any

import numpy as np

from deploytool.data import load_dataset
from deploytool.errors import UnknownOption
from deploytool.provenance import package_version
from deploytool.report.lines import Series, line_chart
from deploytool.spec import load_spec
from deploytool.study.base import StudyRun, register_study
from deploytool.study.report import Section, Table, write_study_report
from deploytool.study.same_weights import compare_same_weights
from deploytool.train import train
from deploytool.train.worker import TrainWorker

HELP = ("Keras vs PyTorch under the same training settings over N seeds (accuracy mean ± sd, time per epoch, CPU use, "
        "peak memory, loss/accuracy curves) and with the same weights (per-sample prediction differences)")
EXAMPLES = ("deploytool study frameworks --model lenet5 --seeds 5",
            "deploytool study frameworks --model lenet1 --seeds 2 --epochs 1 --train-samples 2000 --threads 2")
FRAMEWORKS = ("keras", "torch")
NAMES = {"keras": "Keras", "torch": "PyTorch"}
COLOURS = {"keras": "#D55E00", "torch": "#0072B2"}


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return v


def add_cli(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", type=_positive, default=5,
                   help="train each twin with N seeds: the manifest's seed, +1, ... (default: 5)")
    p.add_argument("--threads", type=_positive, default=1,
                   help="intra-op and inter-op threads, the same for both frameworks (default: 1)")
    p.add_argument("--train-samples", type=_positive, default=None,
                   help="train on the first N training samples only (default: all; changes the cache key)")
    p.add_argument("--test-samples", type=_positive, default=None,
                   help="score and compare on the first N test samples only (default: all)")


# ---- arithmetic (pure) ------------------------------------------------------------------


def mean_sd(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n - 1); the sd of a single value is unknown (None)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return math.nan, None
    return float(v.mean()), (float(v.std(ddof=1)) if v.size > 1 else None)


def fmt_mean_sd(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    m, sd = mean_sd([x * scale for x in values])
    if math.isnan(m):
        return "—"
    return f"{m:.{digits}f} ± {sd:.{digits}f}" if sd is not None else f"{m:.{digits}f} (one seed)"


def seeded(spec: Any, seed: int) -> Any:
    return replace(spec, train=replace(spec.train, seed=seed))


def seeds_for(spec: Any, n: int) -> list[int]:
    return [spec.train.seed + i for i in range(n)]


def framework_summary(train_points: list[dict[str, Any]]) -> dict[str, Any]:
    """One framework's seeds summarised: accuracy, time per epoch (each seed's mean epoch), CPU %, peak memory."""
    acc = [p["test_accuracy"] for p in train_points]
    epoch_s = [float(np.mean(p["seconds_per_epoch"])) for p in train_points]
    cpu = [p["cpu_percent"] for p in train_points]
    peak = [p["peak_rss_bytes"] for p in train_points]
    # the first epoch also traces and compiles (Keras's tf.function): later epochs are the steady state
    later_s = [float(np.mean(p["seconds_per_epoch"][1:])) for p in train_points if len(p["seconds_per_epoch"]) > 1]
    out: dict[str, Any] = {"seeds": [p["seed"] for p in train_points]}
    for name, values in (("test_accuracy", acc), ("seconds_per_epoch", epoch_s), ("cpu_percent", cpu),
                         ("peak_rss_bytes", peak), ("seconds_per_later_epoch", later_s)):
        m, sd = mean_sd(values)
        out[name] = {"mean": m, "sd": sd, "min": min(values, default=math.nan), "max": max(values, default=math.nan)}
    return out


def mean_curve(train_points: list[dict[str, Any]], metric: str) -> list[float]:
    """The per-epoch mean over seeds of one history metric (epochs a seed lacks are left out of that epoch)."""
    n = max((len(p.get("history") or []) for p in train_points), default=0)
    out = []
    for e in range(n):
        vals = [p["history"][e][metric] for p in train_points if len(p.get("history") or []) > e]
        out.append(float(np.mean(vals)))
    return out


# ---- measuring -------------------------------------------------------------------------------


def _train_point(r: Any, seed: int) -> dict[str, Any]:
    return {"framework": r.framework, "seed": seed, "train_key": r.key, "reused_from_cache": r.cached,
            "epochs": r.epochs, "test_accuracy": r.test_accuracy, "seconds_per_epoch": list(r.seconds_per_epoch),
            "cpu_percent": r.cpu_utilisation_percent, "peak_rss_bytes": r.peak_rss_bytes,
            "peak_rss_delta_bytes": r.peak_rss_delta_bytes, "busy_threads": r.busy_threads,
            "threads": r.provenance.get("threads", {}), "history": list(r.history),
            "model_sha256": r.artifact.get("sha256"), "host": r.provenance.get("host_id")}


def measure(study: Any, spec: Any, dataset: Any, seeds: list[int], epochs: int, threads: int, progress: bool) -> list[str]:
    """Every point not stored yet; returns the keys measured now (none on a complete resume)."""
    from tqdm import tqdm

    done = study.points()
    todo = [(fw, s) for fw in FRAMEWORKS for s in seeds if f"train/{fw}/seed{s}" not in done]
    todo += [("same", s) for s in seeds if f"same_weights/seed{s}" not in done]
    measured: list[str] = []
    bar = tqdm(total=len(todo), desc="study frameworks", unit="point", disable=not progress, dynamic_ncols=True)
    workers = {fw: TrainWorker(fw, threads) for fw in FRAMEWORKS}  # one process per framework: all its seeds
    try:
        for fw, s in todo:
            bar.set_postfix_str(f"{fw} seed {s}", refresh=True)
            if fw == "same":
                key = f"same_weights/seed{s}"
                r = train(seeded(spec, s), "keras", dataset, study.ws, epochs, progress, threads, workers["keras"])
                payload = {"seed": s, "keras_model_sha256": r.artifact.get("sha256"),
                           **compare_same_weights(spec, r.get_artifact().path, dataset, threads)}
            else:
                key = f"train/{fw}/seed{s}"
                workers["keras" if fw == "torch" else "torch"].close()  # one framework's process alive at a time
                payload = _train_point(train(seeded(spec, s), fw, dataset, study.ws, epochs, progress, threads,
                                             workers[fw]), s)
            study.save(key, payload)
            measured.append(key)
            bar.update(1)
    finally:
        bar.close()
        for w in workers.values():
            w.close()
    return measured


@register_study("frameworks")
def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.model)
    missing = [fw for fw in FRAMEWORKS if fw not in spec.frameworks]
    if missing:
        raise UnknownOption(f"{spec.source}: the frameworks study trains both twins, but {spec.name} is not declared "
                            f"for {', '.join(missing)} (model.frameworks = {list(spec.frameworks)})")
    if args.framework != "all":
        raise UnknownOption("--framework: the frameworks study always trains both twins; leave it out")
    dataset = load_dataset(spec, args.data_dir, limit_train=args.train_samples, limit_test=args.test_samples)
    epochs = args.epochs or spec.train.epochs
    seeds = seeds_for(spec, args.seeds)
    request = {"manifest": spec.content_hash(), "data": dataset.sha256, "epochs": epochs, "seeds": seeds,
               "threads": args.threads, "train_samples": len(dataset.x_train), "test_samples": len(dataset.x_test),
               "versions": {p: package_version(p) for p in ("tensorflow", "keras", "torch")}}
    study = StudyRun.open("frameworks", spec.name, request, args.workspace, args.db, args.run_id, args.fresh)
    measured = measure(study, spec, dataset, seeds, epochs, args.threads, not args.quiet)
    sections = report(study)
    paths = write_study_report(study, sections)
    study.finish()
    summary = sections[0].data
    for fw in FRAMEWORKS:
        s = summary.get(fw)
        if s:
            print(f"{NAMES[fw]}: accuracy {fmt_mean_sd(s['per_seed_accuracy'], 100)} % over {len(s['seeds'])} seed(s), "
                  f"{fmt_mean_sd(s['per_seed_seconds_per_epoch'])} s/epoch")
    same = sections[-1].data
    if same.get("seeds"):
        print(f"same weights: agreement {same['min_agreement']:.2%} (worst seed), "
              f"max logit difference {same['max_abs_logit_diff']:.2g}")
    print(f"{len(measured)} point(s) measured now; run {study.run_id}")
    print(f"report: {paths.html}")
    return 0


# ---- report (from stored points only) ------------------------------------------------------


def _points(study: Any) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    pts = study.points()
    train = {fw: sorted((p for k, p in pts.items() if k.startswith(f"train/{fw}/")), key=lambda p: p["seed"])
             for fw in FRAMEWORKS}
    same = sorted((p for k, p in pts.items() if k.startswith("same_weights/")), key=lambda p: p["seed"])
    return train, same


def _threads_text(p: dict[str, Any]) -> str:
    t = p.get("threads") or {}
    if not t:
        return "not recorded"
    return f"{t.get('intra_op_threads')}/{t.get('inter_op_threads')}" + ("" if t.get("pinned") else " (not pinned)")


def _summary_section(train: dict[str, list[dict[str, Any]]]) -> Section:
    rows, data = [], {}
    for fw in FRAMEWORKS:
        pts = train[fw]
        if not pts:
            continue
        s = framework_summary(pts)
        data[fw] = {**s, "per_seed_accuracy": [p["test_accuracy"] for p in pts],
                    "per_seed_seconds_per_epoch": [float(np.mean(p["seconds_per_epoch"])) for p in pts],
                    "per_seed_seconds_per_later_epoch": [float(np.mean(p["seconds_per_epoch"][1:])) for p in pts
                                                         if len(p["seconds_per_epoch"]) > 1]}
        rows.append((NAMES[fw], len(pts), fmt_mean_sd(data[fw]["per_seed_accuracy"], 100),
                     f"{s['test_accuracy']['min'] * 100:.2f}–{s['test_accuracy']['max'] * 100:.2f}",
                     fmt_mean_sd(data[fw]["per_seed_seconds_per_epoch"], 1, 3),
                     fmt_mean_sd(data[fw]["per_seed_seconds_per_later_epoch"], 1, 3),
                     fmt_mean_sd([p["cpu_percent"] for p in pts], 1, 0),
                     fmt_mean_sd([p["peak_rss_bytes"] for p in pts], 2**-20, 0),
                     ", ".join(sorted({str(p.get("busy_threads")) for p in pts})),
                     ", ".join(sorted({_threads_text(p) for p in pts}))))
    text = ("Each twin trained with the manifest's hyper-parameters, once per seed, in its own process with the same "
            "thread count. Accuracy is on the test set after the last epoch; time per epoch is each seed's mean (the first "
            "epoch also traces and compiles; the next column leaves it out); "
            "CPU % is process CPU time over wall time (100 = one core busy); peak RSS is the training process's.")
    if all(fw in data for fw in FRAMEWORKS):
        gap = (data["keras"]["test_accuracy"]["mean"] - data["torch"]["test_accuracy"]["mean"]) * 100
        data["accuracy_gap_points"] = gap
        text += f" Mean accuracy gap Keras − PyTorch: {gap:+.2f} points."
    table = Table(("framework", "seeds", "accuracy % (mean ± sd)", "min–max %", "s/epoch", "s/epoch after the first",
                   "CPU %", "peak RSS MiB",
                   "busy threads", "intra/inter threads"), tuple(rows))
    return Section("summary", "Same training settings: accuracy and cost", text, tables=(table,), data=data)


def _curves_section(train: dict[str, list[dict[str, Any]]]) -> Section:
    figures: list[str] = []
    data: dict[str, dict[str, list[float]]] = {}
    for metric, label in (("loss", "training loss"), ("accuracy", "training accuracy"),
                          ("test_accuracy", "test accuracy")):
        lines = []
        for fw in FRAMEWORKS:
            pts = [p for p in train[fw] if p.get("history")]
            for p in pts:
                ys = [h[metric] for h in p["history"]]
                lines.append(Series("", list(range(1, len(ys) + 1)), ys, COLOURS[fw], thin=True))
            mean = mean_curve(pts, metric)
            data.setdefault(fw, {})[metric] = mean
            if mean:
                lines.append(Series(f"{NAMES[fw]} (mean of {len(pts)})", list(range(1, len(mean) + 1)), mean, COLOURS[fw]))
        figures.append(line_chart(lines, title=f"{label} per epoch", x_label="epoch", y_label=label))
    return Section("curves", "Loss and accuracy per epoch",
                   "Thin lines: one seed each; thick: the mean over seeds. Training loss and accuracy are averaged over "
                   "each epoch's batches; test accuracy is measured at the end of each epoch.",
                   figures=tuple(figures), data=data)


def _seeds_section(train: dict[str, list[dict[str, Any]]]) -> Section:
    rows = tuple((NAMES[fw], p["seed"], p["test_accuracy"] * 100, float(np.mean(p["seconds_per_epoch"])),
                  p["cpu_percent"], p["peak_rss_bytes"] / 2**20, p.get("busy_threads"), _threads_text(p),
                  "reused" if p.get("reused_from_cache") else "trained")
                 for fw in FRAMEWORKS for p in train[fw])
    return Section("seeds", "Every seed", "One row per trained model; 'reused' models were found in the workspace's "
                   "training cache (their measurements are from when they trained).",
                   tables=(Table(("framework", "seed", "accuracy %", "s/epoch", "CPU %", "peak RSS MiB",
                                  "busy threads", "intra/inter threads", "model"), rows),),
                   data={fw: train[fw] for fw in FRAMEWORKS})


def _same_weights_section(same: list[dict[str, Any]]) -> Section:
    rows, differing = [], []
    for p in same:
        kt, kb = p["keras_vs_torch"], p["keras_vs_roundtrip"]
        rows.append((p["seed"], kt["n"], kt["agreement"] * 100, kt["n_differing"], kt["max_abs_logit_diff"],
                     kt["mean_abs_logit_diff"], kt["per_sample_max_diff_percentiles"].get("p99"),
                     kb["agreement"] * 100, kb["max_abs_logit_diff"], p["roundtrip_max_weight_diff"]))
        differing += [(p["seed"], d["index"], d["label"], d["a"], d["b"], d["max_abs_logit_diff"])
                      for d in kt["differing"]]
    data: dict[str, Any] = {"seeds": [p["seed"] for p in same], "points": same}
    if same:
        data["min_agreement"] = min(p["keras_vs_torch"]["agreement"] for p in same)
        data["max_abs_logit_diff"] = max(p["keras_vs_torch"]["max_abs_logit_diff"] for p in same)
        data["n_differing"] = sum(p["keras_vs_torch"]["n_differing"] for p in same)
    text = ("Each seed's trained Keras model, copied into its PyTorch twin and back into a fresh Keras twin; the test "
            "set run in all three and compared with the original Keras model. Agreement is top-1 agreement per "
            "sample; logit differences are absolute.")
    if same:
        text += (f" Worst seed: {data['min_agreement']:.2%} agreement, largest logit difference "
                 f"{data['max_abs_logit_diff']:.2g}; {data['n_differing']} sample(s) predicted differently in all.")
    tables = [Table(("seed", "samples", "Keras↔PyTorch agreement %", "differing", "max |Δlogit|", "mean |Δlogit|",
                     "p99 per-sample max |Δlogit|", "round trip agreement %", "round trip max |Δlogit|",
                     "round trip max |Δweight|"), tuple(rows))]
    if differing:
        tables.append(Table(("seed", "sample", "label", "Keras", "PyTorch", "max |Δlogit|"), tuple(differing),
                            caption="samples whose predicted class differs between the frameworks"))
    return Section("same-weights", "Same weights: Keras and PyTorch", text, tables=tuple(tables), data=data)


def report(study: Any) -> list[Section]:
    train, same = _points(study)
    return [_summary_section(train), _curves_section(train), _seeds_section(train), _same_weights_section(same)]
