"""Unit tests for deploytool.report: a synthetic run (numpy outputs judged by the
real `compare`, latency sample files, flipped samples, failed combinations,
history) is written to a tmp dir and every output form is checked by parsing
it back — JSON schema, Markdown table, JUnit counts, PNG bytes, SVG XML, HTML
self-containment — plus the time budget of the whole report.
"""

from __future__ import annotations

import json
import re
import struct
import time
from typing import Any
import xml.etree.ElementTree as ET
import zlib
from dataclasses import asdict, replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from deploytool.run.baseline import Baseline
from deploytool.artifact import Artifact
from deploytool.run.compare import Costs
from tests.scores import compare
from deploytool.report import ReportInput, summary_rows, write_report
from deploytool.report import png, svg, text
from deploytool.result import Combo, Measurement, Result, StageTimes, Status
from deploytool.workspace import stable_hash

TOL_NONE = {"accuracy_drop_points": (0.1, 0.5), "agreement": (0.999, 0.99), "max_abs_error": (1e-4, 1e-2)}
TOL_QUANT = {"accuracy_drop_points": (0.5, 1.0), "agreement": (0.98, 0.95)}
NOISE = {"none": 1e-7, "fp16": 2e-3, "dynamic": 0.05, "int8": 0.12, "uint8": 0.08}
SIZE_FACTOR = {"none": 1.0, "fp16": 0.5, "dynamic": 0.27, "int8": 0.26, "uint8": 0.27}
LABELS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
ANSI_REASON = "\x1b[31mConverterError\x1b[0m: op <Gather|x> & 'quotes' not supported\n  at line 3\n  at line 4"


def _images(rng: np.random.Generator, y: np.ndarray, side: int, channels: int) -> np.ndarray:
    """Class-dependent strokes so a flipped sample's picture says which class it is."""
    n = len(y)
    img = rng.uniform(0, 0.15, (n, side, side, channels)).astype(np.float32)
    for k in range(10):
        idx = y == k
        c = 3 + int(k * (side - 8) / 9)
        img[idx, 4:side - 4, c:c + 3, :] = 0.95
        img[idx, 4 + 2 * k % (side - 10):6 + 2 * k % (side - 10), 3:side - 3, :] = 0.7
    return img


