"""The colours of the plots that are not a status's (a status's is `Status.colour`, in
harness.store.status, shared by the pass matrix plot and the HTML report)."""

from __future__ import annotations

from harness.coverage import matrix as coverage
from harness.store.status import EXPORT_RED, NOT_RUN_GREY, NUMERICS_PINK, OK_GREEN

# Exporter series colours (Paul Tol's 'bright', without its red and green, which the
# status palette uses for failure and success).
SERIES_COLOURS = ("#4477AA", "#CCBB44", "#AA3377", "#66CCEE", "#BBBBBB", "#222255")
EAGER_COLOUR = "#777777"
REGRESSION_COLOUR = "#D55E00"
IMPROVEMENT_COLOUR = "#0072B2"
BAND_COLOUR = "#E5E5E5"  # the noise band around a ratio of 1
# Op coverage states in the colours of the statuses they echo: an op that exports and
# matches is ok-green, wrong numbers numerics-pink, a failing op export-red.
COVERAGE_COLOURS = {
    coverage.OK: OK_GREEN.fill,
    coverage.WRONG: NUMERICS_PINK.fill,
    coverage.FAILS: EXPORT_RED.fill,
    coverage.UNKNOWN: NOT_RUN_GREY.fill,
}
NOT_SEEN_COLOUR = "#FFFFFF"  # an op no cell of that column used: blank, as in the matrix
