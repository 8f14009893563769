"""The record codec over 100 000 records (benchmarks/record_codec.py): `Record.to_json` for
each, then `rundir.read_records` (JSON, upgrade, the check derived from the declarations,
the typed record). Target (issue 34): no more than 10% slower than the hand-written codec
it replaced; compare two checkouts by running record_codec.py with each on PYTHONPATH,
interleaved (the figures and the command are in benchmarks/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.conftest import Figures
from benchmarks.record_codec import sample_records, write_and_read

RECORDS = int(os.environ.get("HARNESS_CODEC_RECORDS", "100000"))


def test_record_codec_write_and_read(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    records = sample_records(RECORDS)
    write_s, read_s = benchmark.pedantic(
        lambda: write_and_read(records, tmp_path), rounds=3, iterations=1
    )
    benchmark.extra_info.update(records=RECORDS, write_s=write_s, read_s=read_s)
    figures.add(
        f"Record codec ({RECORDS} records)",
        [f"write {write_s:.2f} s, read {read_s:.2f} s (the last of 3 rounds)"],
    )
    assert write_s > 0 and read_s > 0