def make_input(tmp: Path, *, n_samples: int = 400, n_rows: int | None = None, rgb: bool = False,
               with_history: bool = True, seed: int = 0) -> ReportInput:
    """A whole synthetic run: keras baseline, matrix of measured rows judged by the real compare(), failures."""
    rng = np.random.default_rng(seed)
    tmp.mkdir(parents=True, exist_ok=True)
    n_cls = 10
    y = rng.integers(0, n_cls, n_samples)
    logits = rng.normal(0, 1, (n_samples, n_cls)).astype(np.float32)
    logits[np.arange(n_samples), y] += 4.0
    base_out = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.save(tmp / "baseline_outputs.npy", base_out)
    base_lat = rng.lognormal(np.log(0.2), 0.15, n_samples)
    np.save(tmp / "baseline_latency_ms.npy", base_lat)
    base_mem = {"process_peak_rss_delta_bytes": 30e6, "process_peak_rss_bytes": 600e6}
    base_size = 250_000
    p50, p90 = np.percentile(base_lat, [50, 90])
    baseline = Baseline(
        model="lenet5", framework="keras", artifact_sha256="ab" * 32, dataset_sha256="cd" * 32,
        accuracy=float(np.mean(base_out.argmax(1) == y)), num_samples=n_samples,
        outputs_path=str(tmp / "baseline_outputs.npy"), latency_samples_path=str(tmp / "baseline_latency_ms.npy"),
        latency={"n": n_samples, "mean_ms": float(base_lat.mean()), "p50_ms": float(p50), "p90_ms": float(p90),
                 "p99_ms": float(np.percentile(base_lat, 99)), "min_ms": float(base_lat.min()),
                 "max_ms": float(base_lat.max())},
        throughput_sps=9000.0, memory_bytes=base_mem, load_ms=120.0, first_inference_ms=3.0, size_bytes=base_size,
        provenance={"python": "3.11.2", "versions": {"tensorflow": "2.19.0", "numpy": "1.26.4"}},
    )
    combos = [Combo("keras", f, q, t, backend=b)
              for t, b in (("host", ""), ("web", "wasm"), ("web", "webgl"))
              for f, qs in (("tflite", ("none", "fp16", "dynamic", "int8")), ("tfjs_graph", ("none", "fp16", "uint8")),
                            ("onnx", ("none", "dynamic", "int8")))
              for q in qs]
    if n_rows is not None:
        while len(combos) < n_rows:  # more devices for a bigger matrix
            combos += [Combo(c.framework, c.format, c.quantize, "android", device=f"emu-{len(combos)}", backend="cpu")
                       for c in combos[: n_rows - len(combos)]]
        combos = combos[:n_rows]
    results = []
    for i, c in enumerate(combos):
        key = stable_hash({"model": "lenet5", **asdict(c)})
        base: dict[str, Any] = dict(run_id="run-1", combo_key=key, model="lenet5", dataset="mnist", combo=c)
        if c.format == "tfjs_graph" and c.backend == "webgl" and c.quantize == "uint8":
            results.append(Result(**base, status=Status.CONVERSION_FAILED, reason=ANSI_REASON, times=StageTimes(convert=1.5)))
            continue
        if c.format == "onnx" and c.target == "web" and c.backend == "webgl":
            results.append(Result(**base, status=Status.NOT_APPLICABLE, reason="onnx has no webgl backend here | use wasm"))
            continue
        if c.format == "tflite" and c.backend == "webgl" and c.quantize == "int8":
            results.append(Result(**base, status=Status.RUNTIME_FAILED, reason="page crashed: Out of memory",
                                  times=StageTimes(convert=0.1, runtime=2.0)))
            continue
        noise = NOISE[c.quantize] * (3 if c.backend == "webgl" else 1)
        out = (base_out + rng.normal(0, noise, base_out.shape)).astype(np.float32)
        lat = rng.lognormal(np.log(0.2 * (8 if c.backend == "webgl" else 1.3 if c.target == "web" else 0.9)),
                            0.3, n_samples)
        lat_path = tmp / f"{key}.latency.npy"
        np.save(lat_path, lat)
        size = int(base_size * SIZE_FACTOR[c.quantize])
        mem = {"process_peak_rss_delta_bytes": 12e6 + 1e5 * i} if c.target == "host" else \
            {"renderer_peak_rss_bytes": 180e6, "js_heap_bytes": 5e6}
        tol = TOL_NONE if c.quantize == "none" else TOL_QUANT
        lp50, lp90 = np.percentile(lat, [50, 90])
        cmp_ = compare(out, base_out, y, tol, costs=Costs(float(lp50), float(lp90), mem, size),
                       baseline_costs=Costs(float(p50), float(p90), base_mem, base_size))
        measurement = Measurement(p50_ms=float(lp50), p90_ms=float(lp90), p99_ms=float(np.percentile(lat, 99)),
                                  mean_ms=float(lat.mean()), latency_samples=n_samples, memory_bytes=mem, load_ms=40.0,
                                  first_inference_ms=2.0)
        notes = ["TF.js has no int8 activations: weights quantized to uint8"] if c.format == "tfjs_graph" and \
            c.quantize == "uint8" else []
        if c.backend == "webgl":
            notes.append("webgl ran on SwiftShader (software)")
        artifact = Artifact(path=Path(f"/ws/artifacts/{key}/model"), format=c.format, framework="keras", layout="NHWC",
                            input_shape=(28, 28, 1), num_outputs=10, quantize=c.quantize,
                            converter="tf.lite.TFLiteConverter", converter_version="2.19.0",
                            options={"optimizations": ["DEFAULT"]}, sha256=f"{i:064x}", size_bytes=size,
                            notes=tuple(notes[:1]))
        results.append(Result(**base, status=Status.MEASURED, comparison=cmp_, measurement=measurement, artifact=artifact,
                              environment={"runtime": c.target, "browser": "Chromium 156" if c.target == "web" else None,
                                           "threads": 1},
                              notes=notes, tolerances=dict(tol),
                              times=StageTimes(convert=0.01, runtime=0.8, compare=0.002, store=0.003),
                              latency_path=str(lat_path), outputs_path=str(tmp / f"{key}.npy")))
    history = {}
    if with_history:
        # the earlier run had the tflite/dynamic host row at 100%: any drop must be flagged
        prev = next(r for r in results if r.combo.format == "tflite" and r.combo.quantize == "dynamic"
                    and r.combo.target == "host")
        assert prev.comparison is not None
        history[prev.combo_key] = replace(prev, run_id="run-0",
                                          comparison=replace(prev.comparison, accuracy=1.0, verdict="pass"))
        same = next(r for r in results if r.combo.format == "onnx" and r.combo.quantize == "none"
                    and r.combo.target == "host")
        history[same.combo_key] = replace(same, run_id="run-0")
    side, ch = (32, 3) if rgb else (28, 1)
    return ReportInput(
        run_id="run-1", model="lenet5", dataset="mnist",
        run_info={"created_at": "2025-01-02T03:04:05+00:00", "frameworks": ["keras"],
                  "formats": ["tflite", "tfjs_graph", "onnx"], "quantize": ["all"], "targets": ["host", "web"],
                  "host": {"cpu_model": "Test CPU", "cpu_count": 2, "platform": "Linux",
                           "versions": {"onnxruntime": "1.22.0"}}},
        results=results, baselines={"keras": asdict(baseline)}, labels=LABELS, y_true=y,
        images=_images(rng, y, side, ch), history=history)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    inp = make_input(tmp / "data")
    paths = write_report(inp, tmp / "out")
    return inp, paths


