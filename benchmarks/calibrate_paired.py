"""Calibrating the graph-aware comparison (issue 14) on runs kept with `--keep-graphs`.

- **A/A runs**: two runs of one build compared as `harness compare` does: their graphs are
  identical, so no ORT-latency finding may come out of them at all; any blocking finding
  is a false alarm.
- **A/A graphs** (a null with a changed graph): each cell's kept graph against a copy with
  a free change (an extra Identity output), timed together in pairs; a blocking verdict is
  a false alarm.
- **Real slowdowns**: each cell's graph against a copy with extra work inserted: a branch
  that depends on the input (its mean, added to a 64x64 matrix, then k rounds of
  Tanh(h @ W)) and is an extra output, so ORT can neither fold nor skip it. k is set from
  the cell's own time and the branch's cost per round, measured alone, to make the model
  +5, +10, +20 or +50% slower. The pair is timed as `harness compare` times it
  (harness/cell/paired.py) and judged as it judges it (harness/compare/paired.py).
- **A shift of every cell**: at each level, whether the paired results of all cells
  together give the run-wide shift finding.

    PYTHONPATH=. python benchmarks/calibrate_paired.py RUN_DIR [RUN_DIR2] [--cells N]
        [--levels 0.05,0.1,0.2,0.5] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.cell.ort import OrtRunner
from harness.cell.paired import time_pair
from harness.compare import BLOCKING, WARNING, Thresholds, compare_runs
from harness.compare.paired import paired_finding, paired_shift
from harness.store.graphs import INPUTS, MODEL, stored_model
from harness.store.paired import PairPlan, PairResult, PairTask
from harness.store.records import Record
from harness.store.runs import Run, read_run

LEVELS = (0.05, 0.10, 0.20, 0.50)
WIDTH = 64
PROBE_ROUNDS = 200


def _branch(graph: onnx.GraphProto, x: str, rounds: int, seed: int = 0) -> None:
    """Append the extra-work branch to `graph`, fed by input `x`, as an extra output."""
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 8
    graph.initializer.extend(
        [
            numpy_helper.from_array(weight, "calib_w"),
            numpy_helper.from_array(weight.copy(), "calib_h0"),
        ]
    )
    nodes = [
        helper.make_node("Cast", [x], ["calib_xf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMean", ["calib_xf"], ["calib_mean"], keepdims=0),
        helper.make_node("Add", ["calib_h0", "calib_mean"], ["calib_h_0"]),
    ]
    for i in range(rounds):
        nodes.append(helper.make_node("MatMul", [f"calib_h_{i}", "calib_w"], [f"calib_m_{i}"]))
        nodes.append(helper.make_node("Tanh", [f"calib_m_{i}"], [f"calib_h_{i + 1}"]))
    graph.node.extend(nodes)
    out = f"calib_h_{rounds}"
    graph.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, [WIDTH, WIDTH]))


def _free_change(graph: onnx.GraphProto) -> None:
    """An Identity after the first node whose output is not a graph output: the fingerprint
    changes, ORT's optimizer removes the Identity, so the cost does not."""
    outputs = {o.name for o in graph.output}
    node = next(n for n in graph.node if n.output and n.output[0] not in outputs)
    value = node.output[0]
    node.output[0] = value + "__calib_pre"
    graph.node.insert(
        list(graph.node).index(node) + 1,
        helper.make_node("Identity", [value + "__calib_pre"], [value]),
    )


def modified(model_path: Path, dest: Path, *, rounds: int | None) -> Path:
    """A copy of the stored graph with the branch (`rounds` of work), or with a free change
    (`_free_change`) where `rounds` is None; stored like the original."""
    model = onnx.load(str(model_path), load_external_data=True)
    if rounds is None:
        _free_change(model.graph)
    else:
        _branch(model.graph, model.graph.input[0].name, rounds)
    dest.mkdir(parents=True, exist_ok=True)
    onnx.save_model(
        model,
        str(dest / MODEL),
        save_as_external_data=True,
        location=MODEL + ".data",
        size_threshold=1024,
    )
    shutil.copyfile(model_path.parent / INPUTS, dest / INPUTS)
    return dest / MODEL


