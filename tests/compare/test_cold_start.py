"""The exporter cold start compared across runs, with hand-computed numbers."""

from __future__ import annotations

import math

from harness.compare import Thresholds
from harness.compare.cold_start import cold_start_findings, cold_start_samples
from harness.store.manifest import Manifest
from harness.store.runs import Run


def _run(run_id: str, seconds: list[float], memory: float = 150.0, wall: float | None = 1.0) -> Run:
    """Cold starts of `seconds` CPU time each, their wall time `wall` times that (None: a run
    from before CPU time was recorded, wall time only)."""
    entries = [
        {
            "exporter": "dynamo",
            "variant": "base",
            "seconds": s * (wall or 1.0),
            "peak_rss_mb": memory,
        }
        | ({"cpu_seconds": s} if wall is not None else {})
        for s in seconds
    ]
    entries.append({"exporter": "torchscript", "variant": "base", "error": "failed"})
    return Run(Manifest.from_dict({"schema": 1, "run_id": run_id, "cold_start": entries}), ())


def test_samples_per_exporter_and_variant_skip_failed_measurements() -> None:
    assert cold_start_samples(_run("a", [2.0, 2.2]).manifest, "cpu_seconds") == {
        ("dynamo", "base"): [2.0, 2.2]
    }


def test_against_one_run_a_slower_start_warns() -> None:
    # medians 2.1 -> 3.1: x1.476 beyond the 20% export-time floor; one run: a warning
    (finding,) = cold_start_findings([_run("a", [2.0, 2.2])], _run("b", [3.0, 3.2]), Thresholds())
    assert (finding.severity, finding.metric) == ("warning", "cold_start_cpu_seconds")
    assert finding.ratio == 3.1 / 2.1
    assert finding.threshold == 1.2
    assert finding.message.startswith("exporter cold start (CPU time) of dynamo worse: x1.48")


def test_a_busy_machine_stretching_the_wall_time_flags_nothing() -> None:
    # CPU time 2.1 both; wall time 2.1 -> 3.15 (x1.5, another process on the cores)
    assert (
        cold_start_findings([_run("a", [2.0, 2.2])], _run("b", [2.0, 2.2], wall=1.5), Thresholds())
        == []
    )


def test_a_run_without_cpu_time_is_judged_with_the_others_on_wall_time() -> None:
    # the baseline (an older harness) has wall time only: 2.1 -> the candidate's 3.15 wall
    old, cand = _run("a", [2.0, 2.2], wall=None), _run("b", [2.0, 2.2], wall=1.5)
    (finding,) = cold_start_findings([old], cand, Thresholds())
    assert finding.metric == "cold_start_seconds" and math.isclose(finding.ratio or 0, 1.5)
    assert finding.message.startswith("exporter cold start (wall time) of dynamo worse: x1.50")


def test_against_history_the_series_noise_decides_and_a_regression_blocks() -> None:
    # medians 2.0, 2.1, 2.0, 2.1: changes +-0.0488, MAD 0, so the floor log(1.2) = 0.182
    # holds; the candidate's 3.1 against the reference 2.05 is log 0.414: blocking.
    history = [_run(str(i), [m]) for i, m in enumerate([2.0, 2.1, 2.0, 2.1])]
    (finding,) = cold_start_findings(history, _run("c", [3.1]), Thresholds())
    assert finding.severity == "blocking"
    assert math.isclose(finding.ratio or 0, 3.1 / 2.05)


def test_memory_needs_the_absolute_floor_too() -> None:
    # 150 -> 170 MiB is x1.13 and only 20 MiB: under both the 20% and the 32 MiB floors
    base, cand = _run("a", [2.0], memory=150.0), _run("b", [2.0], memory=170.0)
    assert cold_start_findings([base], cand, Thresholds()) == []
    much = _run("c", [2.0], memory=250.0)  # x1.67 and 100 MiB: reported
    (finding,) = cold_start_findings([base], much, Thresholds())
    assert finding.metric == "cold_start_peak_rss_mb"