def _expected_failing(inp: ReportInput) -> list[Result]:
    return [r for r in inp.results if r.failing]


# ------------------------------------------------------------------ rows
def test_summary_rows_are_in_reading_order_and_carry_the_derived_words(written):
    inp, _ = written
    rows = summary_rows(inp)
    assert len(rows) == len(inp.results)
    keys = [(r.target, r.backend) for r in rows if r.format == "tflite"]
    quants = [r.quantize for r in rows if r.format == "tflite" and r.target == "host"]
    assert quants == ["none", "fp16", "dynamic", "int8"], quants
    assert keys  # tflite rows exist on every target
    formats = [r.format for r in rows]
    assert formats.index("tflite") < formats.index("tfjs_graph") < formats.index("onnx")
    host = next(r for r in rows if r.target == "host" and r.status == "measured")
    assert host.memory_figures == ("process_peak_rss_delta_bytes", "process_peak_rss_delta_bytes")
    web = next(r for r in rows if r.target == "web" and r.status == "measured")
    assert web.memory_figures is not None and web.memory_figures[0] == "renderer_peak_rss_bytes"
    for r in rows:
        res = next(x for x in inp.results if x.combo_key == r.combo_key)
        assert r.failing == res.failing
        broken = [c for c in (res.comparison.checks if res.comparison is not None else []) if c.outcome != "pass"]
        assert len(r.broken) == len(broken)
        for desc, c in zip(r.broken, broken):
            assert desc.startswith(c.metric) and c.outcome in desc
    int8 = next(r for r in rows if r.quantize == "int8" and r.target == "host" and r.format == "tflite")
    assert int8.verdict in ("degraded", "fail") and int8.broken, "noisy int8 outputs must break a tolerance"
    assert "\x1b" not in "".join(r.reason for r in rows)