def alone_ms(model_path: Path, threads: int, seconds: float = 0.5) -> float:
    """The model's median time alone (ms), its stored inputs, spinning in calls only as when paired."""
    runner = OrtRunner(model_path, threads, "cpu", spinning="in_calls")
    with np.load(model_path.parent / INPUTS) as stored:
        feeds = {n: stored[n] for n in runner.input_names}
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 10:
        t0 = time.perf_counter()
        runner.session.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times[len(times) // 3 :])


def round_cost_ms(work: Path, threads: int) -> float:
    """What one round of the branch costs (ms), from a model of the branch alone."""
    graph = helper.make_graph(
        [], "probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], []
    )
    _branch(graph, "x", PROBE_ROUNDS)
    _branch_probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    folder = work / "probe"
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save_model(_branch_probe, str(folder / MODEL))
    np.savez(folder / INPUTS, x=np.ones(4, np.float32))
    return alone_ms(folder / MODEL, threads, seconds=1.0) / PROBE_ROUNDS


def _case(
    record: Record, original: Path, other: Path, threads: int, plan: PairPlan, t: Thresholds
) -> dict[str, Any]:
    task = PairTask(record.cell.key, record.cell.label(), str(original), str(other), threads, plan)
    result = time_pair(task)
    f = paired_finding(result, record, t) if result.error is None else None
    return {
        "cell": record.cell.label(),
        "verdict": result.verdict,
        "estimate": math.exp(result.estimate) if result.pairs else None,
        "pairs": result.pairs,
        "seconds": result.seconds,
        "severity": f.severity if f else None,
        "error": result.error,
        "_result": result,
    }


def _cells(run: Run, n: int | None, seed: int) -> list[tuple[Record, Path]]:
    root = Path(run.path) if run.path else None
    kept = [(r, m) for r in run.records if r.passed and (m := stored_model(root, r)) is not None]
    if n is not None and n < len(kept):
        kept = random.Random(seed).sample(kept, n)
    return sorted(kept, key=lambda rm: rm[0].cell.key)


def calibrate(
    run: Run, *, cells: int | None, levels: Sequence[float], threads: int, seed: int = 0
) -> dict[str, Any]:
    t, plan = Thresholds(), PairPlan()
    work = Path(tempfile.mkdtemp(prefix="calibrate-paired-"))
    try:
        unit = round_cost_ms(work, threads)
        cases: dict[str, list[dict[str, Any]]] = {"aa": [], **{f"{x:g}": [] for x in levels}}
        for i, (record, model) in enumerate(_cells(run, cells, seed)):
            base_ms = alone_ms(model, threads)
            same = modified(model, work / f"{i}-same", rounds=None)
            cases["aa"].append(_case(record, model, same, threads, plan, t))
            for x in levels:
                rounds = max(1, round(x * base_ms / unit))
                slow = modified(model, work / f"{i}-{x:g}", rounds=rounds)
                case = _case(record, model, slow, threads, plan, t)
                cases[f"{x:g}"].append({**case, "rounds": rounds, "base_ms": base_ms})
            print(f"{i + 1}: {record.cell.label()} {base_ms:.3f} ms", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summarize(cases, unit, t)


def summarize(
    cases: dict[str, list[dict[str, Any]]], unit_ms: float, t: Thresholds
) -> dict[str, Any]:
    rows = {}
    for level, found in cases.items():
        results: list[PairResult] = [c.pop("_result") for c in found]
        n = len(found)
        blocking = sum(c["severity"] == BLOCKING for c in found)
        reported = sum(c["severity"] in (BLOCKING, WARNING) for c in found)
        estimates = [c["estimate"] for c in found if c["estimate"]]
        rows[level] = {
            "cases": n,
            "blocking": blocking,
            "reported": reported,
            "blocking_share": blocking / n if n else None,
            "reported_share": reported / n if n else None,
            "median_estimate": statistics.median(estimates) if estimates else None,
            "seconds_per_cell": statistics.median(c["seconds"] for c in found) if found else None,
            "shift_reported": paired_shift(results, t) is not None,
            "errors": sum(c["error"] is not None for c in found),
            "cells": found,
        }
    return {"round_cost_ms": unit_ms, "levels": rows}


def aa_runs(a: Run, b: Run) -> dict[str, Any]:
    c = compare_runs(a, b)
    ort = [f for f in c.findings if f.metric == "ort_latency"]
    return {
        "cells": len(c.cells),
        "blocking": len(c.blocking),
        "warnings": sum(f.severity == WARNING for f in c.findings),
        "ort_latency_findings": len(ort),
        "blocking_kinds": sorted({f"{f.kind}:{f.metric or ''}" for f in c.blocking}),
        "not_compared": c.not_compared,
    }


def table(summary: dict[str, Any]) -> list[str]:
    levels = summary["levels"]
    keys = [k for k in levels if k != "aa"]
    head = "| | A/A (free graph change) | " + " | ".join(f"+{float(k):.0%}" for k in keys) + " |"
    lines = [head, "|---" * (len(keys) + 2) + "|"]

    def row(name: str, field: str) -> str:
        cells = [levels["aa"], *(levels[k] for k in keys)]
        return (
            f"| {name} | "
            + " | ".join("-" if c[field] is None else f"{c[field]:.0%}" for c in cells)
            + " |"
        )

    lines += [
        row("blocking", "blocking_share"),
        row("reported (blocking or warning)", "reported_share"),
    ]
    lines.append(
        "| measured slowdown (median) | "
        + " | ".join(
            "-" if levels[k]["median_estimate"] is None else f"x{levels[k]['median_estimate']:.3f}"
            for k in ["aa", *keys]
        )
        + " |"
    )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "runs", nargs="+", type=Path, help="RUN_DIR [RUN_DIR2]: runs kept with --keep-graphs"
    )
    p.add_argument(
        "--cells", type=int, help="cells sampled (default: every ok cell with a kept graph)"
    )
    p.add_argument("--levels", default=",".join(f"{x:g}" for x in LEVELS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    runs = [read_run(r) for r in a.runs]
    levels = [float(x) for x in a.levels.split(",")]
    summary = calibrate(runs[0], cells=a.cells, levels=levels, threads=a.threads)
    if len(runs) > 1:
        summary["aa_runs"] = aa_runs(runs[0], runs[1])
    if a.out:
        a.out.write_text(json.dumps(summary, indent=2))
    print("\n".join(table(summary)))
    for k, v in summary["levels"].items():
        print(
            f"{k}: shift reported {v['shift_reported']}, {v['seconds_per_cell']} s per cell, errors {v['errors']}"
        )
    if "aa_runs" in summary:
        print(
            "A/A runs:",
            json.dumps({k: v for k, v in summary["aa_runs"].items() if k != "not_compared"}),
        )


if __name__ == "__main__":
    main()
