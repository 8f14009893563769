"""A run directory is untrusted input: records and manifests of the wrong shape are refused
on read, naming the file, the line and the field (harness.store.validate), and `harness
report` / `harness compare` turn that into exit 2 with one line, writing nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.store import rundir
from harness.store.records import Record
from harness.store.validate import (
    RECORD_REQUIRED,
    Malformed,
    SchemaError,
    check_manifest,
    check_record,
)
from tests.conftest import one_line_error
from tests.fixtures_compare import check, manifest, record, smoke_cells, write_run

NAN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in tmp_path so that the repository's expected/status.csv does not apply."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _good_record() -> dict[str, Any]:
    r = record(ort=[1.0, 1.1, 1.2], eager=[2.0, 2.1], export_s=1.0, numerics=[check()])
    return json.loads(r.to_json())


def _edit_line(run: Path, number: int, edit: Callable[[dict[str, Any]], Any]) -> None:
    """Replace record line `number` (1-based) with `edit(record)`, written as Python's json
    writes it (NaN and Infinity included, as a hand-made file could hold them)."""
    path = rundir.records_path(run)
    lines = path.read_text().splitlines()
    lines[number - 1] = json.dumps(edit(json.loads(lines[number - 1])))
    path.write_text("\n".join(lines) + "\n")


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Set a dotted field ('ort_latency_ms.samples.1') of a record."""

    def edit(d: dict[str, Any]) -> dict[str, Any]:
        *parents, last = field.split(".")
        here: Any = d
        for key in parents:
            here = here[int(key)] if isinstance(here, list) else here[key]
        if isinstance(here, list):
            here[int(last)] = value
        else:
            here[last] = value
        return d

    return edit


# -- the checks themselves -----------------------------------------------------------------------


def test_a_record_the_harness_wrote_passes() -> None:
    check_record(_good_record())


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("export_s", "fast", "export_s"),
        ("export_s", NAN, "export_s"),
        ("export_s", INF, "export_s"),
        ("export_s", 1e308, "export_s"),
        ("export_s", -1.0, "export_s"),
        ("export_s", True, "export_s"),
        ("status", "weird", "status"),
        ("stage", "somewhere", "stage"),
        ("opset", "18", "opset"),
        ("dynamic", "no", "dynamic"),
        ("ort_latency_ms.samples.1", NAN, "ort_latency_ms.samples[1]"),
        ("ort_latency_ms.p50", 1e-300, "ort_latency_ms.p50"),
        ("numerics.0.max_abs", "big", "numerics[0].max_abs"),
        ("numerics.0.ok", "yes", "numerics[0].ok"),
        ("artifacts", ["a"], "artifacts"),
        ("first_divergence", {"node": "n", "max_abs": "x"}, "first_divergence.max_abs"),
        ("worker", {"started_at": INF}, "worker.started_at"),
    ],
)
def test_a_value_the_harness_never_writes_is_named(field: str, value: Any, where: str) -> None:
    with pytest.raises(Malformed) as info:
        check_record(_set(field, value)(_good_record()))
    assert info.value.where == where
    assert str(info.value).startswith(f"field {where!r} ")


def test_the_required_keys_are_what_a_record_needs_and_no_more() -> None:
    d = _good_record()
    minimal = {k: d[k] for k in RECORD_REQUIRED}
    assert Record.from_dict(minimal).cell == Record.from_dict(d).cell
    for key in RECORD_REQUIRED:
        with pytest.raises(SchemaError, match=f"'{key}'"):
            Record.from_dict({k: v for k, v in minimal.items() if k != key})


def test_a_missing_required_key_is_named() -> None:
    d = _good_record()
    del d["status"]
    with pytest.raises(Malformed, match="field 'status' is missing"):
        check_record(d)


def test_a_sampled_cells_failures_must_name_known_statuses() -> None:
    d = _good_record()
    d["samples"] = {"indices": [0], "failures": [{"index": 0, "status": "gone"}]}
    with pytest.raises(Malformed, match=r"'samples.failures\[0\].status' is an unknown status"):
        check_record(d)