def test_regression_flags_come_from_history_only_where_something_got_worse(written):
    inp, _ = written
    rows = summary_rows(inp)
    flagged = {r.combo_key: r.regression for r in rows if r.regression}
    dyn = next(r for r in rows if r.format == "tflite" and r.quantize == "dynamic" and r.target == "host")
    same = next(r for r in rows if r.format == "onnx" and r.quantize == "none" and r.target == "host")
    assert dyn.accuracy is not None
    if dyn.accuracy < 1.0:
        assert any("accuracy 100.00%" in x and "run-0" in x for x in flagged[dyn.combo_key])
    assert same.combo_key not in flagged  # identical history: nothing got worse
    assert set(flagged) <= set(inp.history)
    # a combination that was measured before and failed now is a regression too
    failed = next(r for r in inp.results if r.status == "runtime_failed")
    earlier = next(r for r in inp.results if r.verdict == "pass")
    inp2 = ReportInput(**{**inp.__dict__, "history": {failed.combo_key: replace(
        earlier, run_id="run-0", combo_key=failed.combo_key, combo=failed.combo)}})
    row = next(r for r in summary_rows(inp2) if r.combo_key == failed.combo_key)
    assert row.regression == ("was measured (pass) in run run-0, now runtime_failed",)


# ------------------------------------------------------------------ JSON
def test_json_has_the_versioned_schema_and_stable_keys(written):
    inp, paths = written
    doc = json.loads(paths.json.read_text())  # strict: allow_nan=False on write
    assert list(doc) == ["schema_version", "run_id", "model", "dataset", "created_at", "run_info", "baselines",
                         "results", "summary"]
    assert doc["schema_version"] == 1 and doc["run_id"] == "run-1" and doc["created_at"].startswith("2025-01-02")
    assert set(doc["baselines"]["keras"]) == {"accuracy", "latency", "memory_bytes", "size_bytes"}
    assert len(doc["results"]) == len(inp.results)
    for r in doc["results"]:
        assert tuple(r) == text.RESULT_KEYS
        assert tuple(r["artifact"]) == text.ARTIFACT_KEYS
    measured = [r for r in inp.results if r.status == "measured"]
    s = doc["summary"]
    assert s["rows"] == len(inp.results) and s["measured"] == len(measured)
    for v in ("pass", "degraded", "fail"):
        assert s[v] == sum(r.verdict == v for r in measured)
    assert s["failed_statuses"] == sum(r.status in ("conversion_failed", "runtime_failed") for r in inp.results)
    assert s["overall"] == "fail"
    by_key = {r["combo_key"]: r for r in doc["results"]}
    for res in measured:
        assert len(by_key[res.combo_key]["flipped"]) == res.metrics["flipped_count"]
        assert by_key[res.combo_key]["checks"] == [asdict(c) for c in res.comparison.checks]


def test_json_turns_non_finite_numbers_into_null(tmp_path):
    inp = make_input(tmp_path / "d", n_samples=60, n_rows=4, with_history=False)
    r = next(x for x in inp.results if x.status == "measured")
    assert r.comparison is not None
    r.comparison = replace(r.comparison, max_abs_error=float("inf"), latency_ratio_p50=float("nan"))
    paths = write_report(inp, tmp_path / "out")
    doc = json.loads(paths.json.read_text())
    m = next(x for x in doc["results"] if x["combo_key"] == r.combo_key)["metrics"]
    assert m["max_abs_error"] is None and m["latency_ratio_p50"] is None  # numbers or null, never strings
    assert "NaN" not in paths.json.read_text()
    assert "<td class=\"n\" data-v=\"\">n/a</td>" in paths.html.read_text()


