"""The check stage: onnx.checker on the saved model, then the facts of its graph (the
opset it really has, node count, op histogram, bytes on disk, the graph fingerprint)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnx

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


def graph_bytes(path: Path) -> int:
    """The graph's bytes on disk, its external data included: the files of its folder but
    the JSON a model builder writes beside it (genai_config.json, the tokenizer's)."""
    return sum(
        f.stat().st_size for f in path.parent.iterdir() if f.is_file() and f.suffix != ".json"
    )
