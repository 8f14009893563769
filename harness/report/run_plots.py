"""The data of every plot of a run, by plot name: the plots of harness.report.data and the
decode plot of harness.report.generation (which builds on data's LatencyData)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.report.data import (
    comparison_data,
    coverage_data,
    export_cost_data,
    latency_data,
    matrix_data,
    opset_effect_data,
)
from harness.report.generation import generation_latency_data
from harness.store.records import Record


def run_plot_data(
    records: Sequence[Record], *, baseline: Sequence[Record] | None = None
) -> dict[str, Any]:
    """The data of every plot of a run, by plot name (an empty one is not drawn)."""
    data: dict[str, Any] = {
        "matrix": matrix_data(records),
        "export_cost": export_cost_data(records),
        "latency": latency_data(records),
        "opset_effect": opset_effect_data(records),
        "coverage": coverage_data(records),
    }
    if baseline is not None:
        data["comparison"] = comparison_data(baseline, records)
    data["generation_latency"] = generation_latency_data(records)
    return data