# ------------------------------------------------------------------ Markdown
def test_markdown_has_title_verdict_line_table_and_failures(written):
    inp, paths = written
    md = paths.markdown.read_text()
    lines = md.splitlines()
    assert lines[0].startswith("### deploytool: lenet5 on mnist") and "run-1" in lines[0]
    assert "FAIL" in lines[2] and f"{len(inp.results)} rows" in lines[2]
    table = [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| combination")]
    assert len(table) == len(inp.results)
    assert all(ln.count(" | ") == 9 for ln in table), "a reason with '|' must not add a column"
    fail_block = md.split("**Failures**")[1]
    for r in _expected_failing(inp):
        assert r.combo.label in fail_block
    assert "ConverterError: op &lt;Gather\\|x> &amp; 'quotes'" in fail_block and "\x1b" not in md  # markup made inert


# ------------------------------------------------------------------ JUnit
def test_junit_parses_and_counts_failures_and_skips(written):
    inp, paths = written
    root = ET.parse(paths.junit).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == len(inp.results) == int(suite.attrib["tests"])
    n_fail = len(_expected_failing(inp))
    n_skip = sum(r.status in ("not_applicable", "unsupported") for r in inp.results)
    assert sum(c.find("failure") is not None for c in cases) == n_fail == int(suite.attrib["failures"])
    assert sum(c.find("skipped") is not None for c in cases) == n_skip == int(suite.attrib["skipped"])
    failures = [f for c in cases if (f := c.find("failure")) is not None]
    conv = next(f for f in failures if f.get("type") == "conversion_failed")
    assert conv.attrib["message"].startswith("ConverterError: op <Gather|x>")
    verdict = [f for f in failures if f.get("type") == "verdict_fail"]
    assert len(verdict) == sum(r.verdict == "fail" for r in inp.results)
    for f in verdict:
        assert "→ fail" in f.attrib["message"]


# ------------------------------------------------------------------ PNG
def _decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    assert data[:8] == png.SIGNATURE
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        tag, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF, tag
        if tag == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    assert tag == b"IEND" and ihdr is not None
    w, h, depth, ctype = ihdr[:4]
    assert depth == 8
    return w, h, ctype, zlib.decompress(idat)


@pytest.mark.parametrize("shape,ctype", [((28, 28), 0), ((28, 28, 1), 0), ((32, 20, 3), 2), ((5, 7, 4), 6)])
def test_png_bytes_decode_to_the_same_pixels(shape, ctype):
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    w, h, t, raw = _decode_png(png.encode_png(a))
    c = 1 if a.ndim == 2 else a.shape[2]
    assert (w, h, t) == (shape[1], shape[0], ctype)
    assert len(raw) == h * (1 + w * c)
    rows = np.frombuffer(raw, np.uint8).reshape(h, 1 + w * c)
    assert (rows[:, 0] == 0).all()
    np.testing.assert_array_equal(rows[:, 1:].reshape(a.shape), a)


def test_png_thumbnail_scales_small_images_up_nearest_neighbour():
    img = np.zeros((28, 28, 1), np.float32)
    img[3, 5] = 1.0
    uri, w, h = png.thumbnail_uri(img)
    assert (w, h) == (56, 56) and uri.startswith("data:image/png;base64,")
    import base64

    _, _, _, raw = _decode_png(base64.b64decode(uri.split(",", 1)[1]))
    px = np.frombuffer(raw, np.uint8).reshape(56, 57)[:, 1:]
    assert px[6:8, 10:12].tolist() == [[255, 255], [255, 255]] and px.sum() == 4 * 255
    with pytest.raises(ValueError):
        png.encode_png(img)  # float pixels are refused, not silently truncated


# ------------------------------------------------------------------ SVG
def test_svg_plots_are_well_formed_xml_with_their_data_points():
    pts = [svg.Point(1e3 * 3 ** i, 90 + i, f"p{i}", f"point {i} <&>") for i in range(5)]
    pts.append(svg.Point(5e4, 95, "base", "baseline", baseline=True))
    root = ET.fromstring(svg.scatter(pts, title="t", x_label="size", y_label="acc", legend=[("tflite", "#000", "square")]))
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    marks = [e for e in root.iter() if "pt" in (e.get("class") or "").split()]
    assert len(marks) == 6 and sum("baseline" in (e.get("class") or "") for e in marks) == 1
    assert any("(log scale)" in (e.text or "") for e in root.iter(f"{ns}text")), "x spans 81x > 10: log scale"
    rng = np.random.default_rng(0)
    dists = [svg.Distribution(f"row {i}", svg.distribution_stats(rng.lognormal(i, 0.2, 500))) for i in range(4)]
    dists.append(svg.Distribution("summary", {"p50": 3.0, "p90": 4.0}, note="summary only"))
    root = ET.fromstring(svg.boxplot(dists, title="lat", x_label="ms"))
    assert len([e for e in root.iter(f"{ns}rect") if e.get("class") == "box"]) == 4
    assert len([e for e in root.iter(f"{ns}line") if e.get("class") == "median"]) == 5
    assert any("(log scale)" in (e.text or "") for e in root.iter(f"{ns}text"))
    cells: list[list[svg.Cell | None]] = [[svg.Cell("#fff", "+1", "a<b"), None], [svg.Cell("#000", "x", dark=True), svg.Cell("#eee")]]
    root = ET.fromstring(svg.heatmap(cells, ["r1", "r2"], ["c1", "c2"], title="h"))
    assert len([e for e in root.iter(f"{ns}g") if e.get("class") == "cell"]) == 3


def test_linear_axis_when_values_are_close():
    pts = [svg.Point(100 + i, 50 + i, "", "") for i in range(3)]
    root = ET.fromstring(svg.scatter(pts, title="t", x_label="x", y_label="y"))
    assert not any("(log scale)" in (e.text or "") for e in root.iter())
    assert svg.nice_ticks(0, 1, 5) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]


