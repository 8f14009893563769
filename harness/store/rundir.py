"""The run directory (contract, docs/design.md): `manifest.json`, `records.jsonl`, artifacts.

Records are appended and flushed one line at a time as cells finish, so a killed driver
loses nothing already measured. Nothing is written through a symlink (harness.store.files). Readers stream the file, tolerate a torn last line (the
driver died mid-write) and refuse schemas newer than this harness.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.store.declare import Malformed
from harness.store.files import RunDirError as RunDirError  # raised by the readers
from harness.store.files import WriteFailed, append_inside, write_inside
from harness.store.manifest import Manifest
from harness.store.records import SCHEMA, Record
from harness.store.status import Status

MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
ARTIFACTS = "artifacts"


@dataclass(frozen=True)
class TornLine:
    line_number: int
    text: str


def manifest_path(run_dir: Path) -> Path:
    return run_dir / MANIFEST


def records_path(run_dir: Path) -> Path:
    return run_dir / RECORDS


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """Write the manifest atomically (temp file + rename): it is rewritten at the run's end."""
    text = json.dumps(manifest.to_dict(), indent=2, sort_keys=False)
    write_inside(run_dir, MANIFEST, text + "\n")


def read_manifest(run_dir: Path) -> Manifest:
    """The run's manifest, checked (harness.store.validate); RunDirError names the file and
    the field of anything this harness would not have written."""
    path = manifest_path(run_dir)
    if not path.is_file():
        raise RunDirError(f"{run_dir} is not a run directory (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path} is unreadable: {exc}") from None
    version = manifest.get("schema") if isinstance(manifest, dict) else None
    if not isinstance(version, int) or version > SCHEMA:
        raise RunDirError(
            f"{path} has schema {version!r}; this harness reads schema {SCHEMA} and older, upgrade it"
        )
    try:
        return Manifest.from_dict(manifest)
    except Malformed as exc:
        raise RunDirError(f"{path}: {exc}") from None


def iter_lines(run_dir: Path, *, torn: list[TornLine] | None = None) -> Iterator[tuple[int, Any]]:
    """Stream the JSON lines of `records.jsonl` with their line numbers, unchecked. A line
    that is not JSON is only tolerated as the last line (a write cut short); it is reported
    through `torn` and skipped; anywhere else it is a RunDirError naming the line."""
    path = records_path(run_dir)
    if not path.is_file():
        return
    with path.open("rb") as f:
        pending: TornLine | None = None
        for number, raw in enumerate(f, start=1):
            if pending is not None:
                raise RunDirError(
                    f"{path}:{pending.line_number} is not a JSON record: {pending.text[:80]!r}"
                )
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except ValueError:  # not JSON, or not UTF-8: a torn write if it is the last line
                pending = TornLine(number, raw.decode("utf-8", "replace").rstrip("\n"))
                continue
            yield number, data
        if pending is not None and torn is not None:
            torn.append(pending)


def iter_records(run_dir: Path, *, torn: list[TornLine] | None = None) -> Iterator[Record]:
    """Stream the records of a run, each checked (harness.store.validate), as `iter_lines`
    reads them. A JSON line that is not a record this harness could have written is an
    error naming the line and the field, wherever it is."""
    path = records_path(run_dir)
    for number, data in iter_lines(run_dir, torn=torn):
        try:
            record = Record.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:  # SchemaError, Malformed
            raise RunDirError(f"{path}:{number}: {exc}") from None
        yield record


def read_records(run_dir: Path) -> list[Record]:
    return list(iter_records(run_dir))


def torn_tail(run_dir: Path) -> TornLine | None:
    """The torn last line of `records.jsonl` (a write cut short), which readers leave out."""
    torn: list[TornLine] = []
    for _ in iter_lines(run_dir, torn=torn):
        pass
    return torn[0] if torn else None


def truncate_torn_tail(run_dir: Path) -> TornLine | None:
    """Cut a torn last line off `records.jsonl` so that appending can resume cleanly."""
    torn: list[TornLine] = []
    for _ in iter_records(run_dir, torn=torn):
        pass
    path = records_path(run_dir)
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            # The last line was cut mid-write: keep everything up to the last newline.
            write_inside(run_dir, RECORDS, data[: data.rfind(b"\n") + 1])
        elif torn:
            lines = data.splitlines(keepends=True)
            write_inside(run_dir, RECORDS, b"".join(lines[: torn[0].line_number - 1]))
    return torn[0] if torn else None


def _unwritable(record: Record, error: ValueError) -> Record:
    """The cell's record when its own cannot be written: still one line, saying why."""
    reason = f"its {record.status} record could not be written as JSON: {error}"
    return Record.without_run(
        record.cell, record.run_id, status=Status.HARNESS_ERROR, reason=reason
    ).with_changes(attempt=record.attempt, duration_s=record.duration_s)


class RecordWriter:
    """Appends records to `records.jsonl`, each line in one write, then fsynced. A write the
    disk refuses (full, gone read-only) is a `WriteFailed` naming the file; the lines
    before it are whole, and `--resume` cuts a partial last one."""

    def __init__(self, run_dir: Path) -> None:
        self.path = records_path(run_dir)
        self._fd = append_inside(run_dir, RECORDS)
        self.written = 0

    def write(self, record: Record) -> None:
        try:
            line = record.to_json()
        except ValueError as exc:  # a NaN or inf (strict JSON has none): a harness bug
            line = _unwritable(record, exc).to_json()
        data = memoryview((line + "\n").encode("utf-8"))
        try:
            while data:
                data = data[os.write(self._fd, data) :]
            os.fsync(self._fd)
        except OSError as exc:
            raise WriteFailed(self.path, exc) from None
        self.written += 1

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def artifacts_dir(run_dir: Path, cell_id: str) -> Path:
    return run_dir / ARTIFACTS / cell_id
