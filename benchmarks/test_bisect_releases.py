"""Bisections over real releases (issue 50), as figures, not CI tests: `harness bisect
--isolation env` (benchmarks/bisect_releases.py) over torch's releases for pytorch#194381
(`1.0 - int_mask` in the dynamo exporter's type promotion), each release's environment
taken from the folder made beforehand (HARNESS_RELEASE_ENVS; a release without one, 2.12.0
and 2.14.0 here, is named and skipped), and over onnxscript's releases for the fix of its
BatchNorm-into-Gemm fusion (`--fix`), each pip-installed into a kept environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bisect_releases import bisect
from benchmarks.conftest import Figures
from benchmarks.releases import ENVS

CASES = {
    "int_mask_attention": ("torch", "2.11.0", "2.14.1", False, ENVS),
    "addmm_beta_bn": ("onnxscript", "0.7.2", "0.6.2", True, None),
}


def _line(found: dict) -> str:
    tries = ", ".join(f"{t['set']} {t['verdict']} ({t['seconds']:g} s)" for t in found["tries"])
    answer = (
        f"fixed in **{found['last_good']}** (last bad {found['first_bad']})"
        if found["fix"]
        else f"first bad **{found['first_bad']}** (last good {found['last_good']})"
    )
    return (
        f"- {found['model']} ({found['exporter']}), {found['package']} {found['range'][0]} .. "
        f"{found['range'][1]}: {answer}, failing pass: {found['failing_pass'] or '-'}; "
        f"{found['runs']} runs, {found['environments_made']} environments made and "
        f"{found['environments_kept']} kept, installs {', '.join(found['installs']) or 'none'}, "
        f"{found['minutes']:.1f} min ({tries})"
    )


@pytest.mark.parametrize("model", list(CASES))
def test_bisect_over_real_releases(figures: Figures, tmp_path: Path, model: str) -> None:
    package, good, bad, fix, environments = CASES[model]
    if environments is not None and not environments.is_dir():
        pytest.skip(f"no release environments at {environments} (HARNESS_RELEASE_ENVS)")
    found = bisect(package, good, bad, model, tmp_path, fix=fix, environments=environments)
    assert "error" not in found, found
    line = _line(found)
    figures.add(f"Bisect over real releases ({model})", [line])
    print(line)
    assert found["first_bad"] is not None, found
    assert found["failing_pass"], found