# ------------------------------------------------------------------ HTML
class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_is_self_contained_and_holds_every_section(written):
    inp, paths = written
    html = paths.html.read_text()
    p = _Collect()
    p.feed(html)
    for tag, attrs in p.tags:
        for a in ("src", "href"):
            v = attrs.get(a)
            if v is not None:
                assert v.startswith(("data:", "#")), f"external reference {tag} {a}={v[:60]}"
        assert tag not in ("link", "iframe", "object")
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    for sec in ("summary", "plots", "confusion", "gallery", "provenance"):
        assert f'<section id="{sec}">' in html
    summary = html.split('<table class="summary" data-task="classification">')[1].split("</table>")[0]
    assert summary.split("<tbody>")[1].count("<tr") == len(inp.results)
    flips = {r.combo_key: r.metrics["flipped_count"] for r in inp.results if r.status == "measured"}
    imgs = [a for t, a in p.tags if t == "img"]
    assert len(imgs) == sum(min(24, n) for n in flips.values())
    assert html.count('<table class="cm"') == min(12, sum(n > 0 for n in flips.values()))
    for s in re.findall(r"<svg .*?</svg>", html, flags=re.S):
        ET.fromstring(s)
    assert "renderer_peak_rss_bytes" in html and "SwiftShader" in html and "\x1b" not in html
    unlike = [r for r in summary_rows(inp) if r.memory_figures and r.memory_figures[1] and r.memory_figures[0] != r.memory_figures[1]]
    assert html.count('title="figures of different kinds">≠') == len(unlike)
    assert "&lt;Gather|x&gt;" in html  # a reason is escaped, never markup


XSS = "<script>alert(1)</script>"


