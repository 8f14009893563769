"""Compare a candidate run with a baseline run (or its history) and raise findings.

Two families, two mechanisms (docs/design.md, "Comparison and alerts"):

- deterministic findings (status, opset, numerics, ATen ops, cells) are exact
  comparisons of two records (deterministic.py), plus the expected-status ratchet kept in
  the repository (ratchet.py);
- noisy findings (latency, export time, memory; metrics.py) need a ratio beyond an
  effect-size floor AND evidence that it is not noise: a rank test on the raw samples
  against one baseline run (against_run.py), or a threshold scaled to the series' own
  run-to-run noise against history (against_history.py), with the night-wide shift of all
  series divided out.

comparison.py puts them together; policy.py is the nightly's verdict policy; output/
renders a comparison. Everything is pure over records and manifests: no torch, no I/O but
output's `write_outputs` and `append_step_summary`.
"""

from harness.compare.comparison import (
    Comparison,
    Options,
    check_comparable,
    compare_history,
    compare_runs,
)
from harness.compare.findings import (
    BLOCKING,
    IMPROVEMENT,
    INFO,
    SEVERITIES,
    WARNING,
    CompareError,
    Finding,
)
from harness.compare.policy import MIN_HISTORY, NightHistory, nightly_comparison
from harness.compare.ratchet import updated_expected
from harness.compare.thresholds import Thresholds

__all__ = [
    "BLOCKING",
    "IMPROVEMENT",
    "INFO",
    "MIN_HISTORY",
    "SEVERITIES",
    "WARNING",
    "CompareError",
    "Comparison",
    "Finding",
    "NightHistory",
    "Options",
    "Thresholds",
    "check_comparable",
    "compare_history",
    "compare_runs",
    "nightly_comparison",
    "updated_expected",
]
