"""A paired record's ORT p50 against a plain script (issue 47's measure, since the real-size
suite's `ort_from_pairs`): each exporter's record takes its ORT latency at 1 thread from its
graph's calls in the exporter pair, interleaved with the other exporter's graph. Does that
p50 agree with an engineer's back-to-back loop of the one graph in a fresh process? Target:
within +-10% (the median of the pairs' ratios).

Per model, `harness run --local` of the suite's two cells of the model (dynamo and
TorchScript, 1 thread: the suite's) and `plain_real_size.py` for each exporter, in ABBA
order (harness, plain, plain, harness), each alone on the machine; the plain loop as many
calls as the first harness record's. HARNESS_REAL_SIZE_MODELS: a comma-separated list of
models; HARNESS_REAL_SIZE_ROUNDS: ABBA rounds (1: two pairs per exporter).
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from benchmarks.conftest import Figures, harness, plain
from harness.store import rundir as store

# an encoder, a speech encoder-decoder, a decoder, and Qwen3-0.6B (weights past 2 GB)
MODELS = ["real.bert_base", "real.whisper_base", "real.smollm2_360m", "real.qwen3_0_6b"]
EXPORTERS = ("dynamo", "torchscript")
ROUNDS = int(os.environ.get("HARNESS_REAL_SIZE_ROUNDS", "1"))


def _models() -> list[str]:
    chosen = os.environ.get("HARNESS_REAL_SIZE_MODELS")
    return chosen.split(",") if chosen else MODELS


def _harness_pair(model: str, out: Path) -> dict[str, tuple[float, int]]:
    """Each exporter's record: its ORT p50 (ms) and calls, as its pair timed them."""
    harness(
        "run", "--suite", "real-size", "--models", model, "--local", "--out", str(out),
        "--no-report", "--repro-bound", "0",
    )  # fmt: skip
    found = {}
    for r in store.read_records(out):
        assert r.status == "ok" and r.ort.latency is not None, (r.status, r.error_message)
        assert r.ort.timed_in == "pair", r.ort.timed_in
        found[r.exporter] = (r.ort.latency.p50, len(r.ort.latency.samples))
    return found


def _plain_p50(model: str, exporter: str, iters: int) -> float:
    found = plain(
        "plain_real_size.py", "--model", model, "--exporter", exporter,
        "--ort-iters", str(iters), "--threads", "1", timeout=1800,
    )  # fmt: skip
    return float(found["ort_p50_ms"])


def _rounds(model: str, tmp_path: Path) -> dict[str, list[tuple[float, float]]]:
    """Per exporter, (harness p50, plain p50) of each pair of every ABBA round."""
    pairs: dict[str, list[tuple[float, float]]] = {e: [] for e in EXPORTERS}
    for n in range(ROUNDS):
        first = _harness_pair(model, tmp_path / f"{model}-{n}a")
        plains = {e: [_plain_p50(model, e, first[e][1]) for _ in range(2)] for e in EXPORTERS}
        second = _harness_pair(model, tmp_path / f"{model}-{n}b")
        for e in EXPORTERS:
            pairs[e] += [(first[e][0], plains[e][0]), (second[e][0], plains[e][1])]
    return pairs


def test_paired_records_agree_with_a_plain_loop(figures: Figures, tmp_path: Path) -> None:
    rows, worst = [], 0.0
    for model in _models():
        for exporter, pairs in _rounds(model, tmp_path).items():
            ratios = [h / p for h, p in pairs]
            middle = statistics.median(ratios)
            worst = max(worst, abs(middle - 1))
            harnessed = statistics.median(h for h, _ in pairs)
            plained = statistics.median(p for _, p in pairs)
            rows.append(
                f"| {model} {exporter} | {harnessed:.4g} / {plained:.4g} = **{middle:.2f}** "
                f"({min(ratios):.2f}-{max(ratios):.2f}) |"
            )
            print(rows[-1], flush=True)  # with `-s`: a run stopped early keeps its rows
    figures.add(
        f"Paired records' ORT p50 against a plain loop (harness / plain, 1 thread, median of"
        f" {2 * ROUNDS} pairs)",
        [
            "| cell | ORT p50 ms |",
            "|---|---|",
            *rows,
            "",
            f"largest distance from 1: {worst:.1%} (target 10%)",
        ],
    )
