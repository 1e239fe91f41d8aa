"""The robustness study's report, built from its stored points only (predicted labels per set and row): robust
accuracy against ε per row with the PC model marked, the per-row table, agreement with the PC model on
adversarial inputs, transfer between the twins, and a gallery of adversarial digits that fool only the target.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from deploytool.report.lines import Series, line_chart
from deploytool.report.svg import PALETTE, image_grid
from deploytool.study.report import Section, Table
from deploytool.study.robust_metrics import accuracy, agreement, attack_success_rate, fools_one_not_other

if TYPE_CHECKING:
    from deploytool.study.base import StudyRun

GALLERY_MAX = 32


def _pct(v: float | None) -> float | None:
    return None if v is None or not np.isfinite(v) else round(100.0 * v, 2)


def measure_rows(points: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (adversarial set, row) with every number of the study, from the stored predictions."""
    y = np.asarray(points["samples"]["y"])
    sets = {k[4:]: v for k, v in points.items() if k.startswith("set/")}
    rows = [v for k, v in points.items() if k.startswith("row/")]
    preds = {(r["set"], r["label"]): np.asarray(r["preds"]) for r in rows if "preds" in r}
    out = []
    for r in rows:
        s = sets.get(r["set"])
        if r["set"] == "clean" or s is None:
            continue
        rec = {"set": r["set"], "crafted_on": s["crafted_on"], "attack": s["attack"], "eps": s["eps"],
               "row": r["label"], "kind": r["kind"], "framework": r["framework"],
               "quantize": (r.get("combo") or {}).get("quantize", "pc"), "status": r["status"],
               "transfer": r["framework"] != s["crafted_on"], "gallery": r.get("gallery") or []}
        adv, clean = preds.get((r["set"], r["label"])), preds.get(("clean", r["label"]))
        pc = preds.get((r["set"], f"{r['framework']} (PC)"))
        if adv is not None and clean is not None:
            rec.update(clean_accuracy=accuracy(clean, y), robust_accuracy=accuracy(adv, y),
                       attack_success_rate=attack_success_rate(clean, adv, y))
        if adv is not None and pc is not None and r["kind"] == "target":
            fools = fools_one_not_other(pc, adv, y)
            rec.update(agreement=agreement(pc, adv), only_target_fooled=len(fools.only_target),
                       only_pc_fooled=len(fools.only_pc), pc_robust_accuracy=accuracy(pc, y))
        out.append(rec)
    order = {"fgsm": 0, "pgd": 1, "deepfool": 2}
    out.sort(key=lambda r: (r["crafted_on"], order.get(r["attack"], 9), r["eps"] or 0, r["kind"] != "source", r["row"]))
    return out


def _eps_cell(r: dict[str, Any]) -> str:
    return f"{r['eps']:g}" if r["eps"] else "—"


def _charts(recs: list[dict[str, Any]]) -> list[str]:
    figures = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        if r["eps"] and not r["transfer"] and r.get("robust_accuracy") is not None:
            groups[(r["crafted_on"], r["attack"])].append(r)
    for (crafted_on, attack), rs in sorted(groups.items()):
        by_row: dict[str, list[tuple[float, float]]] = defaultdict(list)
        clean = {}
        for r in rs:
            by_row[r["row"]].append((r["eps"], 100 * r["robust_accuracy"]))
            clean[r["row"]] = 100 * r["clean_accuracy"]
        series = []
        for i, (row, pts) in enumerate(sorted(by_row.items(), key=lambda kv: "(PC)" not in kv[0])):
            pts = [(0.0, clean[row])] + sorted(pts)
            series.append(Series(row, [p[0] for p in pts], [p[1] for p in pts], PALETTE[i % len(PALETTE)],
                                 baseline="(PC)" in row))
        figures.append(line_chart(series, title=f"{attack.upper()} crafted on the {crafted_on} PC model: robust accuracy "
                                  "against ε", x_label="ε (L∞, pixel scale 0-1)", y_label="robust accuracy %",
                                  y_range=(0.0, 100.0), height=380))
    return figures


def _gallery(recs: list[dict[str, Any]]) -> str:
    images: list[tuple[str, int, int, str]] = []
    for r in recs:
        for uri, w, h, caption in r["gallery"]:
            if len(images) < GALLERY_MAX:
                images.append((uri, w, h, f"{r['set']}|{caption.split('|')[1]}"))
    return image_grid(images, title="adversarial digits that fool the target but not its PC model", columns=6)


