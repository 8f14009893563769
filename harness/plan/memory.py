"""A cell's memory need, sized from its model's weights before anything runs, so that a
cluster places big cells where they fit and never more than fit on one node
(docs/design.md, "Distribution"). Pure: the weights come from the zoo entry's metadata
(`parameter_bytes`, which the real-size zoo and checkpoints declare), the factors from the
exporter registry and the measurements behind them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness import exporters
from harness.store.paired import PairTask

GIB = 1024**3
# A cell's process without its model: torch, onnx, onnxruntime and the harness, as a forked
# child of its zygote touches them (its unique memory, measured 0.6-1.1 GiB here).
BASE_GB = 1.5
# ONNX Runtime holds the graph's weights while the session is built (the protobuf and the
# initializers it makes of it): about twice the weights at their peak.
ORT_MEMORY = 2.0


def memory_need_gb(metadata: Mapping[str, object], exporter: str) -> float | None:
    """What a cell of this model and exporter needs at its peak: its process, the model's
    weights, and on top of them the larger of the export's peak and the ORT session's
    (the two never overlap: the export is done when the session is made). None where the
    entry does not say how large its weights are."""
    weight_bytes = _weight_bytes(metadata)
    if weight_bytes is None:
        return None
    factor = max(_export_memory(exporter), ORT_MEMORY)
    return round(BASE_GB + weight_bytes / GIB * (1 + factor), 2)


def largest_first(models: list[str], metadata: Mapping[str, Mapping[str, object]]) -> list[str]:
    """The models in the order their cells are dispatched: those with the most weight bytes
    first (the longest cells start while small ones can fill the cores beside them; a run
    in the zoo's order ended on a 170-s XLM-R cell with a core idle), the others after
    them in their given order."""
    return sorted(models, key=lambda m: _weight_bytes(metadata.get(m, {})) or 0.0, reverse=True)


def _weight_bytes(metadata: Mapping[str, object]) -> float | None:
    """The bytes of the model's weights its entry declares (`parameter_bytes`); None where
    it declares none, or no number."""
    found = metadata.get("parameter_bytes")
    if not isinstance(found, int | float) or isinstance(found, bool):
        return None
    return float(found)


def pair_need_gb(task: PairTask) -> float:
    """What an exporter pair needs at its peak (harness.cell.paired: both graphs' sessions
    open in one process): its process, each session's weights, and the second session's
    build on top of them (ORT_MEMORY). Sized from the graphs' files (a graph and its
    external data: its folder in the graph store); a Llama-3.2-1B pair holds two 4.9 GB
    graphs, beside whatever cells the node runs."""
    sizes = [
        _folder_bytes(Path(m).parent) / GIB
        for m in (task.baseline_model, task.candidate_model)
        if m  # a task of one graph (harness.cell.paired) has no candidate
    ]
    return round(BASE_GB + sum(sizes) + max(sizes) * (ORT_MEMORY - 1), 2)


def _folder_bytes(folder: Path) -> int:
    try:
        return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    except OSError:  # gone: the pair's own error says so
        return 0


def _export_memory(exporter: str) -> float:
    return exporters.get(exporter).export_memory if exporter in exporters.NAMES else 2.0


def largest_node_gb(nodes: list[Mapping[str, object]]) -> float | None:
    """The most memory one alive node offers (Ray's `memory` resource, bytes); None where
    no node says."""
    found = [
        float(m) / GIB
        for n in nodes
        if n.get("alive")
        and isinstance(resources := n.get("resources"), Mapping)
        and isinstance(m := resources.get("memory"), int | float)
    ]
    return max(found, default=None)
