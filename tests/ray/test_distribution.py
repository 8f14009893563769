"""Distribution on real Ray: multi-node local clusters (ray.cluster_utils.Cluster, real
raylets), a GPU-declaring node, nodes of unequal memory, a node killed without grace
mid-run, a cell that kills its Ray worker, cells waiting in Ray's queue, and a cluster
started by `ray start` (a driver killed and resumed is tests/test_resume.py's; variants in
runtime_envs are test_bisect.py's and test_publish_channels.py's). Nothing is mocked; the
only stand-in is the GPU node, which declares a GPU resource without having a GPU (there
is none on this machine)."""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray
from ray._private import ray_constants
from ray._private.node import Node as ClusterNode
from ray.cluster_utils import Cluster

from harness.dispatch import driver
from harness.dispatch.policy import NODE_SETTLE_S
from harness.report import summary_table
from harness.store import rundir as store
from harness.store.manifest import DispatchSlots
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask, Record
from tests.conftest import FIXTURES, process_table, run_cli


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        yield c
    finally:
        c.shutdown()


def _records(run_dir: Path) -> list:  # type: ignore[type-arg]
    return store.read_records(run_dir)


@pytest.fixture(scope="module")
def unequal_nodes() -> Iterator[tuple[Cluster, ClusterNode, ClusterNode]]:
    """A head without CPUs, a node with 2 CPUs, a GPU and 4 GB of memory, and one with a
    CPU and 24 GB (Ray's `memory` resource): one cluster boot for the tests of placement."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        gpu_node = c.add_node(num_cpus=2, num_gpus=1, memory=4 * 1024**3)
        large = c.add_node(num_cpus=1, memory=24 * 1024**3)
        c.wait_for_nodes()
        yield c, gpu_node, large
    finally:
        c.shutdown()


def test_gpu_cells_are_scheduled_on_the_gpu_node_one_per_gpu(
    unequal_nodes: tuple[Cluster, ClusterNode, ClusterNode], tmp_path: Path
) -> None:
    c, gpu_node, _ = unequal_nodes
    out = tmp_path / "gpu"
    result = run_cli(
        "run", "--zoo", str(FIXTURES / "tiny"), "--models", "tiny_mlp,tiny_conv",
        "--exporters", "torchscript", "--opsets", "17", "--devices", "cpu,cuda",
        "--address", c.address, "--out", str(out), "--no-report", ray=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = _records(out)
    cuda = [r for r in records if r.device == "cuda"]
    assert len(cuda) == 2 and len(records) == 4
    for r in cuda:
        # num_gpus=1 put the cell on the only node with a GPU resource; the worker then
        # finds no CUDA device (this machine has none) and records the cell as skipped.
        assert r.worker is not None and r.worker.node == gpu_node.node_id
        assert (r.status, r.reason) == ("skipped", "no CUDA device on this worker")
    assert all(r.status == "ok" for r in records if r.device == "cpu")
    manifest = store.read_manifest(out)
    assert manifest.cluster and manifest.dispatch
    assert len(manifest.cluster.nodes) == 3
    # each node's base environment, probed there (the head node has no CPU to give)
    torch = manifest.variant_versions()["torch"]
    assert torch and [n.versions.get("torch") for n in manifest.cluster.nodes] == [torch] * 3
    assert manifest.cluster.resources["GPU"] == 1
    # Slots per resource: three CPU cells at once, one of them may be a CUDA cell; the
    # second CUDA cell waited in the driver (not in Ray's queue) for the one GPU.
    dispatch = manifest.dispatch
    assert dispatch.slots == DispatchSlots(cpu=3, gpu=1)
    assert dispatch.peak_in_flight_gpu == 1 and (dispatch.peak_in_flight or 0) <= 3


def test_cells_are_placed_by_their_memory_need_and_one_no_node_holds_is_skipped(
    unequal_nodes: tuple[Cluster, ClusterNode, ClusterNode], tmp_path: Path
) -> None:
    """Two nodes that declare different memory (Ray's `memory` resource): a cell whose
    weights need more than the small node has runs on the large one, one that needs more
    than either is skipped saying both figures, a small one runs anywhere. (The models say
    their weights are large: harness.plan.memory sizes the need from that.)"""
    c, _, large = unequal_nodes
    out = tmp_path / "sized"
    result = run_cli(
        "run", "--zoo", str(FIXTURES / "sized"), "--exporters", "torchscript",
        "--opsets", "17", "--address", c.address, "--out", str(out), "--no-report",
        ray=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    by_model = {r.model: r for r in _records(out)}
    mid, huge, small = (by_model[f"sized_{n}"] for n in ("mid", "huge", "small"))
    assert mid.status == "ok" and mid.worker is not None and mid.worker.node == large.node_id
    assert small.status == "ok"
    assert huge.status == "skipped" and huge.worker is None
    assert "needs 121.5 GB of memory" in (huge.reason or "")
    assert "the largest node offers 24.0 GB" in (huge.reason or "")


def test_after_a_node_died_a_real_crash_on_a_live_node_is_not_retried(tmp_path: Path) -> None:
    """The one real node kill of the suite (the decisions around it are tested without Ray
    in tests/dispatch/test_policy.py; benchmarks/test_node_loss.py kills ten times through
    the CLI). A node is killed without grace mid-run: its cell runs again on the survivor,
    once Ray has marked the node dead, within the bound. Later cells crash by themselves on
    the survivor, one with a faulthandler log and one killed without last words: both end
    their own process only, whose zygote says so (`crashed`, never retried) without
    waiting for the node's state to settle."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    survivor = c.add_node(num_cpus=1)
    doomed = c.add_node(num_cpus=1)
    c.wait_for_nodes()
    slow, faults = FIXTURES / "slow" / "slow.py", FIXTURES / "faults" / "faults.py"
    tasks = [_cell_task(slow, "slow_0", tmp_path), _cell_task(slow, "slow_1", tmp_path),
             _cell_task(faults, "fault_segv", tmp_path), _cell_task(faults, "fault_killed", tmp_path)]  # fmt: skip

    raylet = doomed.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid

    def kill_once_the_doomed_node_runs_a_slow_cell() -> None:
        """Its first cell is a slow one (each node has one CPU, the slow cells go first);
        waiting for both slow cells at once instead missed them on a loaded machine, where
        one node's worker started after the other's cell had ended."""
        deadline = time.monotonic() + 180
        while not (_runs_a_cell(raylet) and list((tmp_path / ".crash").glob("slow_*.log"))):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        c.remove_node(doomed, allow_graceful=False)

    records: list[Record] = []
    ray.init(address=c.address, log_to_driver=False)
    try:
        killer = threading.Thread(target=kill_once_the_doomed_node_runs_a_slow_cell, daemon=True)
        killer.start()
        stats = driver.run_tasks(tasks, records.append, timeout_s=180, settle_s=20)
        killer.join()
    finally:
        ray.shutdown()
        c.shutdown()
    by_model = {r.model: r for r in records}
    assert len(records) == len(by_model) == 4
    assert by_model["slow_0"].status == by_model["slow_1"].status == "ok"
    assert sorted(r.attempt for r in records if r.model.startswith("slow")) == [1, 2]
    for fault in ("fault_segv", "fault_killed"):
        r = by_model[fault]
        assert (r.status, r.attempt) == ("crashed", 1), (fault, r.status, r.error_message)
        assert r.worker is not None and r.worker.node == survivor.node_id
    assert "SIGSEGV" in (by_model["fault_segv"].error_message or "")
    assert (stats.retried, stats.lost_nodes) == (1, {doomed.node_id})
    assert len(stats.settle_waits_s) == 1  # the lost node's cell only
    assert 0 < stats.settle_waits_s[0] < NODE_SETTLE_S  # waited for Ray, within the bound


def _runs_a_cell(raylet: int) -> bool:
    """Whether a cell's process runs under this raylet: a child of a zygote, which is a
    child of one of its workers (raylet -> worker -> zygote -> cell)."""
    parents = {pid: int(fields[1]) for pid, fields in process_table().items()}
    depth = {raylet: 0}
    for _ in range(3):
        depth |= {pid: depth[ppid] + 1 for pid, ppid in parents.items() if ppid in depth}
    return 3 in depth.values()


def test_a_cell_waiting_in_rays_queue_is_not_timing_out(cluster: Cluster, tmp_path: Path) -> None:
    """Five 8-second cells submitted at once to one CPU (max_in_flight over the slots, as
    on a cluster whose slots are fragmented): four wait in Ray's queue. Their clocks start
    when they run, so none reaches the timeout (each runs 10-30 s, by the load here), though
    the last one finishes after more than 40 s of sleeps alone since its submission, when a
    timeout counted from submission would have ended it. And they run one at a time."""
    timeout_s = 40.0
    slow = FIXTURES / "slow" / "slow.py"
    cells = [("slow_0", 17), ("slow_1", 17), ("slow_2", 17), ("slow_0", 18), ("slow_1", 18)]
    tasks = [_cell_task(slow, model, tmp_path, opset=opset) for model, opset in cells]
    records: list[Record] = []
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        stats = driver.run_tasks(tasks, records.append, timeout_s=timeout_s, max_in_flight=5)
    finally:
        ray.shutdown()
    assert sorted(r.status for r in records) == ["ok"] * 5, [r.error_message for r in records]
    assert stats.peak_in_flight == 5 and stats.timeouts == 0
    waits = [r.worker.finished_at - r.worker.submitted_at for r in records]
    assert max(waits) > timeout_s, waits
    # One cell at a time on the one CPU: a task blocked in `ray.get` (its start report, once)
    # gives its CPU back, and Ray started a queued cell beside it.
    spans = sorted((r.worker.started_at, r.worker.finished_at) for r in records)
    assert all(later[0] > earlier[1] for earlier, later in itertools.pairwise(spans)), spans


def _cell_task(source: Path, model: str, run_dir: Path, *, opset: int = 17) -> CellTask:
    quick = Protocol(warmup_min_iters=2, warmup_max_s=0.1, min_iters=5, min_time_s=0.02)
    cell = Cell(model, "torchscript", opset)
    return CellTask(cell, str(source), "r", str(run_dir), protocol=quick)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_start_head(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str]]]:
    """A cluster started the way docs/guide/running.md says (`ray start --head`), with token
    authentication as Ray >= 2.59 turns on for `ray start`; its own token, so nothing in
    ~/.ray matters. Yields its address and the environment a client needs. For this
    module's last two tests only (nothing else runs beside it)."""
    port = _free_port()
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    log = tmp_path_factory.mktemp("ray-start") / "ray-start.log"
    head = subprocess.Popen(
        ["ray", "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
         "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--include-dashboard=false"],
        env={**os.environ, **auth},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield f"127.0.0.1:{port}", auth
    finally:
        head.terminate()  # --block: ray start stops the processes it started
        head.wait(timeout=60)


@dataclass(frozen=True)
class LocalRun:
    out: Path
    result: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def local_beside_the_head(
    ray_start_head: tuple[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> LocalRun:
    """A run without --address while `ray start` has a cluster on this machine: it starts
    a Ray instance of its own. Its cells are a cell that kills its Ray worker and a
    neighbour: one Ray boot for both tests below."""
    _, auth = ray_start_head
    out = tmp_path_factory.mktemp("local") / "kills"
    result = run_cli(
        "run", "--zoo", str(FIXTURES / "faults"), "--models", "fault_kills_worker,fault_neighbour",
        "--exporters", "torchscript", "--opsets", "17", "--out", str(out), "--timeout", "60",
        "--no-report", env=auth, ray=True,
    )  # fmt: skip
    return LocalRun(out, result)


def test_a_ray_start_cluster_is_joined_and_never_captures_a_local_run(
    ray_start_head: tuple[str, dict[str, str]], local_beside_the_head: LocalRun, tmp_path: Path
) -> None:
    address, auth = ray_start_head
    tiny = ["--zoo", str(FIXTURES / "tiny"), "--models", "tiny_mlp", "--exporters", "torchscript",
            "--opsets", "17", "--no-report"]  # fmt: skip
    joined = run_cli(
        "run", *tiny, "--address", address, "--out", str(tmp_path / "j"), env=auth, ray=True
    )
    assert joined.returncode == 0, joined.stderr[-3000:]
    cluster = store.read_manifest(tmp_path / "j").cluster
    (record,) = _records(tmp_path / "j")
    assert record.status == "ok" and cluster is not None
    assert cluster.resources["CPU"] == 1  # the head's --num-cpus, not this machine's
    assert record.worker is not None and record.worker.node == cluster.nodes[0].node_id
    # Without --address the run starts its own instance, although `ray start` left a
    # cluster on this machine (plain ray.init() would join it and refuse num_cpus).
    local = local_beside_the_head.result
    assert local.returncode == 0, local.stderr[-3000:]
    mine = store.read_manifest(local_beside_the_head.out).cluster
    assert mine is not None and mine.address == "local"
    assert mine.resources["CPU"] == os.cpu_count()
    assert {n.node_id for n in mine.nodes}.isdisjoint({cluster.nodes[0].node_id})
    # Without the token the join is refused: exit 2, a line that says what to set, no run.
    refused = run_cli("run", *tiny, "--address", address, "--out", str(tmp_path / "r"), ray=True)
    assert refused.returncode == 2
    assert "RAY_AUTH_MODE=token" in refused.stderr.strip().splitlines()[-1]
    assert "Traceback" not in refused.stderr and not (tmp_path / "r").exists()


def test_a_cell_that_kills_its_ray_worker_is_a_crash_and_the_run_goes_on(
    local_beside_the_head: LocalRun,
) -> None:
    """A cell that kills its Ray worker (its zygote's parent) is `crashed`, never retried:
    its node lives. The worker is replaced for the next cell, and Ray's "(raylet) A worker
    died ..." lines go to stderr, never into stdout's summary table. (The run is the one
    that starts its own Ray instance beside a `ray start` cluster, above.)"""
    out, result = local_beside_the_head.out, local_beside_the_head.result
    assert result.returncode == 0, result.stderr[-3000:]
    status = {r.model: r for r in _records(out)}
    assert (status["fault_kills_worker"].status, status["fault_kills_worker"].attempt) == (
        "crashed",
        1,
    )
    assert "worker process died" in (status["fault_kills_worker"].error_message or "")
    assert status["fault_neighbour"].status == "ok"
    table = summary_table(_records(out))
    assert result.stdout == f"{table}\nrun directory: {out}\n"
    assert "(raylet)" in result.stderr
