"""A distributed export-and-benchmark harness for PyTorch's ONNX exporters."""

__version__ = "0.1.0"
