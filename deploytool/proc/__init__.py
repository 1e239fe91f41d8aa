"""The process deploytool runs in and the ones it starts: thread counts set and checked (`threads`),
TensorFlow imported without its start-up chatter (`quiet`). Nothing here knows what a model is."""
