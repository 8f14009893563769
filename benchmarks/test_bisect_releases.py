"""Bisections over real releases (issue 50), as figures, not CI tests: torch's releases
for pytorch#194381 (`1.0 - int_mask` in the dynamo exporter's type promotion) and
onnxscript's for its BatchNorm-into-Gemm fusion (benchmarks/bisect_releases.py). Each
release runs in an environment of its own, kept between tries; a release without one
(2.12.0 and 2.14.0 have none here: PyPI's torch for Linux is the CUDA build, several GB)
is named and skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bisect_releases import bisect
from benchmarks.conftest import Figures

TORCH = [
    f"torch-{v}" for v in ("2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0")
]
ONNXSCRIPT = [f"torch-2.13.0-onnxscript-{v}" for v in ("0.6.2", "0.7.0", "0.7.1")] + [
    "torch-2.13.0"
]


def _line(found: dict) -> str:
    tries = ", ".join(f"{t['release']} {t['status']}" for t in found["tries"])
    return (
        f"- {found['model']} ({found['exporter']}), {found['range'][0]} .. {found['range'][-1]}: "
        f"first bad **{found['first_bad']}** (last good {found['last_good']}; {found['good']} -> "
        f"{found['bad']}), failing pass: {found['failing_pass'] or '-'}; {found['runs']} runs "
        f"in {found['minutes']:.1f} min ({tries}); skipped: {'; '.join(found['skipped']) or 'none'}"
    )


@pytest.mark.parametrize(
    ("model", "releases"), [("int_mask_attention", TORCH), ("addmm_beta_bn", ONNXSCRIPT)]
)
def test_bisect_over_real_releases(figures: Figures, tmp_path: Path, model, releases) -> None:
    found = bisect(releases, model, "dynamo", tmp_path)
    if not found["versions"]:
        pytest.skip("no release environment here (HARNESS_RELEASE_ENVS)")
    line = _line(found)
    figures.add(f"Bisect over real releases ({model})", [line])
    print(line)
    assert found["first_bad"] is not None, found
