"""Module-level minimal repros of real transformers failures the graph minimizer cannot
take (issue 37; docs/guide/repro.md): each cell run again, then `harness repro`'s runner
with the default bound, and per cell the module kept, its parameters and tree depth before
and after, the minimizer's time and whether the script reproduces in a fresh process.

    python -m pytest benchmarks/test_repro_modules.py
    HARNESS_REPRO_CELLS="hf.fsmt:dynamo,hf.led:dynamo" python -m pytest benchmarks/test_repro_modules.py

The sweep-wide figures (clusters with a verified repro, by method) come from
benchmarks/test_repro_figures.py over a finished sweep."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from benchmarks.conftest import Figures
from harness.repro import runner
from harness.repro.figures import figures as repro_figures
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Record
from harness.store.rundir import RecordWriter, read_records

SOURCE = Path(__file__).resolve().parent.parent / "model_zoo" / "transformers" / "architectures.py"
# Capture failures of model_zoo/transformers/_expected.csv: data-dependent guards under
# dynamo, TorchScript's tracer on aten::scatter.
DEFAULT_CELLS = "hf.fsmt:dynamo,hf.led:dynamo,hf.longformer:dynamo,hf.hy_v4:torchscript"
BOUND_S = 60.0


def _line(record: Record) -> str:
    m = record.minimal_repro
    assert m is not None
    x = m.extra
    head = f"{record.model} {record.exporter} ({m.kind}, method {m.method})"
    if not x.get("module"):
        return f"{head}: no module repro, {m.wall_s} s: {m.reason}"
    return (
        f"{head}: kept {x['module']} ({x.get('module_class')}), parameters"
        f" {x['params_before']:,} -> {x.get('params_after') or 0:,}, depth {x['depth_before']}"
        f" -> {x.get('depth_after')}, {len(x.get('replaced') or [])} items replaced,"
        f" {m.tests} tests, search {m.seconds} s (complete: {m.search_complete}), wall"
        f" {m.wall_s} s, reproduces {m.reproduces}"
    )


def test_module_repros_of_real_failures(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cells = [c.split(":") for c in os.environ.get("HARNESS_REPRO_CELLS", DEFAULT_CELLS).split(",")]
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def make() -> list[Record]:
        records = [
            run_cell(CellTask(Cell(model, exporter, 18), str(SOURCE), "bench", str(run_dir)))
            for model, exporter in cells
        ]
        with RecordWriter(run_dir) as writer:
            for r in records:
                writer.write(r)
        sources = {model: str(SOURCE) for model, _ in cells}
        start = time.monotonic()
        runner.make_repros(run_dir, records, sources, bound_s=BOUND_S, jobs=1)
        benchmark.extra_info["repro_wall_s"] = round(time.monotonic() - start, 1)
        return read_records(run_dir)

    records = benchmark.pedantic(make, rounds=1, iterations=1)
    lines = [_line(r) for r in records if r.minimal_repro is not None]
    lines += ["", *repro_figures([r for r in records if r.minimal_repro]).lines()]
    benchmark.extra_info.update(json.loads(json.dumps({"lines": lines})))
    figures.add("Module-level minimal repros of real transformers failures", lines)
    assert all(r.minimal_repro is not None for r in records)
