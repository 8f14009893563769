"""Node loss (issue 17): a worker node killed without grace while cells run on it and on
a survivor, TRIES times on one real local cluster (ray.cluster_utils: real raylets). Every
try must end with every cell recorded `ok`, the dead node's cell run again on the
survivor: none lost, none `crashed`. Reports how long each decision waited for Ray to
mark the node dead, and each try's wall time. (tests/e2e/test_distribution.py does two.)"""

from __future__ import annotations

import os
import random
import statistics
from pathlib import Path

from benchmarks.conftest import Figures
from tests.ray.node_loss import Try, cluster_with_a_survivor, kill_a_node_mid_run

TRIES = int(os.environ.get("HARNESS_NODE_LOSS_TRIES", "10"))


def test_node_loss(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def tries() -> list[Try]:
        cluster = cluster_with_a_survivor()
        rng = random.Random(17)
        try:
            return [
                kill_a_node_mid_run(cluster, tmp_path / f"try{i}", rng=rng) for i in range(TRIES)
            ]
        finally:
            cluster.shutdown()

    done = benchmark.pedantic(tries, rounds=1, iterations=1)
    lost = sum(t.lost for t in done)
    crashed = sum(t.crashed for t in done)
    retried = sum(t.dispatch.retried or 0 for t in done)
    failed = [p for t in done for p in t.problems()]
    settle = [t.dispatch.node_settle_s_max for t in done if t.dispatch.node_settle_s_max]
    walls = [t.wall_s for t in done]
    benchmark.extra_info.update(
        tries=TRIES, lost=lost, crashed=crashed, retried=retried, problems=failed,
        settle_s=settle, wall_s=walls,
    )  # fmt: skip
    figures.add(
        "Node loss (a worker node killed without grace mid-cell)",
        [
            "| tries | cells lost | cells crashed | cells retried | tries with a problem |"
            " node settle s (median, max) | wall s per try (median) |",
            "|---|---|---|---|---|---|---|",
            f"| {TRIES} | {lost} | {crashed} | {retried} | {sum(bool(t.problems()) for t in done)} |"
            f" {_median(settle)}, {max(settle, default=0):.1f} | {statistics.median(walls):.1f} |",
        ],
    )
    assert (lost, crashed, retried) == (0, 0, TRIES), failed
    assert not failed, failed


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"
