"""deploytool: migrate a model from the PC to phones and browsers, run the same
test set there, and show what changed against the PC baseline.

This package must stay cheap to import: no TensorFlow, PyTorch or other heavy
library is imported at module level anywhere under `deploytool/` except inside
the function or module that needs it.
"""

import os

__version__ = "0.1.0"

# onnxruntime writes a device id and a telemetry database under ~/.cache/Microsoft and $TMPDIR/.ses unless told
# not to, in every process that imports it (this one, the runtime and conversion workers, which inherit it)
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
