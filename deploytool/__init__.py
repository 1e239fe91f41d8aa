"""deploytool: migrate a model from the PC to phones and browsers, run the same
test set there, and show what changed against the PC baseline.

This package must stay cheap to import: no TensorFlow, PyTorch or other heavy
library is imported at module level anywhere under `deploytool/` except inside
the function or module that needs it.
"""

__version__ = "0.1.0"
