"""The differential check (issue 13): for each cell, the harness's verdict and graph against
a direct `torch.onnx.export(...)` in a fresh plain process (benchmarks/plain_export.py).

Verdict: where the cell stopped, at the level both sides can see: `export` (any failure
of the exporter call), `check`, `ort_session`, `ort_run`, `numerics`, else `ok` (at the
example shape; the harness's second-shape verdict has no plain counterpart), and
`runtime_missing` where ORT has no kernel for a reduced dtype. A cell's dtype and ORT
optimisation go to the plain script (`--dtype`, `--ort-opt`). Graph: the
multiset of the top-level graph's op_types and its initializer count. Every disagreement
is a bug to fix, not a row to skip.

    PYTHONPATH=. python benchmarks/differential.py RUN_DIR [--jobs 2] [--out DIR]

RUN_DIR is a `harness run --keep-onnx` run; its cells are re-done the plain way.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from harness.store import rundir
from harness.store.records import Record
from harness.store.status import Stage, Status
from harness.zoo.discovery import discover

HERE = Path(__file__).resolve().parent
COARSE = {
    Stage.CAPTURE: "export",
    Stage.TRANSLATE: "export",
    Stage.OPTIMIZE: "export",
    Stage.SAVE: "export",
    Stage.CHECK: "check",
    Stage.ORT_SESSION: "ort_session",
    Stage.ORT_RUN: "ort_run",
    Stage.NUMERICS: "numerics",
    Stage.DYNAMIC: "ok",  # the example shape passed; the second shape is the harness's own
    Stage.LATENCY: "ok",  # outputs matched before timing failed
}


@dataclass(frozen=True)
class Side:
    verdict: str
    ops: dict[str, int] | None = None
    initializers: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Row:
    record: Record
    harness: Side
    plain: Side

    @property
    def agrees(self) -> bool:
        return not self.differences

    @property
    def differences(self) -> list[str]:
        h, p = self.harness, self.plain
        found = [f"verdict {h.verdict} vs {p.verdict}"] if h.verdict != p.verdict else []
        if h.ops is not None and p.ops is not None and h.ops != p.ops:
            found.append(f"ops {_diff(h.ops, p.ops)}")
        if None not in (h.initializers, p.initializers) and h.initializers != p.initializers:
            found.append(f"initializers {h.initializers} vs {p.initializers}")
        return found


def _diff(a: dict[str, int], b: dict[str, int]) -> str:
    ca, cb = collections.Counter(a), collections.Counter(b)
    return f"harness +{dict(ca - cb)} plain +{dict(cb - ca)}"


def harness_side(run_dir: Path, r: Record) -> Side:
    """The record's verdict, and the graph of the model it kept (--keep-onnx)."""
    if r.status in (Status.TIMEOUT, Status.CRASHED, Status.OOM):
        return Side(str(r.status))
    verdict = "ok" if r.stage is None else COARSE.get(r.stage, str(r.stage))
    if r.status is Status.RUNTIME_MISSING:
        verdict = str(r.status)
    kept = r.artifacts.get("onnx")
    if not kept:
        return Side(verdict, r.export.onnx_ops, error=r.error_signature)
    graph = onnx.load(str(run_dir / kept), load_external_data=False).graph
    ops = dict(collections.Counter(n.op_type for n in graph.node))
    return Side(verdict, ops, len(graph.initializer), r.error_signature)


def plain_side(source: str, r: Record, timeout_s: float = 900) -> Side:
    command = [
        sys.executable,
        str(HERE / "plain_export.py"),
        *("--source", source, "--model", r.model, "--exporter", r.exporter),
        *("--opset", str(r.opset)),
        *(["--dynamic"] if r.dynamic else []),
        *("--dtype", str(r.cell.dtype), "--ort-opt", str(r.cell.ort_opt)),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Side("timeout")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode < 0 or not lines:
        return Side("crashed", error=(done.stderr.strip().splitlines() or ["?"])[-1][:300])
    out: dict[str, Any] = json.loads(lines[-1])
    return Side(out["verdict"], out.get("ops"), out.get("initializers"), out.get("error"))


def compare_run(run_dir: Path, *, jobs: int = 2, zoo: list[Path] | None = None) -> list[Row]:
    records = [r for r in rundir.read_records(run_dir) if r.status.ran]
    sources = {name: s.source for name, s in discover(zoo or []).models.items()}
    done = iter(range(1, len(records) + 1))

    def plain(r: Record) -> Side:
        side = plain_side(sources[r.model], r)
        print(f"[{next(done)}/{len(records)}] {r.cell.label()}: {side.verdict}", file=sys.stderr)
        return side

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        plains = list(pool.map(plain, records))
    return [Row(r, harness_side(run_dir, r), p) for r, p in zip(records, plains, strict=True)]


def markdown(rows: list[Row]) -> str:
    agree = sum(r.agrees for r in rows)
    lines = [f"Differential check: {agree}/{len(rows)} cells agree (verdict and graph).", ""]
    bad = [r for r in rows if not r.agrees]
    if bad:
        lines += ["| cell | harness | plain | differences |", "|---|---|---|---|"]
        lines += [
            f"| {r.record.cell.label()} | {r.harness.verdict} | {r.plain.verdict} "
            f"| {'; '.join(r.differences)} ({r.harness.error or r.plain.error or ''}) |"
            for r in bad
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--zoo", type=Path, action="append", default=[])
    a = p.parse_args(argv)
    rows = compare_run(a.run_dir, jobs=a.jobs, zoo=a.zoo)
    print(markdown(rows), end="")
    return 0 if all(r.agrees for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
