"""The atlas: real architectures at their real size, built offline with random weights by their own libraries
(`providers/`: keras.applications, torchvision, transformers), each migrated on every route and quantization on
the host and the web (the phone where one is attached) by the same `migrate` the CLI runs — one run per
architecture, so every row is a normal stored row with its report and findings — and drawn as one grid
(`atlas.html`: architecture x route, coloured by verdict). Importing this package registers every provider's
architectures in `ATLAS`; no framework is imported until an architecture is built (in a worker process)."""

from deploytool.atlas.architecture import ATLAS, FAMILIES, TIERS, Architecture, Built, Size
from deploytool.atlas.providers import keras_apps, torchvision_models, transformers_models  # noqa: F401

__all__ = ["ATLAS", "FAMILIES", "TIERS", "Architecture", "Built", "Size"]
