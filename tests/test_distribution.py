"""Distribution on real Ray: multi-node local clusters (ray.cluster_utils.Cluster, real
raylets), a GPU-declaring node, a node removed mid-run, a driver killed and resumed, and a
variant in its own runtime_env. Nothing is mocked; the only stand-in is the GPU node,
which declares a GPU resource without having a GPU (there is none on this machine)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray.cluster_utils import Cluster

from harness.store import rundir as store
from tests.conftest import FIXTURES, REPO, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        yield c
    finally:
        c.shutdown()


def _records(run_dir: Path) -> list:  # type: ignore[type-arg]
    return store.read_records(run_dir)


def test_gpu_cells_are_scheduled_on_the_gpu_node(cluster: Cluster, tmp_path: Path) -> None:
    gpu_node = cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.wait_for_nodes()
    out = tmp_path / "gpu"
    result = run_cli(
        "run",
        "--zoo",
        str(FIXTURES / "tiny"),
        "--models",
        "tiny_mlp",
        "--exporters",
        "torchscript",
        "--opsets",
        "17",
        "--devices",
        "cpu,cuda",
        "--address",
        cluster.address,
        "--out",
        str(out),
        "--no-report",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    by_device = {r.device: r for r in _records(out)}
    cuda = by_device["cuda"]
    # num_gpus=1 put the cell on the only node with a GPU resource; the worker then finds
    # no CUDA device (this machine has none) and records the cell as skipped, with why.
    assert cuda.worker is not None and cuda.worker["node"] == gpu_node.node_id
    assert (cuda.status, cuda.reason) == ("skipped", "no CUDA device on this worker")
    assert by_device["cpu"].status == "ok"
    manifest = store.read_manifest(out)
    assert len(manifest["cluster"]["nodes"]) == 2
    assert manifest["cluster"]["resources"]["GPU"] == 1


def test_cells_of_a_lost_node_are_retried_elsewhere(tmp_path: Path) -> None:
    # The head takes no cells: each worker node runs one cell at a time.
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        doomed = c.add_node(num_cpus=1)
        survivor = c.add_node(num_cpus=1)
        c.wait_for_nodes()
        out = tmp_path / "lost"
        proc = _start_cli(
            "run",
            "--zoo",
            str(FIXTURES / "slow"),
            "--models",
            "slow_0,slow_1",
            "--exporters",
            "torchscript",
            "--opsets",
            "17",
            "--address",
            c.address,
            "--out",
            str(out),
            "--no-report",
        )
        _wait_for(lambda: len(list((out / ".crash").glob("*.log"))) >= 2, timeout=120, proc=proc)
        c.remove_node(doomed)  # kills its raylet and the worker running a cell there
        assert proc.wait(timeout=300) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        c.shutdown()
    records = _records(out)
    assert sorted(r.model for r in records) == ["slow_0", "slow_1"]
    assert all(r.status == "ok" for r in records)
    retried = [r for r in records if r.attempt == 2]
    assert len(retried) == 1 and retried[0].worker["node"] == survivor.node_id
    assert store.read_manifest(out)["dispatch"]["retried"] == 1


def test_killed_driver_is_resumed_without_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "resume"
    proc = _start_cli(
        "run",
        "--zoo",
        str(FIXTURES / "tiny"),
        "--zoo",
        str(FIXTURES / "slow"),
        "--models",
        "tiny_*,slow_*",
        "--exporters",
        "torchscript",
        "--opsets",
        "17",
        "--out",
        str(out),
        "--no-report",
    )
    _wait_for(lambda: _line_count(out) >= 2, timeout=180, proc=proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything it started
    proc.wait()
    before = store.records_path(out).read_text().splitlines()
    with store.records_path(out).open("a") as f:
        f.write('{"schema": 1, "model": "torn')  # a write cut short by the kill
    result = run_cli("run", "--resume", str(out), "--no-report")
    assert result.returncode == 0, result.stderr[-3000:]
    records = _records(out)
    keys = [r.cell.key for r in records]
    assert len(keys) == len(set(keys)) == 6  # 3 tiny + 3 slow models, one record each
    after = store.records_path(out).read_text().splitlines()
    assert after[: len(before)] == before  # what was measured before the kill is kept as is
    assert "resuming" in result.stderr


def test_variant_runs_in_its_own_runtime_env(tmp_path: Path) -> None:
    out = tmp_path / "variant"
    result = run_cli(
        "run",
        "--zoo",
        str(FIXTURES / "tiny"),
        "--models",
        "tiny_mlp",
        "--exporters",
        "dynamo",
        "--opsets",
        "18",
        "--variant",
        "old=onnxscript==0.6.2",
        "--out",
        str(out),
        "--no-report",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    by_variant = {r.variant: r for r in _records(out)}
    assert set(by_variant) == {"base", "old"}
    assert all(r.status == "ok" for r in by_variant.values())
    versions = store.read_manifest(out)["versions"]
    assert versions["old"]["onnxscript"] == "0.6.2"
    assert versions["base"]["onnxscript"] != "0.6.2"


def _start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _line_count(run_dir: Path) -> int:
    path = store.records_path(run_dir)
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _wait_for(condition, *, timeout: float, proc: subprocess.Popen[str]) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            raise AssertionError(
                f"the run ended early: {proc.stderr.read() if proc.stderr else ''}"
            )
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def ray_start_head(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A cluster started the way the README says (`ray start --head`), with token
    authentication as Ray >= 2.59 turns on for `ray start`; its own token, so nothing in
    ~/.ray matters. Yields its address and the environment a client needs."""
    port = _free_port()
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    head = subprocess.Popen(
        ["ray", "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
         "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--include-dashboard=false"],
        env={**os.environ, **auth},
        stdout=(tmp_path / "ray-start.log").open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield f"127.0.0.1:{port}", auth
    finally:
        head.terminate()  # --block: ray start stops the processes it started
        head.wait(timeout=60)


def test_a_ray_start_cluster_is_joined_and_never_captures_a_local_run(
    ray_start_head: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, auth = ray_start_head
    tiny = ["--zoo", str(FIXTURES / "tiny"), "--models", "tiny_mlp", "--exporters", "torchscript",
            "--opsets", "17", "--no-report"]  # fmt: skip
    joined = run_cli("run", *tiny, "--address", address, "--out", str(tmp_path / "j"), env=auth)
    assert joined.returncode == 0, joined.stderr[-3000:]
    cluster = store.read_manifest(tmp_path / "j")["cluster"]
    (record,) = _records(tmp_path / "j")
    assert record.status == "ok"
    assert cluster["resources"]["CPU"] == 1  # the head's --num-cpus, not this machine's
    assert record.worker["node"] == cluster["nodes"][0]["node_id"]
    # Without --address the run starts its own instance, although `ray start` left a
    # cluster on this machine (plain ray.init() would join it and refuse num_cpus).
    local = run_cli("run", *tiny, "--out", str(tmp_path / "l"), env=auth)
    assert local.returncode == 0, local.stderr[-3000:]
    mine = store.read_manifest(tmp_path / "l")["cluster"]
    assert mine["address"] == "local"
    assert mine["resources"]["CPU"] == os.cpu_count()
    assert {n["node_id"] for n in mine["nodes"]}.isdisjoint({cluster["nodes"][0]["node_id"]})
    # Without the token the join is refused: exit 2, a line that says what to set, no run.
    refused = run_cli("run", *tiny, "--address", address, "--out", str(tmp_path / "r"))
    assert refused.returncode == 2
    assert "RAY_AUTH_MODE=token" in refused.stderr.strip().splitlines()[-1]
    assert "Traceback" not in refused.stderr and not (tmp_path / "r").exists()
