"""One module per library that builds architectures offline; each registers its `Architecture`s in
deploytool.atlas.architecture.ATLAS when imported (deploytool.atlas imports them all)."""
