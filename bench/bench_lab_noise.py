"""Benchmark (issue 11): the lab's false-alarm rate when the machine's load changes
between nights, before and after latency was judged against the load
(deploytool.lab.regress.MachineLoad), and whether a real 30% slowdown on a quiet
machine is still flagged.

(a) Simulated, at scale: T series of 20 nights whose latencies are seeded arrays
    (lognormal, 300 samples; a busy night reads 10-60% slower with a wider spread)
    and whose load readings are drawn like a row's (quiet: 0-15% of 2 CPUs taken by
    other processes; busy: 70-100%), load alternating night by night. Each night is
    judged as the lab judges it: the pairwise rank test against the reference night
    the lab picks (night.latency_reference) and E-divisive on the nightly medians
    (busy nights left out). "Before" = the same nights judged without their loads.
    Then a 30% slowdown from night 15 on: every night quiet; and load alternating
    (night 15 busy: it should be flagged on night 16, the next quiet one).
(b) End to end through the lab's own code: 20 nights through `run_night` (embedded
    LocalCluster, SQLite store, re-measuring, reference night, trend, lab.json) of one
    host cell on the lab's test double (the real LiteRT interpreter for the outputs;
    seeded synthetic latencies): every other night its row reads busy (90% of the
    CPUs taken by other processes) and 35% slower. After each night the same stored
    rows are judged again with `load_aware=False` ("before"). Then a night 30% slower
    on a quiet machine.
(d) --paired (issue 25): nights of one real host cell whose latency is timed against the PC baseline in
    alternating blocks (tests.lab_double.SlowLiteRT: the real LiteRT interpreter, made really slower by
    $LAB_SLOWER), judged on the paired ratio: 5 identical nights on a quiet machine, then 5 with a competing
    CPU-bound job (one busy loop, not niced) during nights 2-3; after each series a night whose runtime is 30%
    slower, which should be flagged that night. The false-alarm rate is of nights 1-4 of each series.
(c) --real: the same nights with real timings and real load: LiteRT's own latencies
    and the row's own load reading, a CPU burner (one spinning process per CPU) on
    every other night. What it shows depends on what else the machine runs: the
    load average is printed beside each night.

(e) --example: examples/lab.toml itself, 5 identical nights quiet, then 5 with a CPU-bound job (one busy loop
    per CPU) in nights 2-3; every latency alert is printed with its evidence.

    .venv/bin/python bench/bench_lab_noise.py [--trials 30] [--nights 20] [--skip-lab] [--real] [--paired] [--example]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.test_lab import LAB as _TEST_LAB  # noqa: E402  (one host cell of the lab's runtime double)

LAB = _TEST_LAB.replace('name = "t"', 'name = "noise"').replace("latency_samples = 200", "latency_samples = 300")


# ------------------------------------------------------------------ (a) simulated nights
def _row(env: dict) -> object:
    from deploytool.result import Combo, Result, Status

    return Result(run_id="", combo_key="", model="m", dataset="d", combo=Combo("keras", "tflite", "none", "host"),
                  status=Status.MEASURED, environment=env)


def simulate(trials: int, nights: int, slowdown_from: int | None, alternate: bool, seed: int) -> dict[str, float]:
    """Rates over `trials` series: nights with an alert (of the nights judged), series with any alert."""
    from deploytool.lab import regress
    from deploytool.lab.night import _on_the_trend, latency_reference

    rng = np.random.default_rng(seed)
    out = {"aware_nights": 0, "blind_nights": 0, "aware_series": 0, "blind_series": 0, "aware_first": [],
           "blind_first": [], "judged": 0}
    for _ in range(trials):
        arrays, rows = [], []
        for i in range(nights):
            busy = alternate and i % 2 == 1
            slower = 1.3 if slowdown_from is not None and i >= slowdown_from else 1.0
            if busy:
                lat = rng.lognormal(np.log(0.2 * slower * rng.uniform(1.1, 1.6)), 0.35, 300)
                reading = rng.uniform(0.7, 1.0)
            else:
                lat = rng.lognormal(np.log(0.2 * slower), 0.2, 300)
                reading = rng.uniform(0.0, 0.15)
            arrays.append(lat)
            rows.append(_row({"cpu_busy_fraction_before_timing": reading, "cpu_count": 2, "threads": 1}))
        hit = {"aware": None, "blind": None}
        for i in range(1, nights):
            good = [(str(k), rows[k]) for k in range(i)]
            for mode in ("aware", "blind"):
                if mode == "aware":
                    ref, _ = latency_reference(good, rows[i], regress.LOAD_DIFFERENCE_CPUS)
                    k = int(ref)
                    lat = regress.latency_change(arrays[k], arrays[i], load_before=regress.MachineLoad.of(rows[k].environment),
                                                 load_now=regress.MachineLoad.of(rows[i].environment))
                    series = [float(np.median(arrays[j])) for j in range(i) if _on_the_trend(rows[j])]
                    on = _on_the_trend(rows[i])
                else:
                    lat = regress.latency_change(arrays[i - 1], arrays[i])
                    series, on = [float(np.median(arrays[j])) for j in range(i)], True
                tr = regress.trend(series + [float(np.median(arrays[i]))]) if on and series else None
                alert = lat.alert or (tr is not None and tr.alert)
                out[f"{mode}_nights"] += alert
                if alert and hit[mode] is None:
                    hit[mode] = i
            out["judged"] += 1
        for mode in ("aware", "blind"):
            out[f"{mode}_series"] += hit[mode] is not None
            out[f"{mode}_first"].append(hit[mode])
    return out


def report_simulated(trials: int, nights: int) -> None:
    t = time.perf_counter()
    noise = simulate(trials, nights, None, alternate=True, seed=1)
    print(f"(a) simulated: {trials} series of {nights} identical nights, load alternating busy/quiet:")
    for mode, words in (("blind", "before (load not judged)"), ("aware", "after (load-aware)")):
        print(f"    {words:26s}: nights with an alert {noise[f'{mode}_nights']}/{noise['judged']} = "
              f"{noise[f'{mode}_nights'] / noise['judged']:.3f}; series with any alert "
              f"{noise[f'{mode}_series']}/{trials} = {noise[f'{mode}_series'] / trials:.3f}")
    slow = simulate(trials, nights, 15, alternate=False, seed=2)
    caught = [f for f in slow["aware_first"] if f is not None and f >= 15]
    early = sum(f is not None and f < 15 for f in slow["aware_first"])
    print(f"    30% slowdown from night 15, every night quiet: flagged (after) in {len(caught)}/{trials} series "
          f"(on night 15 in {sum(f == 15 for f in caught)}), a false alarm before night 15 in {early}/{trials}")
    masked = simulate(trials, nights, 15, alternate=True, seed=4)  # night 15 is a busy one
    caught = [f for f in masked["aware_first"] if f is not None and f >= 15]
    print(f"    30% slowdown from night 15 (a busy night), load alternating: flagged (after) in {len(caught)}/{trials} "
          f"series (on night 16, the next quiet one, in {sum(f == 16 for f in caught)}), a false alarm before night "
          f"15 in {sum(f is not None and f < 15 for f in masked['aware_first'])}/{trials}")
    quiet = simulate(trials, nights, None, alternate=False, seed=3)
    print(f"    identical quiet nights: series with any alert, after {quiet['aware_series']}/{trials}, "
          f"before {quiet['blind_series']}/{trials}   ({time.perf_counter() - t:.0f} s)")


# ------------------------------------------------------------------ (b) real nights
def burner_start() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]


def burner_stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def _workspace(tmp: Path):
    from tests.integration.conftest import _shared_models, _train

    from deploytool.workspace import Workspace

    ws = Workspace.open(tmp / "ws")
    shutil.copytree(_shared_models(tmp), ws.root / "models", dirs_exist_ok=True)
    _train(ws)  # found in the kept models: nothing trains
    return ws


def _verdict(judged: list) -> str:
    words = []
    for j in judged:
        for c in j.changes:
            if c.metric in ("latency", "trend") and c.outcome != "same":
                words.append(f"{c.metric} {c.outcome}")
    return ", ".join(words) or "same"


def lab_nights(nights: int, tmp: Path, real: bool) -> None:
    from tests import lab_double

    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import judge_night, plan_cells, row_load, run_night
    from deploytool.store import SqlAlchemyStore

    ws = _workspace(tmp)
    (tmp / "lab.toml").write_text(LAB)
    lab = load_lab(tmp / "lab.toml")
    store = SqlAlchemyStore(f"sqlite:///{tmp / 'lab.db'}")
    lab_double.register()
    cells = plan_cells(lab, ws, {"host": {}})
    counts = {"aware": 0, "blind": 0}
    if real:
        print(f"(c) real: {nights} nights of one LiteRT LeNet-5 host cell, its real timings and load reading, a CPU "
              f"burner ({os.cpu_count()} spinning processes) on every other night")
    else:
        print(f"(b) the lab end to end: {nights} nights of one host cell on the lab's test double, every other night "
              "read busy (90% of the CPUs) and 35% slower")
    try:
        for i in range(nights + 1):
            burn = i % 2 == 1 and i < nights
            if real:
                lab_double.KNOBS.update(busy=None, real_latency=True, slower=1.3 if i == nights else 1.0)
            else:
                lab_double.KNOBS.update(busy=0.9 if burn else 0.03, real_latency=False, seed=i,
                                        slower=1.35 if burn else 1.3 if i == nights else 1.0)
            procs = burner_start() if burn and real else []
            try:
                time.sleep(1.0 if burn else 0.0)
                t = time.perf_counter()
                out = run_night(lab, ws, store, f"n{i:02d}", progress=False, log=lambda s: None)
                secs = time.perf_counter() - t
            finally:
                burner_stop(procs)
            blind = judge_night(lab, ws, store, out.run_id, cells, load_aware=False)
            r = out.judged[0].result
            aware_alert, blind_alert = bool(out.alerts), any(j.alert for j in blind)
            if i < nights and i > 0:
                counts["aware"] += aware_alert
                counts["blind"] += blind_alert
            last = (aware_alert, blind_alert)
            what = ("30% slower, quiet" if i == nights else "busy" if burn else "quiet") if not real else \
                ("30% slower, no burner" if i == nights else "burner" if burn else "no burner")
            print(f"    night {i:2d} ({what:21s}; load avg {os.getloadavg()[0]:.2f}; {secs:4.1f} s): "
                  f"p50 {r.measurement.p50_ms:.4f} ms, load {row_load(r)}"
                  f"{', measured twice' if out.judged[0].measured_again else ''}; "
                  f"after: {'ALERT ' if aware_alert else ''}{_verdict(out.judged)}; "
                  f"before: {'ALERT ' if blind_alert else ''}{_verdict(blind)}")
    finally:
        lab_double.unregister()
    print(f"    false alarms over nights 1..{nights - 1} (each judged against the earlier ones): "
          f"before {counts['blind']}/{nights - 1}, after {counts['aware']}/{nights - 1}; the 30% slower night "
          f"{'flagged' if last[0] else 'NOT flagged'} after, {'flagged' if last[1] else 'not flagged'} before")


PAIRED_LAB = LAB.replace('runtimes = ["lab-double"]', 'runtimes = ["lab-slow"]')


def paired_nights(tmp: Path, nights: int = 5) -> None:
    from tests import lab_double

    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import SqlAlchemyStore

    ws = _workspace(tmp)
    lab_double.register()
    print(f"(d) paired: one real LiteRT LeNet-5 host cell timed against its PC baseline (Keras) in alternating blocks; "
          f"{nights} identical nights per series, then a night 30% slower")
    try:
        for series, burn_nights in (("quiet", ()), ("a CPU-bound job in nights 2-3", (2, 3))):
            name = "quiet" if not burn_nights else "busy"
            (tmp / f"{name}.toml").write_text(PAIRED_LAB.replace('name = "noise"', f'name = "{name}"'))
            lab = load_lab(tmp / f"{name}.toml")
            store = SqlAlchemyStore(f"sqlite:///{tmp / (name + '.db')}")
            alarms, slow_flagged = 0, False
            for i in range(nights + 1):
                os.environ["LAB_SLOWER"] = "1.3" if i == nights else "1.0"
                procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])] if i in burn_nights else []
                try:
                    out = run_night(lab, ws, store, f"{name}{i}", progress=False, log=lambda s: None)
                finally:
                    burner_stop(procs)
                j = out.judged[0]
                p = j.result.measurement.paired if j.result.measurement is not None else None
                alert = bool(out.alerts)
                if 0 < i < nights:
                    alarms += alert
                if i == nights:
                    slow_flagged = alert
                what = "30% slower" if i == nights else ("CPU-bound job" if i in burn_nights else "identical")
                ratio = f"{p.ratio:.4f} [{p.ratio_low:.4f}, {p.ratio_high:.4f}], drift {p.drift:.2f}" if p else "-"
                print(f"    {name} night {i} ({what:13s}; load avg {os.getloadavg()[0]:.1f}): ratio {ratio}"
                      f"{', measured twice' if j.measured_again else ''}; {'ALERT ' if alert else ''}"
                      f"{_verdict(out.judged)}")
                for c in j.changes:
                    if c.metric == "latency":
                        print(f"        {c.outcome}: {c.detail}")
            print(f"    => {series}: false alarms {alarms}/{nights - 1} identical nights; the 30% slower night "
                  f"{'flagged' if slow_flagged else 'NOT flagged'}")
    finally:
        os.environ.pop("LAB_SLOWER", None)
        lab_double.unregister()


def example_nights(tmp: Path, nights: int = 5) -> None:
    """(e) --example: examples/lab.toml itself (LeNet-1 and LeNet-5, tflite/onnx x none/int8, host and web) for
    `nights` identical nights on a quiet machine, then `nights` more with a competing CPU-bound job (one busy loop
    per CPU, not niced) during nights 2-3; latency alerts counted over nights 1.. of each series."""
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import SqlAlchemyStore

    ws = _workspace(tmp)
    lab = load_lab(ROOT / "examples" / "lab.toml")
    print(f"(e) examples/lab.toml: {nights} identical nights on a quiet machine, then {nights} with a CPU-bound job "
          "in nights 2-3")
    for series, burn_nights in (("quiet", ()), ("a CPU-bound job in nights 2-3", (2, 3))):
        store = SqlAlchemyStore(f"sqlite:///{tmp / ('example-' + str(bool(burn_nights)) + '.db')}")
        alerts = 0
        for i in range(nights):
            procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)
                     ] if i in burn_nights else []
            t = time.perf_counter()
            try:
                out = run_night(lab, ws, store, f"{'busy' if burn_nights else 'quiet'}{i}", progress=False,
                                log=lambda s: None)
            finally:
                burner_stop(procs)
            latency = [(j.result.combo.label, c) for j in out.judged for c in j.changes if c.alert]  # any alert
            if i > 0:
                alerts += len(latency)
            unclear = sum(1 for j in out.judged for c in j.changes if c.metric == "latency" and c.outcome == "unclear")
            print(f"    {series[:5]} night {i} ({'CPU-bound job' if i in burn_nights else 'identical':13s}; "
                  f"{time.perf_counter() - t:5.1f} s, {len(out.judged)} cells): {len(latency)} alert(s), "
                  f"{unclear} unclear")
            for label, c in latency:
                print(f"        ALERT {label}: {c.outcome}: {c.detail}")
        print(f"    => {series}: {alerts} alert(s) over nights 1-{nights - 1} (latency and everything else)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--nights", type=int, default=20)
    ap.add_argument("--skip-lab", action="store_true", help="only (a)")
    ap.add_argument("--real", action="store_true", help="also (c)")
    ap.add_argument("--paired", action="store_true", help="only (d): paired latency, 5 identical nights per series")
    ap.add_argument("--example", action="store_true", help="only (e): examples/lab.toml, 5 nights per series")
    args = ap.parse_args()
    if args.example:
        with tempfile.TemporaryDirectory() as tmp:
            example_nights(Path(tmp))
        return
    if args.paired:
        with tempfile.TemporaryDirectory() as tmp:
            paired_nights(Path(tmp))
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    report_simulated(args.trials, args.nights)
    for real in ([False] if not args.skip_lab else []) + ([True] if args.real else []):
        with tempfile.TemporaryDirectory() as tmp:
            lab_nights(args.nights, Path(tmp), real)


if __name__ == "__main__":
    main()
