"""The figures of "Every way to an ONNX model" (benchmarks/README.md) from a run directory:
per exporter, of the architectures it ran, how many exported, matched eager's numbers and
generated eager's tokens (one prompt, a padded batch, the Generator), the median latency
ratios against the fastest way, and each way's build (export) time and peak memory; then
the failures by exporter and error line. Pure reading: `harness.store.ways` over the records.

    python benchmarks/ways_figures.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness.store import rundir
from harness.store.records import Record
from harness.store.status import Status
from harness.store.ways import SHAPES, VERDICTS, label, of_records, summary


def _records(dirs: list[Path]) -> list[Record]:
    latest = {}
    for d in dirs:
        for r in rundir.read_records(d):
            latest[r.cell.key] = r
    return list(latest.values())


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "—"


def main(dirs: list[Path]) -> None:
    records = _records(dirs)
    found = of_records(records)
    head = [
        "way",
        "architectures",
        *map(label, VERDICTS),
        "prefill vs fastest",
        "decode vs fastest",
    ]
    print("| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    for s in summary(found):
        counts = [f"{s.holds[v]}/{s.checked[v]}" if s.checked[v] else "—" for v in VERDICTS]
        ratios = [f"×{s.median_ratio[k]:.2f}" if k in s.median_ratio else "—" for k in SHAPES]
        print(f"| {s.exporter} | {s.architectures} | " + " | ".join(counts + ratios) + " |")
    print(
        "\n| way | cells | skipped | export s (median) | build s (median) | peak RSS MiB (median) |"
    )
    print("|---|---|---|---|---|---|")
    by_way: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_way[r.exporter].append(r)
    for way, rs in sorted(by_way.items()):
        export = [r.export.seconds for r in rs if r.export.seconds is not None]
        build = [p for r in rs if (p := (r.export.phases or {}).get("build")) is not None]
        rss = [r.export.peak_rss_mb for r in rs if r.export.peak_rss_mb is not None]
        skipped = sum(r.status is Status.SKIPPED for r in rs)
        print(
            f"| {way} | {len(rs)} | {skipped} | {_median(export)} | {_median(build)} | {_median(rss)} |"
        )
    print(
        "\n| architecture | "
        + " | ".join(f"{w} prefill / decode" for w in ("dynamo", "genai-builder", "mobius"))
        + " |"
    )
    print("|---|---|---|---|")
    for a in found:
        by = {w.exporter: w for w in a.ways}
        if not any(len(w.ratio) for w in a.ways):
            continue
        cells = []
        for name in ("dynamo", "genai-builder", "mobius"):
            w = by.get(name)
            cells.append(
                " / ".join(f"×{w.ratio[k]:.2f}" if w and k in w.ratio else "—" for k in SHAPES)
            )
        print(f"| {a.cell.model} | " + " | ".join(cells) + " |")
    print("\nfailures:")
    for r in sorted(records, key=lambda r: (r.exporter, r.model)):
        if (r.status.applies and not r.status.passing) or r.status is Status.XFAIL:
            first = (r.error_message or r.reason or "").splitlines()[:1]
            print(
                f"  {r.exporter:14} {r.model:34} {r.status.value:17} {first[0][:110] if first else ''}"
            )


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