def test_text_from_results_is_escaped_never_markup(tmp_path):
    inp = make_input(tmp_path / "d", n_samples=300, n_rows=6, with_history=False)
    inp.model = f"lenet{XSS}"
    inp.labels = [f"{name}{XSS}" for name in LABELS]
    inp.run_info["note"] = XSS
    res = next(r for r in inp.results if r.status == "measured" and r.comparison is not None and r.comparison.flipped)
    res.combo = replace(res.combo, device=XSS)  # the row label
    assert res.artifact is not None
    res.artifact = replace(res.artifact, path=Path(f"/ws/artifacts/{XSS}/model.tflite"))
    res.notes = [f"note {XSS}"]
    inp.results.append(Result(run_id="run-1", combo_key="failed", model=inp.model, dataset="mnist",
                              combo=Combo("keras", "onnx", "int8", "host"), status=Status.CONVERSION_FAILED,
                              reason=f"op {XSS} not supported", bundle='/ws/bugs/b"><img src=x onerror=alert(2)>'))
    html = write_report(inp, tmp_path / "out").html.read_text()
    assert html.count("<script") == 1 and "alert(1)</script>" not in html  # only the page's own script
    assert "<img src=x" not in html
    safe = "&lt;script&gt;alert(1)&lt;/script&gt;"
    for shown in (f"<title>deploytool · lenet{safe}", f"lenet{safe} <span", f"zero{safe}", f"on host@{safe}",
                  f"/ws/artifacts/{safe}/model.tflite", f"note {safe}", f"op {safe} not supported",
                  'href="bugs/b&#34;&gt;&lt;img src=x onerror=alert(2)&gt;/README.md"',
                  f"<td>{safe}</td>"):
        assert shown in html, shown
    for s in re.findall(r"<svg .*?</svg>", html, flags=re.S):
        ET.fromstring(s)  # labels inside the SVG tooltips are escaped by svg.py


def test_the_inline_script_is_allowed_by_its_hash_and_nothing_else(written):
    import base64
    import hashlib

    _, paths = written
    html = paths.html.read_text()
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert meta is not None
    csp = meta.group(1)
    (script,) = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and csp.count("unsafe-inline") == 1  # the styles only
    assert "addEventListener('click'" in script and "sort" in script


def test_confusion_difference_is_target_minus_baseline(tmp_path):
    inp = make_input(tmp_path / "d", n_samples=300, n_rows=4, with_history=False)
    res = next(r for r in inp.results if r.status == "measured" and r.metrics["flipped_count"])
    base = np.load(inp.baselines["keras"]["outputs_path"]).argmax(1)
    tgt = base.copy()
    assert res.comparison is not None
    for f in res.comparison.flipped:
        tgt[f.index] = f.target_pred
    cm = lambda pred: np.array([[np.sum((inp.y_true == i) & (pred == j)) for j in range(10)] for i in range(10)])
    want = cm(tgt) - cm(base)
    html = write_report(inp, tmp_path / "out").html.read_text()
    table = html.split(f'<table class="cm" data-combo="{res.combo_key}">')[1].split("</table>")[0]
    body = table.split("<tbody>")[1]
    got = []
    for tr in body.split("</tr>")[:-1]:
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", tr)[:-1]  # last cell is the class support
        got.append([int(c) if c else 0 for c in cells])
    np.testing.assert_array_equal(np.array(got), want)


def test_a_run_where_nothing_was_measured_still_reports(tmp_path):
    inp = make_input(tmp_path / "d", n_samples=50, n_rows=4, with_history=False)
    inp.results = [Result(run_id="run-1", combo_key=f"k{i}", model="lenet5", dataset="mnist",
                          combo=Combo("keras", "tflite", q, "host"), status=s, reason=f"reason {i}")
                   for i, (q, s) in enumerate([("none", Status.CONVERSION_FAILED), ("fp16", Status.UNSUPPORTED)])]
    paths = write_report(inp, tmp_path / "out")
    doc = json.loads(paths.json.read_text())
    assert doc["summary"]["measured"] == 0 and doc["summary"]["overall"] == "fail"
    html = paths.html.read_text()
    assert "No flipped samples" in html and "No measured row changed any top-1 prediction" in html
    assert html.count('class="pt baseline"') == 1 and 'class="pt"' not in html  # only the baseline is plotted
    root = ET.parse(paths.junit).getroot()
    assert root.get("failures") == "1" and root.get("skipped") == "1"


