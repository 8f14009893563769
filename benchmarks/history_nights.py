"""90 nights of every nightly suite, for benchmarks/test_history_store.py: run directories
written from two real runs of the tiny zoo (tests/publish/simulate.py), ingested by the real
`history.add_runs`; the nights between the timed ones are the same rows (`summary.row_of`
of the same records) inserted directly, so the database holds what 90 ingestions write
without 90 x 135 MB of run directories on a shared 2-core machine. The same rows go to
Parquet files (pyarrow) and a DuckDB file for the columnar side of the comparison."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from harness.history import db as history
from harness.history.summary import COLUMNS
from harness.store.manifest import Manifest
from harness.store.rundir import read_manifest
from harness.store.runs import Run
from tests.publish.simulate import FIRST_NIGHT, failed_like, write_night

# Every suite of the nightly (nightly.yml) and its cells a night as the suite files expand
# them: smoke 3 models x 2 exporters x 3 opsets; vision 11 x 2 x 3 x 2 shapes; transformers
# 822 x 2; decode 234 x 3 exporters x 2 patches; decode-fused 234; task heads 1 099 x 2.
SUITES = {
    "smoke": 18,
    "vision": 132,
    "transformers": 1644,
    "transformers-decode": 1404,
    "transformers-decode-fused": 234,
    "transformers-tasks": 2198,
}
# Suites timed under the default protocol (thousands of samples for a fast model); the
# transformers suites' protocol (max_iters 100) gives a few hundred.
DEFAULT_PROTOCOL = ("smoke", "vision")
NIGHTS = 90
Source = list[tuple[Path, dict[str, Any]]]
_STATUS = [c.name for c in COLUMNS].index("status") + 2  # after run_id and cell


def flip(channel: str, failure: dict[str, Any]) -> Callable[[int, dict[str, Any]], dict[str, Any]]:
    """Every 9th copy of tiny_mlp fails on nights where (night + copy) % 7 == 0 (5 in the
    pre-release channel): regressions and fixes every night."""

    def edit(night: int, record: dict[str, Any]) -> dict[str, Any]:
        name = record["model"]
        copy = int(name.rsplit("_", 1)[1]) if name.startswith("tiny_mlp_") else 0
        period = 5 if channel == "pre-release" else 7
        return (
            failed_like(record, failure)
            if copy % 9 == 1 and (night + copy) % period == 0
            else record
        )

    return edit


def torch_of(channel: str, night: int) -> str:
    if channel == "pre-release":
        return "2.14.0.dev20260801+cpu"
    return "2.13.1+cpu" if night >= 60 else "2.13.0+cpu"


def write_suites(sources: dict[str, Source], out: Path, channel: str, night: int) -> list[Path]:
    failure = next(r for _, r in sources["default"] if r["status"] == "export_failed")
    return [
        write_night(
            sources["default" if suite in DEFAULT_PROTOCOL else "short"],
            out,
            night=night,
            suite=suite,
            cells=cells,
            edit=flip(channel, failure),
            versions={"torch": torch_of(channel, night)},
            hour=3 + i,
        )
        for i, (suite, cells) in enumerate(SUITES.items())
    ]


def ingest(db: Path, dirs: Sequence[Path]) -> float:
    """`harness history add` of one night's run directories; its seconds."""
    start = time.perf_counter()
    history.add_runs(db, dirs)
    return time.perf_counter() - start


@dataclasses.dataclass
class Template:
    """One ingested night, as rows, to repeat for the nights between the timed ones."""

    runs: list[Run]
    rows: dict[str, list[tuple[object, ...]]]  # run id -> record rows

    @classmethod
    def of(cls, db: Path, dirs: Sequence[Path]) -> Template:
        runs = [Run(read_manifest(d), (), str(d)) for d in dirs]
        with sqlite3.connect(db) as conn:
            rows = {
                r.run_id: conn.execute(
                    "SELECT * FROM records WHERE run_id = ?", (r.run_id,)
                ).fetchall()
                for r in runs
            }
        return cls(runs, rows)

    def night(self, night: int, channel: str) -> list[tuple[Run, list[tuple[object, ...]]]]:
        """The template's runs and rows as night `night` of `channel` (ids, dates, torch,
        and which tiny_mlp copies fail)."""
        day = FIRST_NIGHT + timedelta(days=night)
        out = []
        for run in self.runs:
            old = run.run_id
            new = f"{day:%Y%m%d}" + old[8:11] + f"{night % 60:02d}" + old[13:]
            written = run.manifest.to_dict()
            written.update(run_id=new, started=f"{day.isoformat()}" + (run.started[10:]))
            written["versions"]["base"]["torch"] = torch_of(channel, night)
            manifest = Manifest.from_dict(written)
            rows = [_night_row(row, new, night, channel) for row in self.rows[old]]
            out.append((Run(manifest, (), run.path), rows))
        return out


def _night_row(
    row: tuple[object, ...], run_id: str, night: int, channel: str
) -> tuple[object, ...]:
    model = str(row[2])
    copy = int(model.rsplit("_", 1)[1]) if model.startswith("tiny_mlp_") else 0
    period = 5 if channel == "pre-release" else 7
    status = row[_STATUS]
    if copy % 9 == 1 and status == "ok" and (night + copy) % period == 0:
        status = "export_failed"
    # Each night measures anew: every figure moves a little (a store that compresses must
    # not be flattered by 90 copies of one night).
    jitter = [
        v * (1.0 + 0.001 * ((night * 7919 + i * 104729 + zlib.crc32(model.encode())) % 97))
        if type(v) is float
        else v
        for i, v in enumerate(row[_STATUS + 1 :])
    ]
    return (run_id, row[1], *row[2:_STATUS], status, *jitter)


def insert(db: Path, night: list[tuple[Run, list[tuple[object, ...]]]], run_dir: Path) -> None:
    with history._connect(db, create=True) as conn:
        for run, rows in night:
            conn.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                history._run_row(run, run_dir),
            )
            conn.executemany(
                f"INSERT OR REPLACE INTO records VALUES ({', '.join('?' * len(rows[0]))})", rows
            )


def fill(db: Path, sources: dict[str, Source], root: Path, channel: str) -> list[float]:
    """90 nights into `db`: nights 0, 1, 2 and the last ingested from run directories
    (timed; the last night's directories kept, the site links its repros), the others
    inserted as those rows. Returns the ingestion times."""
    timed, template = [], None
    for night in range(NIGHTS):
        if night in (0, 1, 2, NIGHTS - 1):
            dirs = write_suites(sources, root / channel, channel, night)
            timed.append(ingest(db, dirs))
            template = template or Template.of(db, dirs)
            if night < NIGHTS - 1:
                for d in dirs:
                    shutil.rmtree(d)
        else:
            assert template is not None
            insert(db, template.night(night, channel), root / channel)
    return timed
