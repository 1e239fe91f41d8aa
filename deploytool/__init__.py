"""deploytool: migrate a model from the PC to phones and browsers, run the same
test set there, and show what changed against the PC baseline.

This package must stay cheap to import: no TensorFlow, PyTorch or other heavy
library is imported at module level anywhere under `deploytool/` except inside
the function or module that needs it.

The Python API is `deploytool.api` (`migrate`, `load_run`, `findings`, `localize`, `Run`, `Row`) and the model-CI
helper `deploytool.testing.assert_migrates`, imported as modules (`import deploytool.api as dt`, `from deploytool
import api`), so importing the package alone costs what it did. They are not names of this package itself:
`deploytool.migrate` and `deploytool.localize` are the subpackages that do the work.
"""

import os

__version__ = "0.1.0"

# onnxruntime writes a device id and a telemetry database under ~/.cache/Microsoft and $TMPDIR/.ses unless told
# not to, in every process that imports it (this one, the runtime and conversion workers, which inherit it)
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

