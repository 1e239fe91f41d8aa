"""Model files read as files, without running them and without the framework where it can be avoided: ONNX's
protobuf (graph inputs and outputs, external data locations) and its external data files, a torch.export
`.pt2` loaded without unpickling, a TFLite model's tensors and their quantization. The bottom of the stack:
it knows nothing of artifacts, runs or results."""
