"""Any value of a persisted type that the writer can produce passes validation and reads
back equal, for every type the store declares (strategies derived from the declarations,
tests/store/strategies.py): a writer and a reader that disagree fail here."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.store import details, manifest, measures, options, rundir
from harness.store.declare import check_of
from harness.store.manifest import Manifest
from harness.store.measures import Group
from harness.store.records import SCHEMA, Record, check_record
from tests.store.strategies import part, strategy_of

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


def declared(*modules: Any) -> list[type]:
    """Every persisted type the modules declare: the dataclasses that read themselves."""
    return sorted(
        {
            value
            for module in modules
            for value in vars(module).values()
            if dataclasses.is_dataclass(value)
            and isinstance(value, type)
            and value.__module__ == module.__name__
            and (hasattr(value, "from_dict") or hasattr(value, "from_flat"))
        },
        key=lambda cls: cls.__name__,
    )


PARTS = declared(details, measures, manifest, options)


def test_the_declared_types_are_all_here() -> None:
    names = {cls.__name__ for cls in PARTS}
    assert {"ColdStart", "WorkerInfo", "Latency", "Numerics", "Settings", "RunOptions"} <= names
    assert len(PARTS) >= 25, sorted(names)


def _through_json(value: Any) -> Any:
    return json.loads(json.dumps(value, allow_nan=False))


@pytest.mark.parametrize("cls", PARTS, ids=lambda cls: cls.__name__)
@SETTINGS
@given(data=st.data())
def test_a_part_reads_back_equal_and_passes_its_check(cls: type, data: st.DataObject) -> None:
    value = data.draw(part(cls))
    if isinstance(value, Group):
        line = _through_json(value.to_flat())
        assert type(value).from_flat(line) == value
        return
    written = _through_json(details.plain(value))
    check_of(cls)(written, "")
    assert cls.from_dict(written) == value  # type: ignore[attr-defined]


RECORDS = part(Record)


@SETTINGS
@given(record=RECORDS)
def test_a_record_reads_back_equal_from_its_line(record: Record) -> None:
    line = record.to_json()
    check_record(json.loads(line))
    again = Record.from_json(line)
    assert again == record and again.cell.family == record.cell.family
    assert again.to_json() == line


@SETTINGS
@given(written=part(Manifest).map(lambda m: dataclasses.replace(m, schema=min(m.schema, SCHEMA))))
def test_a_manifest_reads_back_equal_from_its_file(written: Manifest) -> None:
    with tempfile.TemporaryDirectory() as folder:
        rundir.write_manifest(Path(folder), written)
        assert rundir.read_manifest(Path(folder)) == written


@SETTINGS
@given(given_options=strategy_of(options.RunOptions))
def test_the_run_options_read_back_from_the_manifest(given_options: options.RunOptions) -> None:
    kept = Manifest(options=_through_json(given_options.to_dict()))
    again = Manifest.from_dict(_through_json(kept.to_dict()))
    assert options.RunOptions.from_dict(dict(again.options)) == given_options
