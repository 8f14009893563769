"""The check stage: onnx.checker on the saved model, then the facts of its graph (the
opset it really has, node count, op histogram, bytes on disk, the graph fingerprint, the
initializers it stores more than once)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper

from harness.cell.fingerprint import graph_fingerprint
from harness.cell.stages import stage
from harness.store.records import Measurements


def check(path: Path, m: Measurements, *, ort_only: bool = False) -> None:
    """onnx.checker over the graph (not over an ORT-only graph: ORT's fused ops, which it
    registers in ONNX's own domain, are no ONNX ops), and the graph's figures."""
    with stage("check"):
        if not ort_only:
            onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(str(path), load_external_data=False)
    ops: dict[str, int] = {}
    for node in model.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    m.export = replace(
        m.export,
        opset_actual=next(
            (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None
        ),
        onnx_nodes=len(model.graph.node),
        onnx_ops=dict(sorted(ops.items())),
        graph_fingerprint=graph_fingerprint(path),
        onnx_bytes=graph_bytes(path),
    )
    with stage("check"):
        groups, copies = duplicate_initializers(path, model)
    m.export = replace(m.export, duplicate_initializers=groups, duplicate_bytes=copies)


def graph_bytes(path: Path) -> int:
    """The graph's bytes on disk, its external data included: the files of its folder but
    the JSON a model builder writes beside it (genai_config.json, the tokenizer's)."""
    return sum(
        f.stat().st_size for f in path.parent.iterdir() if f.is_file() and f.suffix != ".json"
    )


# Initializers under this size are not looked at: shapes, scalars and small constants
# repeat by nature; a duplicated weight is what costs memory and disk.
DUPLICATE_MIN_BYTES = 1024
_PREFIX_ROWS = 64
_ROWS_PER_CHUNK = 4096


def duplicate_initializers(path: Path, model: onnx.ModelProto) -> tuple[list[list[str]], int]:
    """Groups of initializers holding the same values (same type and bytes; a matrix also
    as its transpose: a tied embedding is kept once as the lookup table and once
    transposed for the head's MatMul), each group's names in the graph's order, and the
    bytes the copies beyond the first take. Tensors are compared by a hash of their first
    rows, then, where two agree, of all: a weight is read once at most, inline or external."""
    tensors = [t for t in model.graph.initializer if _size(t) >= DUPLICATE_MIN_BYTES]
    candidates = _same_key(tensors, lambda t: (t.data_type, tuple(sorted(t.dims)), _size(t)))
    candidates = _same_key(candidates, lambda t: _digest(_canonical(path, t)[:_PREFIX_ROWS]))
    groups: dict[str, list[onnx.TensorProto]] = {}
    for tensor in candidates:
        values = _canonical(path, tensor)
        if not _constant(values):
            groups.setdefault(_digest(values), []).append(tensor)
    found = [g for g in groups.values() if len(g) > 1]
    copies = sum((len(g) - 1) * _size(g[0]) for g in found)
    return [[t.name for t in g] for g in found], copies


def _same_key(
    tensors: list[onnx.TensorProto], key: Callable[[onnx.TensorProto], object]
) -> list[onnx.TensorProto]:
    """The tensors whose key another tensor shares."""
    keys = [key(t) for t in tensors]
    counts = Counter(keys)
    return [t for t, k in zip(tensors, keys, strict=True) if counts[k] > 1]


def _size(tensor: onnx.TensorProto) -> int:
    if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.raw_data:
        item = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
        return int(np.prod(tensor.dims, dtype=np.int64)) * item
    return int(onnx.numpy_helper.to_array(tensor).nbytes)


def external_files(model: onnx.ModelProto) -> list[str]:
    """The files the model's tensors keep their data in (relative to its folder)."""
    from onnx.external_data_helper import _get_all_tensors  # initializers and attributes

    return sorted({found[0] for t in _get_all_tensors(model) if (found := _external(t))})


def _external(tensor: onnx.TensorProto) -> tuple[str, int] | None:
    """(file, offset) of a tensor kept in external data (its length is its shape's: the
    TorchScript exporter writes a file per tensor and no `length`); None where it is inline."""
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return None
    info = {e.key: e.value for e in tensor.external_data}
    return info["location"], int(info.get("offset", 0))


def _canonical(path: Path, tensor: onnx.TensorProto) -> np.ndarray:
    """The tensor's values without reading them all (a memory map of external data), a
    matrix with its longer side first (a transposed copy reads the same)."""
    external = _external(tensor)
    dims = tuple(tensor.dims)
    if external is None:
        values = onnx.numpy_helper.to_array(tensor)
    else:
        location, offset = external
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        values = np.memmap(path.parent / location, dtype, "r", offset=offset, shape=dims)
    if values.ndim == 2 and dims[0] < dims[1]:
        return values.T
    return values.reshape(-1) if values.ndim != 2 else values


def _constant(values: np.ndarray) -> bool:
    """Every element the same (a norm's ones, a bias's zeros): such tensors are equal by
    their nature, not a weight stored twice (every LayerNorm of a freshly initialised model
    holds the same ones)."""
    flat = values.reshape(-1)
    return (
        bool(flat.size)
        and bool((flat[:_ROWS_PER_CHUNK] == flat[0]).all())
        and bool(np.all(flat == flat[0]))
    )


def _digest(values: np.ndarray) -> str:
    """A hash of the values, read a block of rows at a time."""
    digest = hashlib.blake2b(digest_size=16)
    for start in range(0, max(1, len(values)), _ROWS_PER_CHUNK):
        digest.update(np.ascontiguousarray(values[start : start + _ROWS_PER_CHUNK]).tobytes())
    return digest.hexdigest()