def test_terminal_table_lines_up(written):
    inp, _ = written
    rows = summary_rows(inp)
    out = text.plain_table(rows).splitlines()
    assert len(out) == len(inp.results) + 2 and out[0].startswith("combination")
    col = out[0].index("result")
    assert [ln[col:].split()[0] for ln in out[2:]] == [text.outcome(r) for r in rows]


# ------------------------------------------------------------------ time budget
def test_write_report_of_30_rows_by_2000_samples_is_under_half_a_second(tmp_path):
    inp = make_input(tmp_path / "d", n_samples=2000, n_rows=30)
    assert len(inp.results) == 30 and sum(r.status == "measured" for r in inp.results) >= 25
    write_report(inp, tmp_path / "warm")  # first call pays for imports and page cache
    times = []
    for i in range(2):
        t = time.perf_counter()
        write_report(inp, tmp_path / f"out{i}")
        times.append(time.perf_counter() - t)
    print(f"write_report 30 rows x 2000 samples: {min(times) * 1000:.0f} ms (runs: {[round(x, 3) for x in times]})")
    assert min(times) < 0.5


def test_report_reads_only_latency_sample_files(tmp_path, monkeypatch):
    inp = make_input(tmp_path / "d", n_samples=200, n_rows=8, with_history=False)
    loaded = []
    real_load = np.load

    def load(path, *a, **k):
        loaded.append(str(path))
        return real_load(path, *a, **k)

    monkeypatch.setattr(np, "load", load)
    write_report(inp, tmp_path / "out")
    measured = [r for r in inp.results if r.status == "measured"]
    assert sorted(loaded) == sorted([r.latency_path for r in measured]
                                    + [inp.baselines["keras"]["latency_samples_path"]])


def test_rgb_samples_become_rgb_png_thumbnails(tmp_path):
    import base64

    inp = make_input(tmp_path / "d", n_samples=300, n_rows=12, rgb=True, with_history=False)
    html = write_report(inp, tmp_path / "out").html.read_text()
    uris = re.findall(r'<img src="data:image/png;base64,([^"]+)" width="(\d+)" height="(\d+)"', html)
    assert uris
    w, h, ctype, raw = _decode_png(base64.b64decode(uris[0][0]))
    assert (w, h, ctype) == (64, 64, 2) and (uris[0][1], uris[0][2]) == ("64", "64")
    assert len(raw) == 64 * (1 + 64 * 3)


def test_a_removed_template_cache_folder_costs_a_compile_not_the_report(tmp_path, monkeypatch):
    import shutil

    import jinja2

    from deploytool.report.html import _bytecode_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = _bytecode_cache(jinja2)
    env = jinja2.Environment(loader=jinja2.DictLoader({"t": "{{ 1 + 1 }}"}), bytecode_cache=cache)
    shutil.rmtree(tmp_path / "cache")  # e.g. $HOME's cache removed while the process lives
    assert env.get_template("t").render() == "2"


def test_a_webgpu_row_beside_its_wasm_twin_shows_the_adapter_and_what_departs(tmp_path):
    inp = make_input(tmp_path / "data", with_history=False)
    wasm = next(r for r in inp.results if r.combo.backend == "wasm" and r.combo.format == "onnx"
                and r.combo.quantize == "none")
    assert wasm.comparison is not None
    gpu_env = {**wasm.environment, "gpu": "google swiftshader (fallback adapter)"}
    gpu = replace(wasm, combo=replace(wasm.combo, backend="webgpu"), combo_key="gpu-key", environment=gpu_env,
                  comparison=replace(wasm.comparison, agreement=0.885, max_abs_error=1.47, verdict="fail"),
                  notes=["webgpu ran on google swiftshader (fallback adapter): a software adapter on the CPU, so its "
                         "latency is not a GPU's"])
    paths = write_report(replace(inp, results=[*inp.results, gpu]), tmp_path / "out")
    html = paths.html.read_text()
    assert "Backends side by side" in html and "google swiftshader (fallback adapter)" in html
    assert "webgpu (88.5% agreement, max |error| 1.47) departs from the same file on wasm" in html
