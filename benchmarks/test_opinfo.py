"""The OpInfo suite at nightly size: the full float32 matrix for both exporters at opset 18
(target: within 10 minutes on the 2-core development machine, each cell in a process of
its own), its coverage and most common errors; the dynamo registry memo's effect and its
proof of equality over every OpInfo; failing sampled cells run again, each in a fresh
zygote's child, give the same result."""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest

from benchmarks.conftest import RESULTS, Figures, harness, plain
from harness.coverage import matrix as coverage
from harness.store import rundir as store
from harness.store.records import Record
from harness.store.status import Status

TARGET_S = 10 * 60
OPINFO_RUN = RESULTS / "opinfo-float32"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


def top_signatures(records: list[Record], n: int = 10) -> list[tuple[str, int]]:
    """The most common error signatures over the failing samples (each sample once)."""
    found: Counter[str] = Counter()
    for r in records:
        listed = () if r.samples is None else r.samples.failures or ()
        for f in listed:
            found[f.error_signature or f.status] += 1
    return found.most_common(n)


def covered(records: list[Record]) -> dict[str, tuple[int, int, int, int]]:
    """exporter -> (OpInfos x dtypes ok, of those that ran; samples matched, of those run)."""
    cov = coverage.build_coverage(records)
    out: dict[str, list[int]] = {}
    for s in cov.summaries():
        t = out.setdefault(s.column.exporter, [0, 0, 0, 0])
        t[0] += s.counts[coverage.OK]
        t[1] += s.ops - s.counts[coverage.UNKNOWN]
        t[2] += s.samples_matched or 0
        t[3] += s.samples_run or 0
    return {e: (a, b, c, d) for e, (a, b, c, d) in out.items()}


def test_full_float32_matrix_within_10_minutes(figures: Figures) -> None:
    load_before = _load()
    start = time.perf_counter()
    harness(
        "run", "--suite", "opinfo-float32", "--out", str(OPINFO_RUN),
        timeout=3 * 3600,
    )  # fmt: skip
    wall = time.perf_counter() - start
    load_after = _load()
    records = store.read_records(OPINFO_RUN)
    dispatch = store.read_manifest(OPINFO_RUN).dispatch
    assert dispatch and dispatch.wall_s is not None, f"{OPINFO_RUN} did not finish"
    statuses = Counter(str(r.status) for r in records)
    lines = [
        f"`harness run --suite opinfo-float32` (both exporters, opset 18): "
        f"**{wall / 60:.1f} min** wall ({dispatch.wall_s / 60:.1f} min dispatch), "
        f"{len(records)} cells, {dispatch.cells_per_minute} cells/min; "
        f"load average (1/5/15 min) {load_before} before, {load_after} after.",
        "",
        "| exporter | OpInfos ok / ran (float32) | samples matched / run |",
        "|---|---|---|",
        *(
            f"| {e} | {a} / {b} | {c} / {d} ({c / d:.0%}) |"
            for e, (a, b, c, d) in sorted(covered(records).items())
        ),
        "",
        "Statuses: " + ", ".join(f"{s} {n}" for s, n in statuses.most_common()),
        "",
        "Most common error signatures (failing samples):",
        "",
        *(f"{i}. {n} x `{sig}`" for i, (sig, n) in enumerate(top_signatures(records), 1)),
    ]
    figures.add("OpInfo suite: full float32 matrix", lines)
    assert len(records) == len({r.cell.key for r in records})
    assert wall <= TARGET_S, f"{wall / 60:.1f} min (load {load_after})"


def test_registry_memo_gives_byte_identical_exports_over_every_opinfo(figures: Figures) -> None:
    limit = os.environ.get("HARNESS_MEMO_LIMIT", "0")
    load_before = _load()
    found = plain("opinfo_memo.py", "--limit", limit, timeout=4 * 3600)
    figures.add(
        "Dynamo registry memo",
        [
            f"{found['exports_compared']} dynamo exports (each float32 OpInfo's first sample), "
            f"with the memo and without, alternating: **{found['identical']} byte-identical** "
            f"(every file the export writes); differing: {found['differ'] or 'none'}; "
            f"OpInfos whose samples crash a process: {found['crashed_opinfos'] or 'none'}.",
            f"Median export {found['median_export_s_plain']:.3f} s without the memo, "
            f"{found['median_export_s_memo']:.3f} s with it (mean {found['mean_export_s_plain']:.3f} "
            f"vs {found['mean_export_s_memo']:.3f} s); load average {load_before} before, "
            f"{_load()} after.",
        ],
    )
    assert found["identical"] == found["exports_compared"] > 0


def test_failing_sampled_cells_fail_alike_in_a_fresh_process(figures: Figures) -> None:
    from harness.runtime.zygote import run_cell_isolated
    from harness.store.records import CellTask
    from harness.zoo.discovery import BUILTIN_ZOO

    if not (OPINFO_RUN / store.RECORDS).is_file():
        pytest.skip("run test_full_float32_matrix_within_10_minutes first")
    failing = [r for r in store.read_records(OPINFO_RUN) if r.status.ran and r.stage is not None]
    failing = [r for r in failing if _unjudged(r) is not Status.OK]
    chosen = failing[:: max(1, len(failing) // 20)][:20]
    run_id = store.read_manifest(OPINFO_RUN).run_id or OPINFO_RUN.name
    source = str(BUILTIN_ZOO / "opinfo" / "opinfo.py")
    same = 0
    for r in chosen:
        again = run_cell_isolated(CellTask(r.cell, source, run_id, str(RESULTS / "opinfo-rerun")))
        same += (again.status, again.error_signature) == (_unjudged(r), r.error_signature)
    figures.add(
        "OpInfo suite: failing cells in a fresh process",
        [f"{same} of {len(chosen)} failing cells of the full run failed alike (status and error "
         "signature) when run again each in a fresh process."],
    )  # fmt: skip
    assert same == len(chosen)


def _unjudged(r: Record) -> Status:
    """The status the worker gave, before the zoo's expectations judged it."""
    if r.status is Status.XFAIL and r.stage is not None:
        return r.stage.failure_status
    return Status.OK if r.status is Status.XPASS else r.status


def test_signatures_counts_each_failing_sample() -> None:
    r = Record.from_dict(
        json.loads(
            json.dumps(
                {
                    "schema": 2, "run_id": "r", "model": "m", "family": "opinfo",
                    "exporter": "dynamo", "opset": 18, "device": "cpu", "dynamic": False,
                    "variant": "base", "status": "export_failed",
                    "samples": {"failures": [{"error_signature": "A"}, {"error_signature": "A"}]},
                }
            )
        )
    )  # fmt: skip
    assert top_signatures([r, r]) == [("A", 4)]
