"""TEST DOUBLES for the Android target (no phone exists on the test machine):

- `adbd.DeviceSimulator`: a simulated phone that speaks the ADB transport
  protocol to the real adb server (`adb connect 127.0.0.1:PORT`).
- `benchmark_model_double.py`: stands in for TFLite's benchmark_model binary,
  with its flags and output lines, running the model with the LiteRT
  interpreter on the host (real inference, real numbers).
- `models.build`: tiny real TFLite models for the tests.

Nothing here may be imported by the deploytool package.
"""

from pathlib import Path

from .adbd import DeviceSimulator, wait_for_state

BENCHMARK_MODEL_DOUBLE = Path(__file__).with_name("benchmark_model_double.py")

__all__ = ["BENCHMARK_MODEL_DOUBLE", "DeviceSimulator", "wait_for_state"]
