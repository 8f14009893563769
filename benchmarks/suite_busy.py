"""Where the test suite's wall time goes: a pytest plugin that writes, for each test, its
worker, its start and end, and how busy the machine's cores were meanwhile (from
/proc/stat), and a summary of what it wrote.

    SUITE_BUSY_DIR=DIR python -m pytest -q -n auto --dist loadgroup -p benchmarks.suite_busy
    python -m benchmarks.suite_busy DIR

The summary: each worker's span, when the Ray tier ran, the share of the span the cores
were idle, and the tests that left them idle longest (their time times the idle share):
where a test waits rather than works."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import pytest

DIR_ENV = "SUITE_BUSY_DIR"


def _busy_and_total_jiffies() -> tuple[int, int]:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    busy_before, total_before = _busy_and_total_jiffies()
    start = time.time()
    yield
    busy_after, total_after = _busy_and_total_jiffies()
    folder = Path(os.environ.get(DIR_ENV, "suite-busy"))
    folder.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    row = {
        "test": item.nodeid,
        "worker": worker,
        "start": start,
        "end": time.time(),
        "busy": (busy_after - busy_before) / max(1, total_after - total_before),
    }
    with (folder / f"{worker}.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")


@dataclass(frozen=True)
class Row:
    test: str
    worker: str
    start: float
    end: float
    busy: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def idle_s(self) -> float:
        """Its time times the share of the cores idle meanwhile (which the tests that ran
        beside it share)."""
        return self.seconds * (1 - self.busy)


def summary(folder: Path, top: int = 15) -> list[str]:
    rows = [
        Row(**json.loads(line))
        for p in sorted(folder.glob("*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    origin, workers = min(r.start for r in rows), sorted({r.worker for r in rows})
    span = max(r.end for r in rows) - origin
    lines = [f"span {span:.0f} s over {len(rows)} tests"]
    for worker in workers:
        mine = [r for r in rows if r.worker == worker]
        lines.append(
            f"{worker}: {len(mine)} tests, {sum(r.seconds for r in mine):.0f} s in tests, "
            f"last ends at {max(r.end for r in mine) - origin:.0f} s"
        )
    if ray := [r for r in rows if r.test.startswith("tests/ray/")]:
        lines.append(
            f"Ray tier: {min(r.start for r in ray) - origin:.0f} to "
            f"{max(r.end for r in ray) - origin:.0f} s, {sum(r.seconds for r in ray):.0f} s in tests"
        )
    idle_share = sum(r.idle_s for r in rows) / max(1e-9, len(workers) * span)
    lines.append(f"the cores idle {idle_share:.0%} of the span, tests weighed by their time")
    wasted = sorted(rows, key=lambda r: -r.idle_s)[:top]
    lines.extend(
        f"{r.seconds:6.1f} s  busy {r.busy:4.0%}  idle {r.idle_s:5.1f} s  {r.test}" for r in wasted
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help=f"the plugin's folder ({DIR_ENV})")
    parser.add_argument("--top", type=int, default=15, help="how many tests to list")
    args = parser.parse_args()
    if not any(args.folder.glob("*.jsonl")):
        parser.error(f"{args.folder} holds no rows: run pytest with -p benchmarks.suite_busy first")
    print("\n".join(summary(args.folder, args.top)))


if __name__ == "__main__":
    main()
