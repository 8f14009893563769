"""The exporter cold start compared across runs, with hand-computed numbers."""

from __future__ import annotations

import math

from harness.compare import Thresholds
from harness.compare.cold_start import cold_start_findings, cold_start_samples
from harness.store.manifest import Manifest
from harness.store.runs import Run


def _run(run_id: str, seconds: list[float], memory: float = 150.0) -> Run:
    entries = [
        {"exporter": "dynamo", "variant": "base", "seconds": s, "peak_rss_mb": memory}
        for s in seconds
    ]
    entries.append({"exporter": "torchscript", "variant": "base", "error": "failed"})
    return Run(Manifest.from_dict({"schema": 1, "run_id": run_id, "cold_start": entries}), ())


def test_samples_per_exporter_and_variant_skip_failed_measurements() -> None:
    assert cold_start_samples(_run("a", [2.0, 2.2]).manifest, "seconds") == {
        ("dynamo", "base"): [2.0, 2.2]
    }


def test_against_one_run_a_slower_start_warns() -> None:
    # medians 2.1 -> 3.1: x1.476 beyond the 20% export-time floor; one run: a warning
    (finding,) = cold_start_findings([_run("a", [2.0, 2.2])], _run("b", [3.0, 3.2]), Thresholds())
    assert (finding.severity, finding.metric) == ("warning", "cold_start_seconds")
    assert finding.ratio == 3.1 / 2.1
    assert finding.threshold == 1.2


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
