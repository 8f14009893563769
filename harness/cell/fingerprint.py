"""The graph fingerprint: a canonical hash of what an ONNX model computes.

It covers op types and domains, attributes (subgraphs recursively), the topology (every
value renamed by where it is produced: graph input k, initializer k, output j of node i),
the inputs' and outputs' dtypes and shapes, the initializers' shapes, dtypes and contents
(external data read from its file), the opsets and the model-local functions. It leaves
out node and value names, doc strings, metadata and producer fields: two exports that
differ only there run the same computation in the same runtime, so their latency can
differ only by noise (docs/design.md, "Same graph, same speed")."""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
from onnx import numpy_helper

_CHUNK = 1 << 20


class _Hasher:
    def __init__(self, base_dir: Path) -> None:
        self.h = hashlib.sha256()
        self.base_dir = base_dir

    def add(self, *parts: object) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else repr(part).encode()
            self.h.update(len(data).to_bytes(8, "little"))
            self.h.update(data)


def graph_fingerprint(path: Path) -> str:
    """sha256 (hex) of the canonical form of the model at `path` (weights included)."""
    model = onnx.load(str(path), load_external_data=False)
    h = _Hasher(path.parent)
    h.add("opsets", sorted((o.domain or "ai.onnx", o.version) for o in model.opset_import))
    _graph(h, model.graph, {})
    for function in sorted(model.functions, key=lambda f: (f.domain, f.name, f.overload)):
        _function(h, function)
    return h.h.hexdigest()


def _value_type(t: onnx.TypeProto) -> tuple[object, ...]:
    if t.HasField("tensor_type"):
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else "?" for d in t.tensor_type.shape.dim
        )
        return ("tensor", t.tensor_type.elem_type, dims)
    return ("other", t.WhichOneof("value"))


def _graph(h: _Hasher, graph: onnx.GraphProto, outer: dict[str, str]) -> None:
    """Hash `graph`; names of values from enclosing graphs resolve through `outer`."""
    names = dict(outer)
    for k, value in enumerate(graph.input):
        names[value.name] = f"in{len(outer)}.{k}"
        h.add("input", _value_type(value.type))
    for k, tensor in enumerate(graph.initializer):
        names[tensor.name] = f"init{len(outer)}.{k}"
        _tensor(h, tensor)
    for i, node in enumerate(graph.node):
        _node(h, node, names)
        for j, out in enumerate(node.output):
            if out:
                names[out] = f"n{len(outer)}.{i}.{j}"
    for value in graph.output:
        h.add("output", names.get(value.name, "?"), _value_type(value.type))


def _node(h: _Hasher, node: onnx.NodeProto, names: dict[str, str]) -> None:
    h.add("node", node.domain or "ai.onnx", node.op_type, len(node.output))
    h.add([names.get(i, "?") if i else "" for i in node.input])
    for attr in sorted(node.attribute, key=lambda a: a.name):
        _attribute(h, attr, names)


def _attribute(h: _Hasher, attr: onnx.AttributeProto, names: dict[str, str]) -> None:
    h.add("attr", attr.name, attr.type, attr.ref_attr_name)
    if attr.type == onnx.AttributeProto.GRAPH:
        _graph(h, attr.g, names)
    elif attr.type == onnx.AttributeProto.GRAPHS:
        for g in attr.graphs:
            _graph(h, g, names)
    elif attr.type == onnx.AttributeProto.TENSOR:
        _tensor(h, attr.t)
    elif attr.type == onnx.AttributeProto.TENSORS:
        for t in attr.tensors:
            _tensor(h, t)
    else:
        h.add(attr.f, attr.i, attr.s, tuple(attr.floats), tuple(attr.ints), tuple(attr.strings))


def _tensor(h: _Hasher, tensor: onnx.TensorProto) -> None:
    """dtype, shape and a digest of the contents, the same embedded or external."""
    h.add("tensor", tensor.data_type, tuple(tensor.dims))
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        _external(h, tensor)
    elif tensor.HasField("raw_data"):
        h.add(hashlib.sha256(tensor.raw_data).digest())
    elif tensor.data_type == onnx.TensorProto.STRING:
        h.add(tuple(tensor.string_data))
    else:
        h.add(hashlib.sha256(numpy_helper.to_array(tensor).tobytes()).digest())


def _external(h: _Hasher, tensor: onnx.TensorProto) -> None:
    info = {e.key: e.value for e in tensor.external_data}
    offset, length = int(info.get("offset", 0)), info.get("length")
    remaining = None if length is None else int(length)
    digest = hashlib.sha256()
    with open(h.base_dir / info["location"], "rb") as f:
        f.seek(offset)
        while remaining is None or remaining > 0:
            chunk = f.read(_CHUNK if remaining is None else min(_CHUNK, remaining))
            if not chunk:
                break
            digest.update(chunk)
            remaining = None if remaining is None else remaining - len(chunk)
    h.add(digest.digest())


def _function(h: _Hasher, function: onnx.FunctionProto) -> None:
    h.add("function", function.domain, function.name, function.overload)
    h.add(len(function.input), len(function.output), tuple(function.attribute))
    h.add(sorted((o.domain or "ai.onnx", o.version) for o in function.opset_import))
    names = {name: f"fin{k}" for k, name in enumerate(function.input)}
    for i, node in enumerate(function.node):
        _node(h, node, names)
        for j, out in enumerate(node.output):
            if out:
                names[out] = f"fn{i}.{j}"
    h.add([names.get(o, "?") for o in function.output])