@pytest.mark.parametrize(
    ("manifest_value", "where"),
    [
        ({"settings": ["threads", 2]}, "settings"),
        ({"settings": {"threads": "two"}}, "settings.threads"),
        ({"hardware": "a laptop"}, "hardware"),
        ({"hardware": {"cores": 8.5}}, "hardware.cores"),
        ({"versions": {"base": ["torch"]}}, "versions.base"),
        ({"cold_start": [{"exporter": "dynamo", "seconds": "slow"}]}, "cold_start[0].seconds"),
        ({"cold_start": [{"exporter": "dynamo", "cpu_seconds": -1}]}, "cold_start[0].cpu_seconds"),
        ({"zoo_problems": ["oops"]}, "zoo_problems[0]"),
        ({"options": {"threads": 0}}, "options.threads"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_named(manifest_value: dict[str, Any], where: str) -> None:
    with pytest.raises(Malformed) as info:
        check_manifest({**manifest("m"), **manifest_value})
    assert info.value.where == where


def test_the_test_manifest_passes() -> None:
    check_manifest(manifest("m"))


# -- the readers: file, line and field -------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", manifest("run"), smoke_cells(1))


def test_a_valid_json_last_line_without_a_required_key_is_an_error_not_a_torn_write(
    run: Path,
) -> None:
    """It used to be dropped as a torn write, and the report said nothing ran."""
    _edit_line(run, 4, lambda d: {k: v for k, v in d.items() if k != "status"})
    with pytest.raises(rundir.RunDirError, match=r"records.jsonl:4: field 'status' is missing"):
        rundir.read_records(run)


def test_a_record_line_that_is_not_an_object_is_an_error(run: Path) -> None:
    _edit_line(run, 2, lambda d: [d])
    with pytest.raises(
        rundir.RunDirError, match=r"records.jsonl:2: a record must be a JSON object"
    ):
        rundir.read_records(run)


def test_a_last_line_that_is_not_utf8_is_a_torn_write(run: Path) -> None:
    with rundir.records_path(run).open("ab") as f:
        f.write(b'{"schema": 2, "model": "\xff')
    torn: list[rundir.TornLine] = []
    assert len(list(rundir.iter_records(run, torn=torn))) == 4
    assert torn[0].line_number == 5


# -- the commands: exit 2, one line, nothing written ------------------------------------------------


BAD_RECORDS = [
    (2, _set("export_s", "fast"), "export_s"),
    (3, _set("status", "weird"), "status"),
    (1, _set("ort_latency_ms.samples.0", NAN), "ort_latency_ms.samples[0]"),
    (2, _set("ort_latency_ms.p50", 1e308), "ort_latency_ms.p50"),
    (3, _set("export_peak_rss_mb", INF), "export_peak_rss_mb"),
    (4, lambda d: {k: v for k, v in d.items() if k != "model"}, "model"),
]


@pytest.mark.parametrize(("line", "edit", "field"), BAD_RECORDS)
def test_report_refuses_a_malformed_record_naming_file_line_and_field(
    capsys: pytest.CaptureFixture[str],
    run: Path,
    line: int,
    edit: Callable[[dict[str, Any]], Any],
    field: str,
) -> None:
    _edit_line(run, line, edit)
    message = one_line_error(capsys, "report", str(run), "--no-plots")
    assert f"{rundir.records_path(run)}:{line}: field {field!r}" in message
    assert not (run / "report.md").exists() and not (run / "report.html").exists()


@pytest.mark.parametrize(("line", "edit", "field"), BAD_RECORDS)
def test_compare_refuses_a_malformed_record_on_either_side(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    run: Path,
    line: int,
    edit: Callable[[dict[str, Any]], Any],
    field: str,
) -> None:
    """1e308, NaN and infinity used to end `harness compare` in math.log's ValueError."""
    other = write_run(tmp_path / "other", manifest("other"), smoke_cells(2))
    _edit_line(run, line, edit)
    for sides in ((other, run), (run, other)):
        message = one_line_error(capsys, "compare", *map(str, sides), "--out", "cmp")
        assert f"{rundir.records_path(run)}:{line}: field {field!r}" in message
    assert not Path("cmp").exists()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ([1, 2], "has schema None"),
        ({**manifest("run"), "settings": [2]}, "field 'settings' must be an object"),
        ({**manifest("run"), "hardware": 8}, "field 'hardware' must be an object"),
    ],
)
def test_report_and_compare_refuse_a_manifest_of_the_wrong_shape(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, run: Path, content: Any, expected: str
) -> None:
    other = write_run(tmp_path / "other", manifest("other"), smoke_cells(2))
    rundir.manifest_path(run).write_text(json.dumps(content))
    message = one_line_error(capsys, "report", str(run), "--no-plots")
    assert str(rundir.manifest_path(run)) in message and expected in message
    message = one_line_error(capsys, "compare", str(other), str(run))
    assert str(rundir.manifest_path(run)) in message and expected in message
    assert not (run / "report.md").exists()
