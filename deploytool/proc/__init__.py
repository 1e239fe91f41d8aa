"""The process deploytool runs in and the ones it starts: thread counts set and checked (`threads`),
TensorFlow imported without its start-up chatter (`quiet`), and the one child-process worker that conversion,
the runtimes, training and the sweep run their work in (`worker`). Nothing here knows what a model is."""
