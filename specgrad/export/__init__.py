"""Writing a built spec model in formats other runtimes read, one module per format (onnx.py: an ONNX graph)."""
