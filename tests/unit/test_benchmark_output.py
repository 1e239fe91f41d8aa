"""Parsing of TFLite benchmark_model output, on transcripts in the formats the
real binary prints (tflite/tools/benchmark, tsl stats_calculator; see
../shared/notes/android.md): current builds with percentiles and the peak
memory monitor, older builds without the `INFO: ` prefix or percentiles,
refused delegates, a resize the model refuses, and the driver's own lines."""

from __future__ import annotations

import pytest

from deploytool.devices import benchmark_output as bo

XNNPACK_RUN = """\
INFO: STARTING!
INFO: Log parameter values verbosely: [0]
INFO: Min num runs: [50]
INFO: Num threads: [4]
INFO: Graph: [/data/local/tmp/deploytool/run-1a2b3c/mobilenet_v2.tflite]
INFO: Signature to run: []
INFO: #threads used for CPU inference: [4]
INFO: Use xnnpack: [1]
INFO: Report the peak memory footprint: [1]
INFO: Loaded model /data/local/tmp/deploytool/run-1a2b3c/mobilenet_v2.tflite
INFO: Created TensorFlow Lite XNNPACK delegate for CPU.
VERBOSE: Replacing 58 out of 58 node(s) with delegate (TfLiteXNNPackDelegate) node, yielding 1 partitions for the whole graph.
INFO: Explicitly applied XNNPACK delegate, and the model graph will be completely executed by the delegate.
INFO: The input model file size (MB): 13.9786
INFO: Initialized session in 3.337ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=9 first=81913 curr=55502 min=55502 max=81913 avg=58984.7 std=8115 p5=55502 median=56610 p95=81913

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=50 first=56576 curr=56299 min=54669 max=60236 avg=56265.8 std=982 p5=54911 median=56102 p95=58760

INFO: Inference timings in us: Init: 3337, First inference: 81913, Warmup (avg): 58984.7, Inference (avg): 56265.8
INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.
INFO: Memory footprint delta from the start of the tool (MB): init=2.1 overall=3.4
INFO: Overall peak memory footprint (MB) via periodic monitoring: 93.2383
INFO: Memory status at the end of exeution:
INFO: - VmRSS              : 88 MB
INFO: + RssAnnon           : 41 MB
INFO: + RssFile + RssShmem : 47 MB
"""

OLD_BUILD_SLOW_MODEL = """\
INFO: STARTING!
INFO: Graph: [/data/local/tmp/ssd_mobilenet_v2.tflite]
INFO: Use xnnpack: [0]
INFO: Loaded model /data/local/tmp/ssd_mobilenet_v2.tflite
INFO: The input model file size (MB): 67.3128
INFO: Initialized session in 6.418ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=1 curr=1041765

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=50 first=977738 curr=964908 min=911877 max=1112273 avg=971535 std=39112

INFO: Inference timings in us: Init: 6418, First inference: 1041765, Warmup (avg): 1.04176e+06, Inference (avg): 971535
INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.
INFO: Memory footprint delta from the start of the tool (MB): init=6.14844 overall=109.848
"""

UNPREFIXED_BUILD = """\
STARTING!
Graph: [/data/local/tmp/mobilenet_quant_v1_224.tflite]
Loaded model /data/local/tmp/mobilenet_quant_v1_224.tflite
Initialized session in 5.617ms.
Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
count=5 first=119340 curr=102705 min=102705 max=119340 avg=107466 std=6256

Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
count=50 first=103238 curr=102789 min=102639 max=103238 avg=102879 std=119

Inference timings in us: Init: 5617, First inference: 119340, Warmup (avg): 107466, Inference (avg): 102879
Memory footprint delta from the start of the tool (MB): init=5 overall=11.2695
"""

GPU_REFUSED = """\
INFO: STARTING!
INFO: Graph: [model.tflite]
INFO: Use gpu: [1]
INFO: Loaded model model.tflite
INFO: Created TensorFlow Lite delegate for GPU.
ERROR: TfLiteGpuDelegate Init: OpenCL library not loaded - dlopen failed: library "libOpenCL.so" not found
ERROR: Failed to apply GPU delegate.
ERROR: Benchmarking failed.
"""

NNAPI_ON_NO_NODE = """\
INFO: STARTING!
INFO: Graph: [model.tflite]
INFO: Use NNAPI: [1]
INFO: Loaded model model.tflite
INFO: Created TensorFlow Lite delegate for NNAPI.
INFO: Though NNAPI delegate is explicitly applied, the model graph will not be executed by the delegate.
INFO: The input model file size (MB): 0.061
INFO: Initialized session in 12.5ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=2000 first=310 curr=240 min=231 max=310 avg=245.1 std=9 p5=233 median=244 p95=262

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=4100 first=244 curr=241 min=229 max=420 avg=243.9 std=11 p5=232 median=242 p95=259

INFO: Inference timings in us: Init: 12500, First inference: 310, Warmup (avg): 245.1, Inference (avg): 243.9
"""

RESIZE_REFUSED = """\
INFO: STARTING!
INFO: Graph: [fixed.tflite]
INFO: Input layers: [serving_default_input:0]
INFO: Input shapes: [1000,28,28,1]
INFO: Loaded model fixed.tflite
ERROR: tensorflow/lite/kernels/reshape.cc:92 num_input_elements != num_output_elements (784000 != 784)
ERROR: Node number 0 (RESHAPE) failed to prepare.
ERROR: Failed to allocate tensors!
ERROR: Benchmarking failed.
"""

