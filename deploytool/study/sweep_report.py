"""The sweep's report, from stored points only: the inference grid (table and latency/throughput against batch
per thread count), what more threads buy per runtime, the training grid (table and accuracy against training
time), and the points that were not measured with their reason."""

from __future__ import annotations

import statistics
from typing import Any

from deploytool.report.lines import DASHES, Series, line_chart
from deploytool.report.svg import PALETTE
from deploytool.study.report import Section, Table
from deploytool.study.sweep_measure import speedup


def peak_memory_bytes(memory: dict[str, float] | None) -> float | None:
    """The peak a point reports: a process's or a renderer's peak RSS (not a delta), else the largest figure."""
    memory = memory or {}
    peaks = [v for k, v in memory.items() if "peak" in k and "delta" not in k]
    values = peaks or list(memory.values())
    return max(values) if values else None


def _mb(v: float | None) -> float | None:
    return None if v is None else v / 2**20


def thread_effects(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per runtime and batch: throughput at each thread count against the fewest threads measured."""
    by: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for p in points:
        by.setdefault((p["unit"], p["batch"]), {})[p["threads"]] = p
    rows = []
    for (unit, batch), per in sorted(by.items()):
        ref_t = min(per)
        for t in sorted(per):
            if t == ref_t:
                continue
            ratio = speedup(per[t].get("throughput_sps"), per[ref_t].get("throughput_sps"))
            rows.append({"unit": unit, "label": per[t]["label"], "batch": batch, "threads": t, "ref_threads": ref_t,
                         "throughput_sps": per[t].get("throughput_sps"),
                         "ref_throughput_sps": per[ref_t].get("throughput_sps"), "speedup": ratio})
    return rows


def _effect_sentence(rows: list[dict[str, Any]]) -> str:
    by: dict[tuple[str, int, int], list[float]] = {}
    for r in rows:
        if r["speedup"]:
            by.setdefault((r["label"], r["threads"], r["ref_threads"]), []).append(r["speedup"])
    parts = []
    for (label, t, ref), ratios in sorted(by.items()):
        lo, hi, med = min(ratios), max(ratios), statistics.median(ratios)
        how = f"{1 / med:.1f}x slower" if med < 1 else f"{med:.2f}x as fast"
        parts.append(f"{label}: {t} threads vs {ref} ran at {lo:.2g}-{hi:.2g}x the throughput (median {how})")
    return "; ".join(parts) + "." if parts else ""


def _value(p: dict[str, Any], metric: str) -> float | None:
    """A point's value to plot; whole-set points (browser, phone) have no p50 above batch 1: their mean stands in."""
    v = p.get(metric)
    if v is None and metric == "p50_ms_per_sample":
        v = p.get("mean_ms_per_sample")
    return v


def _series(points: list[dict[str, Any]], metric: str) -> Any:
    units = list(dict.fromkeys(p["unit"] for p in points))
    threads = sorted({p["threads"] for p in points})
    out = []
    for i, unit in enumerate(units):
        for j, t in enumerate(threads):
            pts = [(p["batch"], _value(p, metric)) for p in points if p["unit"] == unit and p["threads"] == t]
            label = next(p["label"] for p in points if p["unit"] == unit)
            out.append(Series(f"{label}, {t} thread{'s' if t > 1 else ''}", [x for x, _ in pts], [y for _, y in pts],
                              PALETTE[i % len(PALETTE)], DASHES[j % len(DASHES)]))
    return out


def _inference(measured: list[dict[str, Any]]) -> list[Section]:
    rows = tuple((p["label"], p["threads"], p["batch"], p.get("p50_ms_per_sample"), p.get("p90_ms_per_sample"),
                  p.get("mean_ms_per_sample"), p.get("throughput_sps"), _mb(peak_memory_bytes(p.get("memory_bytes"))),
                  p.get("cpu_percent")) for p in measured)
    figures = (
        line_chart(_series(measured, "throughput_sps"), title="Throughput against batch size",
                   x_label="batch size", y_label="samples per second", x_log=True, y_log=None),
        line_chart(_series(measured, "p50_ms_per_sample"), title="Latency per sample against batch size",
                   x_label="batch size", y_label="p50 ms per sample", x_log=True, y_log=None),
    )
    effects = thread_effects(measured)
    main = Section(
        "inference", "Inference: threads x batch",
        "Per point: wall time of each whole batch divided by its size gives the per-sample p50/p90; throughput is "
        "samples over the timed batches' summed time; CPU % is the measuring process's CPU time over wall time "
        "(100 = one core busy); peak memory is the process's peak RSS during the point. Browser and phone points "
        "run whole sets: only batch 1 has percentiles, larger batches plot the mean per sample.",
        tables=(Table(("runtime", "threads", "batch", "p50 ms/sample", "p90 ms/sample", "mean ms/sample",
                       "samples/s", "peak MB", "CPU %"), rows),),
        figures=figures, data={"points": measured})
    threads = Section(
        "threads", "What more threads buy",
        _effect_sentence(effects) or "Only one thread count was measured.",
        tables=(Table(("runtime", "batch", "threads", "vs threads", "samples/s", "vs samples/s", "x throughput"),
                      tuple((r["label"], r["batch"], r["threads"], r["ref_threads"], r["throughput_sps"],
                             r["ref_throughput_sps"], r["speedup"]) for r in effects)),),
        data={"effects": effects})
    return [main, threads]


def _training(measured: list[dict[str, Any]], target: float | None) -> Section:
    import itertools

    rows, series = [], []
    for i, p in enumerate(measured):
        name = f"{p['framework']} batch {p['batch_size']} threads {p['threads']} {p['optimizer']} lr {p['learning_rate']:g}"
        rows.append((p["framework"], p["batch_size"], p["threads"], p["optimizer"], p["learning_rate"],
                     p.get("seconds_per_epoch_mean"), p.get("cpu_percent"),
                     _mb(peak_memory_bytes(p.get("memory_bytes"))), p.get("final_accuracy"),
                     p.get("epochs_to_target"), p.get("seconds_to_target")))
        elapsed = list(itertools.accumulate(p.get("seconds_per_epoch") or []))
        accuracy = list(p.get("accuracy_per_epoch") or [])[: len(elapsed)]
        series.append(Series(name, elapsed[: len(accuracy)], accuracy, PALETTE[i % len(PALETTE)],
                             DASHES[(i // len(PALETTE)) % len(DASHES)]))
    epochs = sorted({p["epochs"] for p in measured})
    samples = sorted({p["train_samples"] for p in measured if p.get("train_samples")})
    text = (f"Each point trained {'/'.join(map(str, epochs))} epoch(s) on {'/'.join(map(str, samples))} training "
            f"images, seeded, with the manifest's schedule; seconds per epoch exclude the test evaluation after "
            f"each epoch; CPU % is the process's CPU time over those seconds (100 = one core). "
            + (f"Target accuracy {target:g}: the epochs (and training seconds) to first reach it; — when it was not "
               "reached." if target is not None else "Pass --target-accuracy for the epochs to reach an accuracy."))
    return Section(
        "training", "Training: batch x threads x optimizer/learning rate", text,
        tables=(Table(("framework", "batch", "threads", "optimizer", "lr", "s/epoch", "CPU %", "peak MB",
                       "final accuracy", "epochs to target", "s to target"), tuple(rows)),),
        figures=(line_chart(series, title="Test accuracy against training time", x_label="training seconds",
                            y_label="test accuracy", x_log=False, y_log=False),),
        data={"points": measured, "target_accuracy": target})


def sections(run_id: str, request: dict[str, Any], points: dict[str, dict[str, Any]]) -> list[Section]:
    ordered = [points[k] for k in sorted(points)]
    infer = [p for p in ordered if p.get("kind") == "infer" and p.get("status") == "measured"]
    infer.sort(key=lambda p: (p["unit"], p["threads"], p["batch"]))
    train = [p for p in ordered if p.get("kind") == "train" and p.get("status") == "measured"]
    out: list[Section] = []
    if infer:
        out += _inference(infer)
    if train:
        out.append(_training(train, (request.get("grid") or {}).get("target_accuracy")))
    missing = [p for p in ordered if p.get("status") != "measured"]
    if missing:
        out.append(Section(
            "not-measured", "Points not measured",
            "Skipped points (a fixed-batch artifact runs its own batch only) and failures, with the reason.",
            tables=(Table(("point", "status", "reason"),
                          tuple((k, points[k].get("status"), points[k].get("reason")) for k in sorted(points)
                                if points[k].get("status") != "measured")),),
            data={"points": missing}))
    if not out:
        out.append(Section("empty", "Nothing measured", f"run {run_id} has no points yet."))
    return out
