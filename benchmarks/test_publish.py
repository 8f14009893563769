"""`harness publish` at the nightly's size (issue 38): 90 nights of the CPU suites (smoke,
vision, transformers, transformers-decode: 2 262 cells a night) in two channels, simulated
from one real run (tests/publish/simulate.py: its records repeated under new model names,
a few statuses flipping, torch moving), built into a site. Target: under 30 s. The
simulated records keep 5 latency samples each (a real one keeps hundreds); the site reads
only p50 of them."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.conftest import Figures, harness
from harness.history import db as history
from harness.publish.site import publish
from tests.publish.simulate import NIGHTLY_SUITES, failed_like, real_records, write_night

NIGHTS = 90
TARGET_S = 30.0
TINY = Path(__file__).resolve().parent.parent / "tests" / "zoo_fixtures" / "tiny"


def _edit(channel: str, failure: dict[str, Any]) -> Any:
    """Every 9th copy of tiny_mlp fails on nights where (night + copy) % 7 == 0, and more
    of them in the pre-release channel: regressions and fixes every night."""

    def edit(night: int, record: dict[str, Any]) -> dict[str, Any]:
        name = record["model"]
        copy = int(name.rsplit("_", 1)[1]) if name.startswith("tiny_mlp_") else 0
        period = 5 if channel == "pre-release" else 7
        if copy % 9 == 1 and (night + copy) % period == 0:
            return failed_like(record, failure)
        return record

    return edit


def _history(db: Path, runs: Path, channel: str, source: list[Any], failure: Any) -> None:
    for night in range(NIGHTS):
        torch = "2.14.0.dev20260801+cpu" if channel == "pre-release" else "2.13.0+cpu"
        if channel == "stable" and night >= 60:
            torch = "2.13.1+cpu"
        dirs = [
            write_night(
                source,
                runs / channel,
                night=night,
                suite=suite,
                cells=cells,
                edit=_edit(channel, failure),
                versions={"torch": torch},
                keep_samples=5,
                hour=3 + i,
            )
            for i, (suite, cells) in enumerate(NIGHTLY_SUITES.items())
        ]
        history.add_runs(db, dirs)
        if night < NIGHTS - 1:  # only the newest night's directories are read (its repros)
            for d in dirs:
                shutil.rmtree(d)


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("publish")
    real = root / "real"
    harness(
        "run", "--zoo", str(TINY), "--exporters", "dynamo,torchscript", "--opsets", "18",
        "--static-only", "--repro-bound", "0", "--out", str(real), "--no-report",
    )  # fmt: skip
    source = real_records([real])
    failure = next(r for _, r in source if r["status"] == "export_failed")
    dbs = {}
    for channel in ("stable", "pre-release"):
        dbs[channel] = root / f"{channel}.sqlite"
        _history(dbs[channel], root / "runs", channel, source, failure)
    return dbs


def _build(histories: dict[str, Path], out: Path) -> tuple[Any, float]:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    done = publish(histories, out)
    return done, time.perf_counter() - start


def _line(name: str, done: Any, seconds: float, out: Path) -> str:
    biggest = max((p for p in out.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    return (
        f"- {name}: build {seconds:.1f} s; site {done.files} files, "
        f"{done.bytes / 2**20:.1f} MiB (the biggest, {biggest.relative_to(out).parent}/, "
        f"{biggest.stat().st_size / 1024:.0f} KiB)"
    )


def test_publish_90_nights_of_the_nightly(  # type: ignore[no-untyped-def]
    benchmark, figures: Figures, histories: dict[str, Path], tmp_path: Path
) -> None:
    stable = {"stable": histories["stable"]}
    one, one_s = benchmark.pedantic(_build, (stable, tmp_path / "one"), rounds=1, iterations=1)
    both, both_s = _build(histories, tmp_path / "both")
    db_mb = sum(p.stat().st_size for p in histories.values()) / 2**20 / 2
    lines = [
        f"- {NIGHTS} nights x {sum(NIGHTLY_SUITES.values())} cells a channel "
        f"(a history database of {db_mb:.0f} MB each), target {TARGET_S:.0f} s",
        _line("stable only", one, one_s, tmp_path / "one"),
        _line("stable and pre-release", both, both_s, tmp_path / "both"),
    ]
    figures.add("Publish (90 nights of the nightly's CPU suites)", lines)
    benchmark.extra_info.update(seconds=one_s, both_seconds=both_s, bytes=one.bytes)
    print("\n".join(lines))
    assert both.nights == {"stable": NIGHTS, "pre-release": NIGHTS}
    assert one_s < TARGET_S
