"""How a latency reads in the report (harness/report/measures.py `latency_text`): p50 with
its p10-p90 where the samples support a p90, else the median's 95% interval and the count,
and a median the machine moved under (its interval wider than +-25%) says so. Real-size
2-thread loops on a shared machine were published as any figure: resnet50's eager p50
1 020 ms (interval 794-1 719) against 107 ms at 1 thread."""

from __future__ import annotations

import pytest

from harness.report.measures import latency_text
from harness.store.records import Latency


@pytest.mark.parametrize(
    ("samples", "text"),
    [
        ([20.0 + i / 100 for i in range(30)], "20.1 (20.0–20.3)"),
        (
            [735.0, 1888.0, 926.0, 1000.0, 1200.0, 800.0, 1500.0, 950.0, 1040.0, 1700.0],
            "1020 (794–1719) unsteady (median ±44%)",
        ),
        ([100.0, 101.0, 99.0, 100.5, 100.2], "100 (n=5, too few for an interval)"),
    ],
)
def test_a_latency_reads_with_how_well_its_median_is_known(samples: list[float], text: str) -> None:
    assert latency_text(Latency.from_samples(samples)) == text
