"""The migrate pipeline, end to end: for each source framework, train (cached)
and measure the PC baseline (cached); then for every combination of format x
quantization x target (x backend / device): convert (cached), run, compare,
store — each result committed as soon as it exists — and finally report.

A fault in one combination is that combination's result; the matrix goes on.
This module orchestrates; converting, running, comparing, storing and
reporting each live in their own module.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import secrets
import shlex
import time
import traceback
import os
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import numpy as np

from deploytool.artifact import Artifact
from deploytool.baseline import Baseline, run_baseline
from deploytool.compare import compare, primary_memory
from deploytool.convert.isolated import IsolatedConverter
from deploytool.data import Dataset, load_dataset
from deploytool.errors import (DataError, DeploytoolError, DeviceNotFound, HarnessMissing, StageFailed, UnknownOption,
                               WorkspaceError)
from deploytool.provenance import PACKAGES, host_facts, host_identity, package_version
from deploytool.result import Combo, Result
from deploytool.runtimes import REGISTRY as RUNTIME_REGISTRY
from deploytool.runtimes import TARGETS, make_runtime, runtime_class
from deploytool.spec import ModelSpec, load_spec
from deploytool.store import Store, open_store
from deploytool.train import train, train_key
from deploytool.workspace import Workspace, check_name, fresh_dir, stable_hash

WEB_BACKENDS = ("wasm", "cpu", "webgl")
# A run id is <model name, cut to this>-<12 hex> (or -<timestamp>-<8 hex> with --fresh): at most 64 characters.
RUN_NAME_CHARS = 40
ANDROID_DELEGATES = ("cpu", "xnnpack", "gpu", "nnapi")


@dataclass
class MigrateRequest:
    model: str = "lenet5"
    frameworks: tuple[str, ...] = ("all",)
    formats: tuple[str, ...] = ("all",)
    quantize: tuple[str, ...] = ("all",)
    targets: tuple[str, ...] = ("host",)
    data_dir: Path | None = None
    test_npz: Path | None = None
    epochs: int | None = None
    backends: tuple[str, ...] = ("wasm",)  # web
    devices: tuple[str, ...] = ()  # android serials; empty = $ANDROID_SERIAL or every ready device
    delegate: str = "cpu"  # android
    threads: int = 1
    warmup_runs: int = 10
    latency_samples: int | None = None
    timeout_s: float = 600.0
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    benchmark_binary: Path | None = None
    run_id: str | None = None
    fresh: bool = False
    limit_test: int | None = None
    localize: bool = False  # cut failing rows layer by layer to find where they go wrong
    # a user's own model file: what the model cannot tell about its input
    layout: str | None = None
    labels: tuple[str, ...] = ()
    scale: float = 1.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        # Files by absolute path: a stored request means the same from any directory.
        from deploytool.usermodel import is_model_file

        for name in ("data_dir", "test_npz", "benchmark_binary"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, Path(value).expanduser().absolute())
        if is_model_file(self.model) or self.model.endswith(".toml"):
            self.model = str(Path(self.model).expanduser().absolute())
        self.check()

    def check(self) -> None:
        """Numbers a run cannot mean anything with; the CLI refuses them first, a library caller here."""
        problems = []
        if self.threads < 1:
            problems.append(f"threads={self.threads} (must be >= 1)")
        if self.warmup_runs < 0:
            problems.append(f"warmup_runs={self.warmup_runs} (must be >= 0)")
        if self.latency_samples is not None and self.latency_samples < 1:
            problems.append(f"latency_samples={self.latency_samples} (must be >= 1, or None for all)")
        if self.epochs is not None and self.epochs < 1:
            problems.append(f"epochs={self.epochs} (must be >= 1, or None for the manifest's)")
        if not (self.timeout_s > 0 and self.timeout_s != float("inf")):
            problems.append(f"timeout_s={self.timeout_s} (must be a positive number of seconds)")
        if self.limit_test is not None and self.limit_test < 1:
            problems.append(f"limit_test={self.limit_test} (must be >= 1)")
        if not (math.isfinite(self.scale) and self.scale != 0):
            problems.append(f"scale={self.scale} (must be a finite non-zero number)")
        if not all(math.isfinite(v) for v in self.mean):
            problems.append(f"mean={list(self.mean)} (must be finite)")
        if not all(math.isfinite(v) and v != 0 for v in self.std):
            problems.append(f"std={list(self.std)} (must be finite and non-zero)")
        if len(set(self.labels)) != len(self.labels):
            problems.append(f"labels={list(self.labels)} (class names must differ)")
        if problems:
            raise UnknownOption("invalid request: " + "; ".join(problems))

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


@dataclass
class Source:
    framework: str
    artifact: Artifact
    baseline: Baseline


@dataclass
class RunOutcome:
    run_id: str
    results: list[Result]
    report_paths: Any  # report.ReportPaths, or None when reporting failed
    reused: int  # combinations taken from the store instead of measured again
    seconds_total: float
    seconds_in_runtimes: float
    seconds_converting: float
    seconds_report: float

    @property
    def failing(self) -> list[Result]:
        return [r for r in self.results if r.failing]


def _expand(values: tuple[str, ...], allowed: tuple[str, ...], what: str) -> list[str]:
    out: list[str] = []
    for v in values:
        for item in v.split(","):
            item = item.strip()
            if not item:
                continue
            if item == "all":
                out.extend(allowed)
            elif item not in allowed:
                raise UnknownOption(f"unknown {what} {item!r}; choose from {', '.join(allowed)} or all")
            else:
                out.append(item)
    return list(dict.fromkeys(out))


def plan_matrix(req: MigrateRequest, spec: ModelSpec, devices: list[str]) -> list[Combo]:
    """Every combination the request names, in a stable order."""
    from deploytool import convert

    frameworks = _expand(req.frameworks, spec.frameworks, "framework")
    formats = _expand(req.formats, convert.FORMATS, "format")
    targets = _expand(req.targets, tuple(t for t in TARGETS if t != "pc"), "target")
    backends = _expand(req.backends, WEB_BACKENDS, "web backend")
    if req.delegate not in ANDROID_DELEGATES:
        raise UnknownOption(f"unknown delegate {req.delegate!r}; choose from {', '.join(ANDROID_DELEGATES)}")
    all_quant = "all" in req.quantize
    words = [] if all_quant else _expand(req.quantize, convert.QUANTIZE_WORDS, "quantization")
    combos: list[Combo] = []
    for fw in frameworks:
        for fmt in formats:
            available = convert.quantize_modes(fw, fmt)
            if not available and "all" in req.formats:
                continue  # `--format all` means the formats this source has
            modes = (available or ("none",)) if all_quant else words
            for q in modes:
                for target in targets:
                    artifact_format = convert.ARTIFACT_FORMAT[fmt]
                    if "all" in req.formats and (target, artifact_format) not in RUNTIME_REGISTRY:
                        continue  # `--format all` means the formats that run on the target
                    if target == "web":
                        kinds = backends if artifact_format == "tfjs_graph" else ["wasm"]
                        combos += [Combo(fw, fmt, q, target, "", b) for b in kinds]
                    elif target == "android":
                        combos += [Combo(fw, fmt, q, target, d, req.delegate) for d in devices]
                    else:
                        combos.append(Combo(fw, fmt, q, target))
    _refuse_if_nothing_possible(combos)
    return combos


def _refuse_if_nothing_possible(combos: list[Combo]) -> None:
    """A request whose every combination is impossible is a user mistake (exit 2), not a run of empty rows."""
    from deploytool import convert

    reasons = []
    for c in {(c.framework, c.format, c.quantize) for c in combos}:
        try:
            convert.plan(*c)
            return
        except StageFailed as e:
            reasons.append(e.reason)
    if reasons:
        raise UnknownOption(sorted(reasons)[0])


def chromium_build() -> str:
    from deploytool.devices.browser import chromium_build as build

    return build()


def resolve_devices(req: MigrateRequest) -> list[str]:
    """Android serials for the matrix (--device, else $ANDROID_SERIAL, else every ready device);
    no device is a user error before anything runs."""
    from deploytool.devices import adb

    if req.devices:
        return [s for serial in req.devices for s in adb.select_devices(serial)]
    return adb.select_devices(all_devices=True)


class Pipeline:
    """One migrate run over its matrix."""

    def __init__(self, req: MigrateRequest, ws: Workspace, store: Store, progress: bool = True,
                 log: Callable[[str], None] = print):
        self.req, self.ws, self.store, self.progress, self.log = req, ws, store, progress, log

    # -- preparation ---------------------------------------------------------
    def prepare(self, with_devices: bool = True) -> None:
        from deploytool import usermodel

        req = self.req
        self.user_artifact: Artifact | None = None
        if usermodel.is_model_file(req.model):
            if req.test_npz is None:
                raise DataError(f"{req.model}: a model file needs its test set: pass --data test.npz "
                                "(arrays x (N,H,W,C) and y (N,)) and its preprocessing (--scale/--mean/--std)")
            opts = usermodel.UserModelOptions(req.layout, tuple(req.labels), req.scale, tuple(req.mean), tuple(req.std))
            self.spec, self.user_artifact = usermodel.resolve(Path(req.model), opts, self.ws)
        else:
            self.spec = load_spec(req.model)
        self.dataset: Dataset = load_dataset(self.spec, req.data_dir, req.test_npz, limit_test=req.limit_test)
        wants_android = any("android" in t or "all" in t for t in req.targets)
        self.devices = resolve_devices(req) if wants_android and with_devices else list(req.devices)
        self.combos = plan_matrix(req, self.spec, self.devices)
        if with_devices and any(c.target == "web" for c in self.combos):
            from deploytool.devices.browser import find_chromium
            from deploytool.runtimes.web import check_harness

            find_chromium()  # before anything runs: a missing browser is one line, not a column of failures
            check_harness()
        if not self.combos:
            raise UnknownOption("the request names no combination to run; check --format/--quantize/--target")
        self.host_id = host_identity()
        # The browser build is asked of the binary only when rows will run; a stored run's comes from its record.
        self.browser_build = chromium_build() if with_devices and any(c.target == "web" for c in self.combos) else ""
        self.source_ids = {fw: self._source_id(fw) for fw in {c.framework for c in self.combos}}
        self.run_id = self._run_id()
        self.tolerances = {g: {**self.spec.tolerance_for(g), **req.tolerances} for g in ("none", "quantized")}
        self.sources: dict[str, Source] = {}

    # -- identity: a row belongs to exactly what was measured -----------------
    def _source_id(self, framework: str) -> str:
        """The content identity of a source model before it exists: a user's file by its bytes, a zoo
        model by everything its training depends on (manifest, data, epochs, seed, framework versions)."""
        if self.user_artifact is not None:
            return self.user_artifact.sha256
        return train_key(self.spec, framework, self.dataset, self.req.epochs or self.spec.train.epochs)

    def _run_id(self) -> str:
        req = self.req
        if req.run_id:
            return check_name(req.run_id, "--run-id")
        name = self.spec.name[:RUN_NAME_CHARS]
        if req.fresh:  # unique even for two runs started in the same second on the same host
            return f"{name}-{dt.datetime.now():%Y%m%d%H%M%S}-{secrets.token_hex(4)}"
        request = req.describe()
        for k in ("fresh", "run_id", "model", "test_npz", "data_dir", "localize"):
            request.pop(k, None)  # the inputs enter by content below, not by path
        ident = {"spec": self.spec.content_hash(), "data": self.dataset.sha256, "sources": self.source_ids,
                 "host": self.host_id, "browser": self.browser_build, "request": request}
        return f"{name}-{stable_hash(ident, 12)}"

    def combo_key(self, combo: Combo) -> str:
        """Everything the row's numbers depend on: source model and data by content, calibration set,
        the combination, and where it runs (host; browser build for web rows; the serial is in `combo`)."""
        return stable_hash({"model": self.spec.name, "data": self.dataset.sha256,
                            "source": self.source_ids[combo.framework], "calibration": self.calibration_sha256,
                            "host": self.host_id, "browser": self.browser_build if combo.target == "web" else "",
                            **asdict(combo)})

    def source(self, framework: str) -> Source:
        if framework not in self.sources:
            if self.user_artifact is not None:
                art = self.user_artifact
            else:
                art = train(self.spec, framework, self.dataset, self.ws, epochs=self.req.epochs,
                            progress=self.progress).get_artifact()
            b = run_baseline(self.spec.name, art, self.dataset, warmup_runs=self.req.warmup_runs,
                             latency_samples=self.req.latency_samples, threads=self.req.threads)
            self.sources[framework] = Source(framework, art, b)
        return self.sources[framework]

    # -- one combination -----------------------------------------------------
    def convert_cached(self, src: Source, combo: Combo) -> Artifact:
        key = stable_hash({"source": src.artifact.sha256, "format": combo.format, "quantize": combo.quantize,
                           "calibration": self.calibration_sha256,
                           "versions": {p: package_version(p) for p in PACKAGES}})
        out = self.ws.artifact_dir(key)
        meta = out / "artifact.json"
        if meta.exists():
            return Artifact.load(meta)
        fresh_dir(out)
        calib = self.dataset.in_layout(self.calibration_set, src.artifact.layout)
        return self.converter.convert(src.artifact, combo.format, combo.quantize, out, calib)

    @cached_property
    def calibration_sha256(self) -> str:
        return hashlib.sha256(self.calibration_set.tobytes()).hexdigest()

    @cached_property
    def calibration_set(self) -> np.ndarray:
        if len(self.dataset.x_train):
            return self.dataset.calibration()
        # A user's npz without a training split: calibrate on test samples, and say so.
        self.calibration_note = ("int8 calibrated on the first 200 test samples: the .npz has no x_train; "
                                 "add x_train/y_train to calibrate on data the model is not scored on")
        return self.dataset.x_test[:200]

    def runtime_options(self, combo: Combo) -> dict[str, Any]:
        req = self.req
        opts: dict[str, Any] = {"threads": req.threads, "warmup_runs": req.warmup_runs,
                                "latency_samples": req.latency_samples, "timeout_s": req.timeout_s}
        if combo.target == "web":
            opts["backend"] = combo.backend
        if combo.target == "android":
            # benchmark_model prints summaries, not per-run times: each latency sample is its own run
            return {"serial": combo.device, "delegate": combo.backend, "threads": req.threads,
                    "benchmark_binary": str(req.benchmark_binary) if req.benchmark_binary else None,
                    "timeout_s": req.timeout_s, "warmup_runs": req.warmup_runs,
                    "latency_runs": req.latency_samples}
        return opts

    def run_combo(self, combo: Combo, key: str) -> Result:
        from deploytool import convert

        seconds: dict[str, float] = {}
        details: dict[str, Any] = {"stage_seconds": seconds}
        base = dict(run_id=self.run_id, combo_key=key, model=self.spec.name, dataset=self.dataset.name, combo=combo)
        artifact: Artifact | None = None
        try:
            plan = convert.plan(combo.framework, combo.format, combo.quantize)
            details["plan"] = asdict(plan)
            runtime_class(combo.target, convert.ARTIFACT_FORMAT[combo.format])  # not_applicable before converting
            src = self.source(combo.framework)
            t = time.perf_counter()
            artifact = self.convert_cached(src, combo)
            seconds["convert"] = time.perf_counter() - t
            details["artifact"] = artifact.to_json()
            t = time.perf_counter()
            with make_runtime(combo.target, artifact.format, **self.runtime_options(combo)) as rt:
                rt.load(artifact)
                outputs = rt.run(self.dataset.in_layout(self.dataset.x_test, artifact.layout))
            seconds["runtime"] = time.perf_counter() - t
        except StageFailed as e:
            if artifact is not None:
                details["artifact"] = artifact.to_json()
            return Result(**base, status=e.status, reason=e.reason, details=details)
        except (HarnessMissing, DeviceNotFound):
            raise  # the machine lacks something every combination of this target needs: one line, exit 2
        except OSError as e:
            if self._workspace_fault(e):
                raise  # the workspace itself failed (full, read-only): the run stops, resumable
            details["traceback"] = traceback.format_exc(limit=20)
            return Result(**base, status="error", reason=f"{type(e).__name__}: {e}", details=details)
        except DeploytoolError as e:
            # A user-level problem confined to this combination (e.g. a device refusing one model).
            return Result(**base, status="error", reason=str(e), details=details)
        except Exception as e:  # a crash inside a converter or runtime is a finding, not the end of the run
            details["traceback"] = traceback.format_exc(limit=20)
            return Result(**base, status="error", reason=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                          details=details)
        t = time.perf_counter()
        result = self.judge(combo, base, src, artifact, outputs, details)
        seconds["compare"] = time.perf_counter() - t
        return result

    def judge(self, combo: Combo, base: dict[str, Any], src: Source, artifact: Artifact, outputs: Any,
              details: dict[str, Any]) -> Result:
        b = src.baseline
        lat = outputs.latency
        tol = self.tolerances["none" if combo.quantize == "none" else "quantized"]
        c = compare(outputs.outputs, b.outputs(), self.dataset.y_test, tol,
                    latency_p50_ms=lat.p50_ms, latency_p90_ms=lat.p90_ms,
                    baseline_p50_ms=b.latency["p50_ms"], baseline_p90_ms=b.latency["p90_ms"],
                    memory_bytes=outputs.memory_bytes, baseline_memory_bytes=b.memory_bytes,
                    size_bytes=artifact.size_bytes, baseline_size_bytes=b.size_bytes)
        out_path = self.ws.outputs_path(self.run_id, base["combo_key"])
        out_path.parent.mkdir(parents=True, exist_ok=True)
        np.save(out_path, outputs.outputs)
        lat_path = out_path.with_suffix(".latency.npy")
        np.save(lat_path, outputs.latency_ms)
        mem = primary_memory(outputs.memory_bytes)
        metrics = {
            "accuracy": c.accuracy, "baseline_accuracy": c.baseline_accuracy,
            "accuracy_delta_points": c.accuracy_delta_points, "agreement": c.agreement,
            "flipped_count": len(c.flipped), "max_abs_error": c.max_abs_error, "mean_abs_error": c.mean_abs_error,
            "p50_ms": lat.p50_ms, "p90_ms": lat.p90_ms, "p99_ms": lat.p99_ms, "mean_ms": lat.mean_ms,
            "latency_samples": lat.n, "latency_ratio_p50": c.latency_ratio_p50, "latency_ratio_p90": c.latency_ratio_p90,
            "memory_bytes": mem[1] if mem else None, "memory_ratio": c.memory_ratio,
            "size_bytes": artifact.size_bytes, "size_ratio": c.size_ratio,
            "load_ms": outputs.load_ms, "first_inference_ms": outputs.first_inference_ms,
            "throughput_sps": outputs.throughput_sps,
        }
        notes = list(artifact.notes) + list(outputs.notes)
        if getattr(self, "calibration_note", None) and combo.quantize in ("int8", "int8-io"):
            notes.append(self.calibration_note)
        details.update(comparison=c.to_json(), memory_bytes=outputs.memory_bytes, environment=outputs.environment,
                       notes=notes, tolerances={k: list(v) for k, v in tol.items()},
                       latency_samples_path=str(lat_path), baseline_framework=src.framework)
        return Result(**base, status="measured", verdict=c.verdict, metrics=metrics, details=details,
                      outputs_path=str(out_path))

    # -- the run ---------------------------------------------------------------
    def run(self) -> RunOutcome:
        from tqdm import tqdm

        t_start = time.perf_counter()
        self.prepare()
        keys = {c: self.combo_key(c) for c in self.combos}
        done = self.store.final_keys(self.run_id)
        self.store.start_run(self.run_id, self.spec.name, {**self.req.describe(), "host": host_facts(),
                                                          "browser_build": self.browser_build,
                                                          "combos": len(self.combos)})
        todo = [c for c in self.combos if keys[c] not in done]
        reused = len(self.combos) - len(todo)
        if reused:
            self.log(f"run {self.run_id}: {reused} of {len(self.combos)} combinations already measured; "
                     f"running the other {len(todo)}")
        in_runtimes = converting = 0.0
        bar = tqdm(todo, desc="migrate", unit="combo", disable=not self.progress, dynamic_ncols=True)
        self.converter = IsolatedConverter(self.ws.root / "logs" / f"convert-{self.run_id}.log", self.req.timeout_s)
        try:
            for combo in bar:
                bar.set_postfix_str(combo.label, refresh=True)
                result = self.run_combo(combo, keys[combo])
                if result.failing:
                    self.write_bundle(result)
                t = time.perf_counter()
                result.details["stage_seconds"]["store"] = 0.0
                self.store.save(self._for_store(result))
                result.details["stage_seconds"]["store"] = time.perf_counter() - t
                in_runtimes += result.details["stage_seconds"].get("runtime", 0.0)
                converting += result.details["stage_seconds"].get("convert", 0.0)
            if self.req.localize:
                self.localize_failures(self.stored_results(), self.converter)
        except (KeyboardInterrupt, DeploytoolError):
            self._interrupted()
            raise
        except OSError as e:
            if not self._workspace_fault(e):
                raise
            self._interrupted()
            raise WorkspaceError(f"the workspace {self.ws.root} failed mid-run ({e.strerror or type(e).__name__}: "
                                 f"{e.filename}); results measured so far are kept: free space or fix permissions, "
                                 "then run the same command again to resume") from None
        finally:
            bar.close()
            self.converter.close()
        self.store.finish_run(self.run_id)
        results = self.stored_results()
        order = {keys[c]: i for i, c in enumerate(self.combos)}
        results = sorted((r for r in results if r.combo_key in order), key=lambda r: order[r.combo_key])
        t = time.perf_counter()
        paths = self.write_report(results)
        t_report = time.perf_counter() - t
        return RunOutcome(self.run_id, results, paths, reused, time.perf_counter() - t_start,
                          in_runtimes, converting, t_report)

    def _interrupted(self) -> None:
        """Mark the run interrupted when the store still answers; a store that fails says so itself."""
        try:
            self.store.finish_run(self.run_id, "interrupted")
        except DeploytoolError:
            pass

    def _workspace_fault(self, e: OSError) -> bool:
        """An OSError about a file of the workspace (full disk, read-only, removed folder)."""
        name = e.filename or ""
        try:
            real = Path(os.path.realpath(name)) if name else None
        except (OSError, ValueError):
            return False
        return real is not None and (real == self.ws.root or self.ws.root in real.parents)

    def _for_store(self, result: Result) -> Result:
        """The row as the store keeps it: workspace files by their workspace-relative path, so it means the
        same from any directory and names nothing on this host's disk."""
        details = dict(result.details)
        for k in ("latency_samples_path", "bundle"):
            if details.get(k):
                details[k] = self.ws.relative(Path(details[k]))
        return replace(result, details=details,
                       outputs_path=self.ws.relative(Path(result.outputs_path)) if result.outputs_path else "")

    def stored_results(self) -> list[Result]:
        """This run's rows from the store, with workspace files resolved to absolute paths."""
        out = []
        for r in self.store.results_for(self.run_id):
            details = dict(r.details)
            for k in ("latency_samples_path", "bundle"):
                if details.get(k):
                    details[k] = str(self.ws.absolute(details[k]))
            out.append(replace(r, details=details,
                               outputs_path=str(self.ws.absolute(r.outputs_path)) if r.outputs_path else ""))
        return out

    def localize_failures(self, results: list[Result], converter: IsolatedConverter,
                          only: str | None = None) -> list[tuple[Result, Any]]:
        """Localize each failing row (of a zoo model) and attach the finding to its bug bundle."""
        from deploytool.localize import attach_to_bundle, localize

        done: list[tuple[Result, Any]] = []
        if self.user_artifact is not None:
            self.log("localization cuts a zoo model along its layer plan; a model file has none: skipped")
            return done
        for r in results:
            if not r.failing or (only and only not in r.combo.label):
                continue
            self.log(f"localizing {r.combo.label} ...")
            loc = localize(self, r, converter)
            if not r.details.get("bundle"):
                self.write_bundle(r)
                self.store.save(self._for_store(r))
            if r.details.get("bundle"):
                attach_to_bundle(loc, Path(r.details["bundle"]))
            loc.discard()
            self.log(f"{r.combo.label}: {loc.verdict}\n{loc.table()}")
            done.append((r, loc))
        return done

    def reproduce_command(self, c: Combo) -> list[str]:
        """`deploytool migrate` for this one combination with every option that shaped its row, as argv:
        quoted with shlex.join wherever it is shown, it runs as written from any directory."""
        req = self.req
        args = ["deploytool", "migrate", "--model"]
        if self.user_artifact is not None:
            # the workspace's content-addressed copy: the very bytes that were measured
            args += [str(Path(self.user_artifact.path).absolute()), "--data", str(req.test_npz),
                     "--layout", self.user_artifact.layout, "--scale", repr(req.scale),
                     "--mean", ",".join(map(repr, req.mean)), "--std", ",".join(map(repr, req.std))]
            if req.labels:
                args += ["--labels", ",".join(req.labels)]
        else:
            args += [req.model, "--framework", c.framework]
            if req.data_dir:
                args += ["--data-dir", str(req.data_dir)]
            if req.test_npz:
                args += ["--data", str(req.test_npz)]
            if req.epochs:
                args += ["--epochs", str(req.epochs)]
        args += ["--format", c.format, "--quantize", c.quantize, "--target", c.target]
        if c.target == "web":
            args += ["--backend", c.backend]
        if c.target == "android":
            args += ["--device", c.device, "--delegate", c.backend]
            if req.benchmark_binary:
                args += ["--benchmark-model", str(req.benchmark_binary)]
        args += ["--threads", str(req.threads), "--warmup", str(req.warmup_runs), "--timeout", repr(req.timeout_s)]
        if req.latency_samples is not None:
            args += ["--latency-samples", str(req.latency_samples)]
        if req.limit_test is not None:
            args += ["--test-samples", str(req.limit_test)]
        tol = self.tolerances["none" if c.quantize == "none" else "quantized"]
        for metric, (pass_limit, fail_limit) in sorted(tol.items()):
            args += ["--tolerance", f"{metric}={pass_limit!r},{fail_limit!r}"]
        return args + ["--workspace", str(self.ws.root), "--fresh"]

    def write_bundle(self, result: Result) -> None:
        """A reproducer for a failing row (bugreport.py); a fault here never costs the row."""
        from deploytool.bugreport import write_bundle

        src = self.sources.get(result.combo.framework)
        if src is None:
            return
        c = result.combo
        layout = (result.details.get("artifact") or {}).get("layout") or src.artifact.layout
        command = shlex.join(self.reproduce_command(c))
        try:
            path = write_bundle(result, self.ws.report_dir(self.run_id) / "bugs",
                                x_test=self.dataset.in_layout(self.dataset.x_test, layout),
                                baseline_outputs=src.baseline.outputs(), source=src.artifact,
                                versions=host_facts()["versions"], command=command)
            result.details["bundle"] = str(path)
        except Exception as e:  # noqa: BLE001 - the measurement stands even if its reproducer cannot be written
            result.details["bundle_error"] = f"{type(e).__name__}: {e}"

    def write_report(self, results: list[Result]):  # noqa: ANN201
        from deploytool import report

        for fw in {r.combo.framework for r in results}:
            self.source(fw)  # cached: the baseline is needed for the report even on a resumed run
        history = self.store.history(self.spec.name, [r.combo_key for r in results], self.run_id)
        inp = report.ReportInput(
            run_id=self.run_id, model=self.spec.name, dataset=self.dataset.name,
            run_info={**self.req.describe(), "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      "host": host_facts(), "dataset_sha256": self.dataset.sha256, "dataset_origin": self.dataset.origin},
            results=results, baselines={fw: asdict(s.baseline) for fw, s in self.sources.items()},
            labels=list(self.spec.labels), y_true=self.dataset.y_test,
            images=self.dataset.images(self.dataset.x_test), history=history)
        return report.write_report(inp, self.ws.report_dir(self.run_id))


def _pipeline_for(run: dict[str, Any], store: Store, ws: Workspace, log: Callable[[str], None] = print) -> Pipeline:
    """A prepared Pipeline for a stored run, rebuilt from its recorded request."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(MigrateRequest)}
    kw = {k: v for k, v in (run.get("request") or {}).items() if k in names}
    for k in ("data_dir", "test_npz", "benchmark_binary"):
        if kw.get(k):
            kw[k] = Path(kw[k])
    for k in ("frameworks", "formats", "quantize", "targets", "backends", "devices", "labels", "mean", "std"):
        if k in kw:
            kw[k] = tuple(kw[k])
    if "tolerances" in kw:
        kw["tolerances"] = {m: tuple(v) for m, v in kw["tolerances"].items()}
    p = Pipeline(MigrateRequest(**kw), ws, store, progress=False, log=log)
    p.prepare(with_devices=False)
    p.run_id = run["run_id"]
    p.browser_build = (run.get("request") or {}).get("browser_build", "")
    return p


def rebuild_report(run: dict[str, Any], store: Store, ws: Workspace) -> tuple[Any, list[Result]]:
    """Write the report of a stored run again, from the database and the workspace."""
    p = _pipeline_for(run, store, ws)
    results = p.stored_results()
    return p.write_report(results), results


def localize_run(run: dict[str, Any], store: Store, ws: Workspace, only: str | None = None,
                 log: Callable[[str], None] = print) -> list[tuple[Result, Any]]:
    """Localize the failing rows of a stored run (optionally those whose label contains `only`)."""
    p = _pipeline_for(run, store, ws, log)
    with IsolatedConverter(ws.root / "logs" / f"localize-{run['run_id']}.log", p.req.timeout_s) as conv:
        found = p.localize_failures(p.stored_results(), conv, only)
    if not found:
        raise UnknownOption(f"run {run['run_id']} has no failing row" + (f" matching {only!r}" if only else "")
                            + " to localize; `deploytool report RUN` lists its rows")
    p.write_report(p.stored_results())
    return found


def migrate(req: MigrateRequest, workspace: str | Path | None = None, db_url: str | None = None,
            progress: bool = True, log: Callable[[str], None] = print) -> RunOutcome:
    ws = Workspace.open(workspace)
    store = open_store(db_url, ws.default_db_url)
    return Pipeline(req, ws, store, progress, log).run()
