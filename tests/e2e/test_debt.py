"""`harness debt` (issue 40): which of transformers' workarounds a model still needs. A real
run of gemma2's decode step under both exporters (the bare dynamo call fails to capture it,
transformers' exporter works), then the real CLI searching two of the workarounds the export
uses: the sliding-window layer patch is needed (without it ORT cannot run the graph), the
reshape patch is not. The record, the report and `harness compare` say so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.store.rundir import read_records
from tests.conftest import run_cli

NEEDED = "exporter_dynamo._patch_sliding_window_layer"
OBSOLETE = "utils._patch_reshape"


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "run"
    result = run_cli(
        "run", "--suite", "transformers-decode", "--models", "hf.gemma2.decode", "--exporters",
        "dynamo,transformers", "--opsets", "18", "--patches", "none", "--out", str(out),
        "--repro-bound", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    result = run_cli("debt", str(out), "--workarounds", f"{NEEDED},{OBSOLETE}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"needs {NEEDED}; obsolete: {OBSOLETE} (2 of " in result.stderr
    return out


def test_the_record_names_the_workaround_the_model_needs_and_the_one_it_does_not(
    searched: Path,
) -> None:
    records = {r.exporter: r for r in read_records(searched)}
    assert records["dynamo"].workarounds is None  # the bare call has none
    found = records["transformers"].workarounds
    assert found is not None
    assert NEEDED in found.used and OBSOLETE in found.used and len(found.used) > 2
    assert found.tried == (NEEDED, OBSOLETE)
    assert list(found.needed) == [NEEDED] and found.obsolete == [OBSOLETE]
    assert "invalid expand shape" in found.needed[NEEDED]
    assert not found.complete


def test_the_report_lists_each_workaround_with_the_models(searched: Path) -> None:
    report = (searched / "report.md").read_text()
    section = report.split("## transformers' workarounds", 1)[1].split("\n## ", 1)[0]
    rows = {line.split(" | ")[0].strip("| `"): line for line in section.splitlines() if "`" in line}
    assert rows[NEEDED].split(" | ")[1] == "1" and "hf.gemma2.decode" in rows[NEEDED]
    assert rows[OBSOLETE].split(" | ")[1] == "0"
    assert rows[OBSOLETE].rstrip(" |").endswith("hf.gemma2.decode @18 cpu dynamic")


def test_compare_says_a_workaround_is_no_longer_needed(searched: Path, tmp_path: Path) -> None:
    """A baseline where the reshape patch was needed too (its record edited so): the
    candidate no longer needs it."""
    base = tmp_path / "base"
    shutil.copytree(searched, base)
    lines = (base / "records.jsonl").read_text().splitlines()
    edited = []
    for line in lines:
        d = json.loads(line)
        if d.get("workarounds"):
            d["workarounds"]["needed"][OBSOLETE] = "RuntimeError: boom"
        edited.append(json.dumps(d))
    (base / "records.jsonl").write_text("\n".join(edited) + "\n")
    result = run_cli("compare", str(base), str(searched), "--format", "json")
    findings = json.loads(result.stdout)["findings"]
    kinds = {(f["kind"], f["message"]) for f in findings}
    assert ("workaround_obsolete", f"no longer needs {OBSOLETE}") in kinds
    assert not any(f["kind"] == "workaround_needed" for f in findings)
