"""The decode suite against a plain script (issue 28): for five popular architectures
(LLaMA, Qwen2, Mistral, Phi-3, GPT-2), both exporters, the harness's cell (through the real
CLI) and a direct `torch.onnx.export(...)` of the same step in a fresh process
(benchmarks/plain_decode.py) must reach the same verdict (at the example shape, a prefill
and a decode step) and the same graph (op_type counts, initializers, input and output
names)."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from benchmarks import differential
from benchmarks.conftest import REPO, Figures, harness
from harness.store import rundir
from harness.store.records import Record
from harness.store.status import Stage, Status

MODELS = (
    "hf.llama.decode",
    "hf.qwen2.decode",
    "hf.mistral.decode",
    "hf.phi3.decode",
    "hf.gpt2.decode",
)
# The differential check's coarse verdicts, except that the plain script checks the
# prefill and the decode step too: a failure there is "dynamic" on both sides.
COARSE = {**differential.COARSE, Stage.DYNAMIC: "dynamic"}


@dataclass(frozen=True)
class Side:
    verdict: str
    graph: dict[str, Any] | None = None
    error: str | None = None


def harness_side(run_dir: Path, r: Record) -> Side:
    verdict = "ok" if r.stage is None else COARSE.get(r.stage, str(r.stage))
    kept = r.artifacts.get("onnx")
    if not kept:
        return Side(verdict, error=r.error_signature)
    graph = onnx.load(str(run_dir / kept), load_external_data=False).graph
    facts = {
        "ops": dict(collections.Counter(n.op_type for n in graph.node)),
        "initializers": len(graph.initializer),
        "inputs": [i.name for i in graph.input],
        "outputs": [o.name for o in graph.output],
    }
    return Side(verdict, facts, r.error_signature)


def plain_side(r: Record) -> Side:
    command = [sys.executable, str(REPO / "benchmarks" / "plain_decode.py"), "--model", r.model]
    done = subprocess.run(
        [*command, "--exporter", r.exporter, "--opset", str(r.opset)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return Side("crashed", error=(done.stderr.strip().splitlines() or ["?"])[-1][:300])
    out = json.loads(lines[-1])
    graph = {k: out[k] for k in ("ops", "initializers", "inputs", "outputs") if k in out}
    return Side(out["verdict"], graph or None, out.get("error"))


def differences(h: Side, p: Side) -> list[str]:
    found = [f"verdict {h.verdict} vs {p.verdict}"] if h.verdict != p.verdict else []
    if h.graph is not None and p.graph is not None and h.graph != p.graph:
        found += [f"{k} differ" for k in h.graph if h.graph.get(k) != p.graph.get(k)]
    return found


def test_five_popular_decoders_agree_with_a_plain_script(
    benchmark, figures: Figures, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "decode"
    benchmark.pedantic(
        lambda: harness(
            "run", "--suite", "transformers-decode", "--models", ",".join(MODELS),
            "--patches", "none", "--keep-onnx", "--out", str(out), "--no-report",
        ),
        rounds=1,
        iterations=1,
    )  # fmt: skip
    records = [r for r in rundir.read_records(out) if r.status is not Status.SKIPPED]
    assert len(records) == 2 * len(MODELS)
    rows = []
    for r in sorted(records, key=lambda r: (r.model, r.exporter)):
        h, p = harness_side(out, r), plain_side(r)
        rows.append((r, h, p, differences(h, p)))
    lines = ["| cell | harness | plain | same graph | differences |", "|---|---|---|---|---|"]
    lines += [
        f"| {r.model} {r.exporter} | {h.verdict} | {p.verdict} | {h.graph == p.graph} | {'; '.join(d) or '—'} |"
        for r, h, p, d in rows
    ]
    agree = sum(not d for *_, d in rows)
    benchmark.extra_info.update(cells=len(rows), agree=agree)
    figures.add(
        "Decode suite vs a plain script (5 architectures)",
        [f"{agree}/{len(rows)} agree", "", *lines],
    )
    assert agree == len(rows), "\n".join(lines)
