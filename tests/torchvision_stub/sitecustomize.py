"""Loaded by every Python process started with this folder on PYTHONPATH (the harness, its
Ray workers): before the first `import torchvision`, define the schemas of torchvision's
C++ operators (torchvision_ops_stub), so that torchvision's Python code imports here.

The stand-in, and why: PyPI's torchvision wheels for this torch are CUDA builds whose
C++ library cannot load on this CPU-only machine, and torchvision's import registers
shape functions for those operators, which fails when they do not exist. The classifiers
the adapter builds use none of them; everything else (torchvision's model code, the
harness, both exporters, onnxruntime) is real."""

import importlib.abc
import sys


class _DefineTorchvisionOpsFirst(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torchvision_ops_stub  # noqa: F401
        return None


sys.meta_path.insert(0, _DefineTorchvisionOpsFirst())
