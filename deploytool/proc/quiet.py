"""Import TensorFlow without its start-up chatter on the user's terminal.

TensorFlow 2.19 prints a dozen native log lines on every import on a CPU-only
machine ("Unable to register cuDNN factory", "computation placer already
registered", ...), before any log level applies. They are noise to a user of
deploytool and would break the promise of one-line errors, so the first import
runs with file descriptor 2 pointed at a temporary file, which is replayed only
if the import fails. Nothing else is silenced, and nothing here imports
TensorFlow at module level.
"""

from __future__ import annotations

import os
import sys
import tempfile
from types import ModuleType

# The environment of every worker process deploytool spawns (a conversion, a runtime's measurement, a training, a
# sweep point): TensorFlow's native log without its INFO and WARNING lines (its errors stay in the worker's log,
# where a crash is explained), and TF-DF without its welcome banner.
WORKER_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TFDF_DISABLE_WELCOME_MESSAGE": "1"}


# Packages that importing TensorFlow 2.19 (and the Keras 3 it loads) imports only because they are installed, for
# features deploytool never uses: JAX for TFLite's conversion from JAX functions (tf.lite.python.util), pandas for
# Keras's DataFrame inputs, scikit-learn for Keras's scikit-learn wrappers. They are here as other packages'
# dependencies (tensorflowjs and litert-torch need JAX, TF-DF pandas, the robustness study scikit-learn), and they
# cost 1.5 s of the 4.2 s of CPU an import of TensorFlow takes (measured; paid by every process that imports it: a
# runtime's or a conversion's worker server, a CLI run). During that import they count as not installed, a set-up
# each library supports (it tests for ImportError); afterwards anyone who asks for one imports it for real.
DEFERRED_AT_IMPORT = ("jax", "pandas", "sklearn")


def import_tensorflow() -> ModuleType:
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.stderr.flush()
    saved = os.dup(2)
    held = [name for name in DEFERRED_AT_IMPORT if name not in sys.modules]
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            for name in held:
                sys.modules[name] = None  # type: ignore[assignment]  # import's own "not importable" marker
            import tensorflow
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            os.write(2, captured.read()[-20000:])
            raise
        finally:
            for name in held:
                if sys.modules.get(name, name) is None:  # still our marker: not imported since
                    del sys.modules[name]
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
    return tensorflow