WRONG_INPUT_FILE = """\
INFO: STARTING!
INFO: Initialized session in 1.2ms.
FATAL: The size of batch_in.bin is 61440 bytes. It should be 256 bytes.
"""


def test_current_build_with_percentiles_and_peak_memory():
    r = bo.parse(XNNPACK_RUN)
    assert r.complete and not r.failed and r.errors == []
    assert (r.init_us, r.first_inference_us, r.warmup_avg_us, r.inference_avg_us) == (3337, 81913, 58984.7, 56265.8)
    assert r.session_init_ms == pytest.approx(3.337) and r.model_size_mb == pytest.approx(13.9786)
    assert r.warmup is not None and r.warmup.count == 9 and r.warmup.first_us == 81913
    inf = r.inference
    assert inf is not None
    assert (inf.count, inf.min_us, inf.max_us, inf.avg_us, inf.std_us) == (50, 54669, 60236, 56265.8, 982)
    assert (inf.p5_us, inf.median_us, inf.p95_us) == (54911, 56102, 58760)
    assert (r.footprint_delta_init_mb, r.footprint_delta_overall_mb) == (2.1, 3.4)
    assert r.peak_footprint_mb == pytest.approx(93.2383)
    assert r.delegates_created == ["XNNPACK"]
    assert r.delegate_applied == {"XNNPACK": "full"}
    assert r.delegated_nodes == {"TfLiteXNNPackDelegate": (58, 58)}
    assert bo.delegate_refusal(r, "xnnpack") is None and bo.delegate_refusal(r, "cpu") is None


def test_older_build_without_percentiles_and_scientific_notation():
    r = bo.parse(OLD_BUILD_SLOW_MODEL)
    assert r.warmup_avg_us == pytest.approx(1.04176e6) and r.inference_avg_us == 971535
    # "count=1 curr=X": the one warm-up run took X
    assert r.warmup is not None and r.inference is not None
    assert (r.warmup.count, r.warmup.avg_us, r.warmup.min_us, r.warmup.std_us) == (1, 1041765, 1041765, 0)
    assert r.inference.p95_us is None and r.inference.std_us == 39112
    assert r.peak_footprint_mb is None and r.footprint_delta_overall_mb == pytest.approx(109.848)


def test_build_without_log_prefix():
    r = bo.parse(UNPREFIXED_BUILD)
    assert r.complete and r.init_us == 5617 and r.inference_avg_us == 102879
    assert r.inference is not None and r.warmup is not None
    assert r.inference.count == 50 and r.warmup.count == 5
    assert r.footprint_delta_init_mb == 5


def test_all_same_stats_line():
    st = bo.parse_stats("count=20 curr=650(all same) p5=650 median=650 p95=650")
    assert st is not None
    assert (st.count, st.avg_us, st.min_us, st.max_us, st.median_us) == (20, 650, 650, 650, 650)
    zero = bo.parse_stats("count=0 p5=0 median=0 p95=0")
    assert zero is not None and zero.count == 0
    assert bo.parse_stats("Running benchmark") is None


def test_refused_gpu_delegate():
    r = bo.parse(GPU_REFUSED)
    assert r.failed and not r.complete and r.delegates_failed == ["GPU"]
    why = bo.delegate_refusal(r, "gpu")
    assert why is not None
    assert why.startswith("the device refused the GPU delegate") and "libOpenCL.so" in why
    assert bo.delegate_refusal(r, "nnapi") is None


def test_delegate_applied_to_no_node_is_a_refusal():
    r = bo.parse(NNAPI_ON_NO_NODE)
    assert r.complete and not r.failed and r.delegate_applied == {"NNAPI": "none"}
    why = bo.delegate_refusal(r, "nnapi")
    assert why is not None and "would run on the CPU" in why


def test_resize_refused_and_fatal_input_size():
    r = bo.parse(RESIZE_REFUSED)
    assert r.failed and r.allocate_failed and not r.complete
    assert r.first_error().startswith("tensorflow/lite/kernels/reshape.cc:92")
    f = bo.parse(WRONG_INPUT_FILE)
    assert f.failed and f.first_error() == "The size of batch_in.bin is 61440 bytes. It should be 256 bytes."


def test_driver_repeat_output_and_peak_rss_lines():
    one = XNNPACK_RUN + "Real time (s): 1.625000\nMax RSS (KiB): 93412\nMajor faults: 0\n"
    two = UNPREFIXED_BUILD + "VmHWM (KiB): 51200\n"
    text = f"=== deploytool run 0 ===\n{one}=== deploytool run 1 ===\n{two}"
    runs = bo.split_runs(text)
    assert len(runs) == 2
    a, b = (bo.parse(t) for t in runs)
    assert a.max_rss_kib == 93412 and a.vmhwm_kib is None and a.inference_avg_us == 56265.8
    assert b.vmhwm_kib == 51200 and b.max_rss_kib is None and b.inference_avg_us == 102879
    assert bo.split_runs("no separators here") == []
