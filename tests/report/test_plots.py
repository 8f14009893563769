"""The plots: golden data behind each plot, hand-checked numbers, and PNGs that render."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.report import data as plot_data
from harness.report import plots, trends
from harness.report.generation import generation_latency_data
from tests.fixtures_compare import changed
from tests.report.test_generation import decode_records
from tests.report.test_report_synthetic import (
    as_json,
    baseline_records,
    check_golden,
    history_runs,
    mixed_records,
)

# factor of the synthetic latency samples at p10 and p90 (evenly spread +-8%, n=20)
P10, P90 = 1 - 0.08 * 0.8, 1 + 0.08 * 0.8


def _data(name: str) -> Any:
    records = mixed_records()
    return {
        "matrix": lambda: plot_data.matrix_data(records),
        "export_cost": lambda: plot_data.export_cost_data(records),
        "latency": lambda: plot_data.latency_data(records),
        "opset_effect": lambda: plot_data.opset_effect_data(records),
        "coverage": lambda: plot_data.coverage_data(records),
        "comparison": lambda: plot_data.comparison_data(baseline_records(), records),
        "generation_latency": lambda: generation_latency_data(decode_records()),
        "trends": lambda: trends.trend_data(history_runs()),
        "suite_trend": lambda: trends.suite_trend_data(history_runs()),
    }[name]()


DRAW = plots.DRAW


@pytest.mark.parametrize("name", sorted(DRAW))
def test_plot_data_matches_golden(name: str) -> None:
    check_golden(f"plot_{name}.json", as_json(_data(name)))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.parametrize("name", sorted(DRAW))
def test_each_plot_renders_a_png(name: str, tmp_path: Path) -> None:
    path = DRAW[name](_data(name), tmp_path / f"{name}.png")
    width, height = png_size(path)
    assert path.stat().st_size > 5_000
    assert width >= 500 and height >= 300


def test_importing_plots_or_report_does_not_import_matplotlib() -> None:
    code = "import sys, harness.report, harness.report.plots; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# -- the numbers, by hand -----------------------------------------------------------------------


def test_matrix_marks_the_failing_stage_and_the_saved_opset() -> None:
    data = plot_data.matrix_data(mixed_records())
    assert data.rows == (
        "alexnet",
        "bert_tiny",
        "gpt2_small",
        "gpt2_small (dynamic)",
        "whisper_enc",
    )
    assert data.columns == ("dynamo@17", "dynamo@18", "torchscript@17", "torchscript@18")
    assert data.text[0][0] == "ok\nopset 18"
    assert data.text[1][0] == "translate"
    assert data.status[3] == ("ok", "dynamic_mismatch", "timeout", "crashed")


def test_export_cost_is_the_median_over_opsets_and_none_when_unmeasured() -> None:
    data = plot_data.export_cost_data(mixed_records())
    assert data.series == ("dynamo", "torchscript")
    assert data.export_s[0] == pytest.approx((2.05, 0.925))
    assert data.export_s[1][0] is None  # bert_tiny never exported with dynamo
    assert data.peak_rss_mb[4] == (2900.0, 900.0)


def test_latency_uses_the_highest_timed_opset_and_raw_sample_spread() -> None:
    data = plot_data.latency_data(mixed_records())
    alexnet_dynamo = data.ort_ms[0][0]
    assert data.opsets[0] == (18, 18)
    assert alexnet_dynamo is not None
    assert (alexnet_dynamo.p10, alexnet_dynamo.p50, alexnet_dynamo.p90) == pytest.approx(
        (3.8 * P10, 3.8, 3.8 * P90)
    )
    speedup = data.speedup[0][0]
    assert speedup is not None
    assert (speedup.p10, speedup.p50, speedup.p90) == pytest.approx(
        (6.1 / (3.8 * P90), 6.1 / 3.8, 6.1 / (3.8 * P10))
    )
    assert data.ort_ms[1][0] is None and data.speedup[1][0] is None  # bert_tiny dynamo failed
    assert data.opsets[2] == (18, None)  # gpt2 dynamo@17 has no latency: ORT run failed


def test_opset_effect_counts_attempted_cells_and_pairs_models() -> None:
    dynamo, torchscript = plot_data.opset_effect_data(mixed_records()).series
    assert dynamo.opsets == (17, 18) and dynamo.cells == (5, 5)
    assert dynamo.pass_rate == pytest.approx((50.0, 60.0))  # 2 of 4 attempted (1 skipped); 3 of 5
    assert dynamo.relative_latency == pytest.approx((1.0, 3.8 / 4.0))  # only alexnet timed at both
    assert torchscript.relative_latency == pytest.approx((1.0, (4.2 / 4.4 + 0.85 / 0.9) / 2))


def test_coverage_comes_from_the_coverage_matrix_problem_ops_first() -> None:
    data = plot_data.coverage_data(mixed_records())
    assert data.columns == ("dynamo@17", "dynamo@18")
    state = dict(zip(data.ops, data.state, strict=True))
    assert data.ops[0] == "aten.scaled_dot_product_attention.default"
    assert state["aten.scaled_dot_product_attention.default"] == ("fails", "fails")
    # only in bert_tiny's failed dynamo@17 export: unknown there; whisper exported it at 18
    assert state["aten.softmax.int"] == ("unknown", "ok")
    assert state["aten.conv1d.default"] == (None, "ok")
    # alexnet exported linear at 17, bert_tiny failed otherwise: the export that passed wins
    assert state["aten.linear.default"] == ("ok", "ok")
    assert data.ops[1:3] == ("aten.layer_norm.default", "aten.softmax.int")


def test_coverage_plot_draws_problem_ops_first_and_counts_the_rest() -> None:
    data = plot_data.coverage_data(mixed_records(), max_ops=2)
    assert data.ops == ("aten.scaled_dot_product_attention.default", "aten.layer_norm.default")
    assert data.omitted == 5


def test_coverage_is_empty_without_op_data() -> None:
    records = [changed(r, aten_ops=None, unsupported_ops=None) for r in mixed_records()]
    assert plot_data.coverage_data(records).is_empty


def test_comparison_flags_cells_outside_the_band() -> None:
    data = plot_data.comparison_data(baseline_records(), mixed_records(), threshold=0.1)
    worst, *_, best = data.points
    assert (worst.cell, worst.verdict) == ("alexnet dynamo@18 cpu", "regression")
    assert worst.ratio == pytest.approx(1.3)
    assert (best.cell, best.ratio, best.verdict) == (
        "alexnet torchscript@17 cpu",
        pytest.approx(1 / 1.2),
        "improvement",
    )
    assert {p.verdict for p in data.points[1:-1]} == {"within"}
    assert len(data.points) + len(data.unmatched) == 20


def test_trend_baseline_is_the_median_of_previous_runs() -> None:
    data = trends.trend_data(history_runs(), window=7)
    assert data.runs[0] == "2025-06-01" and len(data.runs) == 6
    assert [(c.index, c.text) for c in data.version_changes] == [(3, "torch 2.9.0→2.10.0")]
    alexnet = data.series[0]
    assert alexnet.cell == "alexnet dynamo@18 cpu"
    assert alexnet.baseline[:3] == (None, None, None)  # fewer than 3 earlier runs: no baseline
    assert alexnet.baseline[3] == pytest.approx(3.81)  # median(3.80, 3.81, 3.82)
    assert alexnet.regression == (False, False, False, True, True, True)
    gpt2 = next(s for s in data.series if s.cell.startswith("gpt2_small"))
    assert gpt2.median[2] is None  # failed that night


def test_suite_trend_pass_rate_and_geomean() -> None:
    data = trends.suite_trend_data(history_runs())
    assert data.pass_rate[2] == pytest.approx(200 / 3)
    assert data.pass_rate[0] == 100.0
    speedups = [6.0 / 3.8, 2.5 / 0.9, 20.0 / 12.0]
    assert data.geomean_speedup[0] == pytest.approx(
        (speedups[0] * speedups[1] * speedups[2]) ** (1 / 3)
    )


def test_write_run_plots_skips_plots_without_data(tmp_path: Path) -> None:
    records = [
        changed(r, aten_ops=None, unsupported_ops=None, ort_latency_ms=None, eager_latency_ms=None)
        for r in mixed_records()
    ]
    written = plots.write_run_plots(tmp_path, records)
    assert sorted(written) == ["export_cost", "matrix", "opset_effect"]
    assert plots.write_run_plots(tmp_path / "empty", []) == {}