def _finding(recs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    targets = [r for r in recs if r["kind"] == "target" and r.get("robust_accuracy") is not None]
    if not targets:
        return "No target row was measured on an adversarial set.", {}
    deltas = [100 * (r["robust_accuracy"] - r["pc_robust_accuracy"]) for r in targets]
    by_quant: dict[str, list[float]] = defaultdict(list)
    for r, d in zip(targets, deltas):
        by_quant[r["quantize"]].append(d)
    worst = int(np.argmax(np.abs(deltas)))
    flips = sum(r["only_target_fooled"] for r in targets)
    rescued = sum(r["only_pc_fooled"] for r in targets)
    quant = "; ".join(f"{q}: mean {np.mean(v):+.2f}, max |{np.max(np.abs(v)):.2f}| points"
                      for q, v in sorted(by_quant.items()))
    text = (f"Over {len(targets)} (set, target) rows, robust accuracy minus the PC model's on the same adversarial "
            f"samples — {quant}. Largest change: {deltas[worst]:+.2f} points ({targets[worst]['row']} on "
            f"{targets[worst]['set']}). Samples fooling only the target: {flips}; fooling only the PC model: {rescued}. "
            f"Mean agreement with the PC model on adversarial inputs: "
            f"{100 * np.mean([r['agreement'] for r in targets]):.2f} %.")
    data = {"rows": len(targets), "max_abs_delta_points": float(np.max(np.abs(deltas))),
            "delta_points_by_quantize": {q: {"mean": float(np.mean(v)), "max_abs": float(np.max(np.abs(v)))}
                                         for q, v in by_quant.items()},
            "only_target_fooled": flips, "only_pc_fooled": rescued}
    return text, data


def report(run: "StudyRun") -> list[Section]:
    points = run.points()
    if "samples" not in points:
        return [Section("robustness", "Robustness", "No point of this run was stored yet.")]
    recs = measure_rows(points)
    n = points["samples"]["n"]
    finding, finding_data = _finding(recs)
    rows_table = Table(("crafted on", "attack", "ε", "row", "transfer", "clean acc %", "robust acc %", "ASR %"),
                       tuple((r["crafted_on"], r["attack"], _eps_cell(r), r["row"], "yes" if r["transfer"] else "",
                              _pct(r.get("clean_accuracy")), _pct(r.get("robust_accuracy")),
                              _pct(r.get("attack_success_rate"))) for r in recs),
                       f"{n} samples; ASR = of the samples the row gets right when clean, the share the attack "
                       "makes it get wrong")
    targets = [r for r in recs if r["kind"] == "target"]
    agree_table = Table(("crafted on", "attack", "ε", "row", "agreement with PC %", "robust acc − PC (points)",
                         "fooled only on target", "fooled only on PC"),
                        tuple((r["crafted_on"], r["attack"], _eps_cell(r), r["row"], _pct(r.get("agreement")),
                               None if r.get("robust_accuracy") is None else
                               round(100 * (r["robust_accuracy"] - r["pc_robust_accuracy"]), 2),
                               r.get("only_target_fooled"), r.get("only_pc_fooled")) for r in targets),
                        "the row's PC model is the twin it was converted from, on the same adversarial samples")
    transfer: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in recs:
        if r.get("robust_accuracy") is not None:
            col = f"{r['framework']} {'PC' if r['kind'] == 'source' else 'artifacts (mean)'}"
            transfer[(r["crafted_on"], r["attack"], _eps_cell(r))][col].append(100 * r["robust_accuracy"])
    cols = sorted({c for v in transfer.values() for c in v})
    transfer_table = Table(("crafted on", "attack", "ε", *(f"{c} robust acc %" for c in cols)),
                           tuple((*k, *(round(float(np.mean(v[c])), 2) if c in v else None for c in cols))
                                 for k, v in transfer.items()),
                           "white-box where the column's framework is the one crafted on, transfer otherwise")
    return [
        Section("finding", "Does migration change robustness?", finding, data=finding_data),
        Section("epsilon", "Robust accuracy against ε",
                "White-box rows (artifacts converted from the model the attack was crafted on); ε = 0 is the clean "
                "accuracy; the dashed black line is the PC model.", figures=tuple(_charts(recs))),
        Section("rows", "Clean accuracy, robust accuracy and attack success rate per row", tables=(rows_table,),
                data={"records": [{k: v for k, v in r.items() if k != "gallery"} for r in recs]}),
        Section("agreement", "Agreement with the PC model on adversarial inputs", tables=(agree_table,)),
        Section("transfer", "Transfer: Keras-crafted examples on PyTorch-born models and the reverse",
                tables=(transfer_table,)),
        Section("gallery", "Adversarial digits that flip only on the target",
                "Each: its adversarial set, then the PC model's label (the true label) -> the target's label.",
                figures=(_gallery(targets),)),
    ]
