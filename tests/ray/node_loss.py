"""Kill a worker node without grace while `harness run` has cells running on it, and read
what became of them. Shared by tests/e2e/test_distribution.py (a couple of tries) and
benchmarks/test_node_loss.py (ten). Everything is real: Ray's `cluster_utils.Cluster`
starts real raylets on this machine, and `remove_node(allow_graceful=False)` kills one."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from ray.cluster_utils import Cluster

from harness.store import rundir as store
from harness.store.manifest import DispatchSummary
from harness.store.records import Record
from tests.conftest import FIXTURES, start_cli, wait_for

# Two cells, each sleeping 8 s in its build: one runs on each single-CPU worker node.
CELLS = ("--zoo", str(FIXTURES / "slow"), "--models", "slow_0,slow_1",
         "--exporters", "torchscript", "--opsets", "17", "--no-report")  # fmt: skip


@dataclass
class Try:
    """One kill: the run's records and dispatch figures, and the node that died."""

    records: list[Record]
    dispatch: DispatchSummary
    doomed: str
    returncode: int
    stderr: str
    wall_s: float

    @property
    def lost(self) -> int:
        """Cells without a record."""
        return 2 - len({r.model for r in self.records})

    @property
    def crashed(self) -> int:
        return sum(r.status == "crashed" for r in self.records)

    def problems(self) -> list[str]:
        """What went wrong in this try; none when the dead node's cell ran again elsewhere."""
        found = [] if self.returncode == 0 else [f"exit {self.returncode}: {self.stderr[-2000:]}"]
        found += [
            f"{r.model}: {r.status} {r.error_message}" for r in self.records if r.status != "ok"
        ]
        if self.lost:
            found.append(f"{self.lost} cell(s) without a record")
        retried = [r for r in self.records if r.attempt > 1]
        if len(retried) != 1 or retried[0].worker.node == self.doomed:
            found.append(f"expected one cell run again off the dead node, got {len(retried)}")
        if self.dispatch.lost_nodes != (self.doomed,):
            found.append(f"lost_nodes {self.dispatch.lost_nodes} is not the dead node")
        return found


def kill_a_node_mid_run(cluster: Cluster, out: Path, *, rng: random.Random) -> Try:
    """Add a single-CPU node beside the cluster's survivor, start a run of two cells, and
    once a cell runs on each node, wait 0-6 s and kill the new node without grace."""
    doomed = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    started = time.perf_counter()
    proc = start_cli("run", *CELLS, "--address", cluster.address, "--out", str(out))
    try:
        crash_logs = out / ".crash"  # one per running cell: a cell runs on each node
        wait_for(lambda: len(list(crash_logs.glob("*.log"))) >= 2, timeout=180, proc=proc)
        time.sleep(rng.uniform(0, 6))
        cluster.remove_node(doomed, allow_graceful=False)
        _, stderr = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    return Try(
        records=store.read_records(out),
        dispatch=store.read_manifest(out).dispatch or DispatchSummary(),
        doomed=doomed.node_id,
        returncode=proc.returncode,
        stderr=stderr,
        wall_s=time.perf_counter() - started,
    )


def cluster_with_a_survivor() -> Cluster:
    """A head that takes no cells and one single-CPU worker node that outlives every kill."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    return cluster
