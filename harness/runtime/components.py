"""A generative export's components (transformers' `export_for_generation`: `prefill` and
`decode`, a multimodal model's encoders, projector, language model and head), each judged on
its own: its graph through the checker, then run in ONNX Runtime by transformers' own runner
on the forward kwargs transformers captured for it during `generate`, against the eager
submodule on the same kwargs (`ComponentCheck`), and timed against it.

The cell's verdict is the worst component's: the first that differs fails the cell at
`numerics`, naming the component.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from harness.cell.stages import StageFailure, stage
from harness.cell.timing import time_interleaved
from harness.exporters.request import Components
from harness.runtime import pipeline
from harness.store.measures import ComponentCheck, Latency
from harness.store.protocol import Protocol
from harness.store.records import Measurements


def check_graphs(parts: Components, m: Measurements, *, ort_only: bool = False) -> None:
    """The checker over every component (`ort_only`: graphs fused for ORT, not checked);
    the record's graph figures are their sums (nodes, op counts), its fingerprint the first
    component's."""
    first, nodes, ops = None, 0, dict[str, int]()
    for path in parts.paths.values():
        pipeline.check(path, m, ort_only=ort_only)
        first = first or m.export.graph_fingerprint
        nodes += m.export.onnx_nodes or 0
        for op, count in (m.export.onnx_ops or {}).items():
            ops[op] = ops.get(op, 0) + count
    m.export = replace(
        m.export, onnx_nodes=nodes, onnx_ops=dict(sorted(ops.items())), graph_fingerprint=first
    )


def judge(
    parts: Components, tolerance: tuple[float, float] | None, protocol: Protocol | None
) -> dict[str, ComponentCheck]:
    """Each component's outputs in ORT against its eager submodule's, and (with a protocol)
    both timed interleaved on the traced kwargs."""
    with stage("ort_session"):
        runners = parts.exported.runners
    found = {}
    for name, (submodule, kwargs) in parts.traced.items():
        runner = runners[name]
        with stage("ort_run"):
            got = _leaves(runner(**copy.deepcopy(kwargs)))
        with torch.no_grad():
            want = _leaves(submodule(**copy.deepcopy(kwargs)))
        names = [f"{name}.{n}" for n, _ in want]
        checks = pipeline.compare([g for _, g in got], [w for _, w in want], None, names, tolerance)
        latency = _timed(runner, submodule, kwargs, protocol) if protocol else (None, None)
        found[name] = ComponentCheck(checks, *latency)
    return found


def step_latency(found: Mapping[str, ComponentCheck], m: Measurements) -> None:
    """The cell's latency is its `decode` component's (the step run once per token, what
    the decode suite's graphs are timed at first), else its first component's."""
    timed = found.get("decode") or next(iter(found.values()), None)
    if timed is not None:
        m.ort = replace(m.ort, latency=timed.ort_latency_ms)
        m.eager = replace(m.eager, latency=timed.eager_latency_ms)


def require_ok(found: Mapping[str, ComponentCheck], fused: Mapping[str, int] | None) -> None:
    """A numerics failure naming the first component that differs (and, for a graph the
    exporter fused for ORT, the fused op types it holds)."""
    for name, check in found.items():
        bad = [c for c in check.checks if not c.ok]
        if bad:
            first, _, rest = pipeline.mismatch_text(bad, len(check.checks)).partition("\n")
            ops = ", ".join(f"{op} x{n}" for op, n in (fused or {}).items())
            rest += f"\nfused ops: {ops}" if ops else ""
            problem = pipeline.NumericsMismatch(f"component {name}: {first}\n{rest}")
            raise StageFailure("numerics", problem)


def _leaves(output: Any) -> list[tuple[str, np.ndarray]]:
    """The output's tensors by their path in it (`logits`, `cache.layers.0.keys`, ...)."""
    flat, _ = pytree.tree_flatten_with_path(output)
    return [
        (".".join(_key(k) for k in path), leaf.detach().float().numpy())
        for path, leaf in flat
        if isinstance(leaf, torch.Tensor)
    ]


def _key(entry: object) -> str:
    for attribute in ("key", "idx", "name"):  # MappingKey, SequenceKey, GetAttrKey
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def _timed(
    runner: Any, submodule: torch.nn.Module, kwargs: dict[str, Any], protocol: Protocol
) -> tuple[Latency | None, Latency | None]:
    """ORT and eager on the traced kwargs, interleaved. Eager appends to the cache it is
    given: it is cropped back after each call (a cache that cannot be cropped leaves eager
    untimed; ORT is then timed on its own, against itself)."""
    eager = _restoring_call(submodule, copy.deepcopy(kwargs))
    ort_call = lambda: runner(**kwargs)  # noqa: E731
    with torch.inference_mode():
        ort_ms, eager_ms = time_interleaved(ort_call, eager or ort_call, protocol)
    return Latency.from_samples(ort_ms), Latency.from_samples(eager_ms) if eager else None


def _restoring_call(
    submodule: torch.nn.Module, kwargs: dict[str, Any]
) -> Callable[[], object] | None:
    """The submodule's call on `kwargs`, its cache cropped back after each; None where the
    cache cannot be (recurrent or linear-attention states: transformers' caches refuse
    `get_seq_length` or `crop` for them, which a first call finds out)."""
    cache = next((v for k, v in kwargs.items() if k in ("cache", "past_key_values")), None)
    if cache is None:
        return lambda: submodule(**kwargs)
    if not hasattr(cache, "crop") or not hasattr(cache, "get_seq_length"):
        return None
    try:  # int(): a linear-attention layer's count is a tensor that grows in place
        length = int(cache.get_seq_length())
    except ValueError:  # no attention layer to count the tokens of
        return None

    def restore() -> None:
        added = int(cache.get_seq_length()) - length
        if added:
            cache.crop(-added)  # transformers' crop(-n) drops the last n tokens

    with torch.inference_mode():
        submodule(**kwargs)
    try:
        restore()
    except RuntimeError:  # a layer that keeps no past states to roll back
        return None

    def call() -> object:
        out = submodule(**kwargs)
        restore()
        return out

    return call
