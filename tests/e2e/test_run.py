"""End to end: the real CLI, real exports and onnxruntime: faults, reused zygotes, a full
disk. (The records of the e2e tier's tiny run are checked in test_publish.py, which makes
its site of that run: the run is made once.)"""

from __future__ import annotations

import os
from pathlib import Path

from harness.plan.resume import resume_plan
from harness.report import summary_table
from harness.store import rundir as store
from harness.store.details import WorkerInfo
from harness.store.manifest import DispatchSlots
from tests.conftest import FIXTURES, run_cli, run_cli_on_a_small_disk


def test_crash_and_hang_become_records_and_the_run_goes_on(tmp_path: Path) -> None:
    """Every fault a model can have ends its own cell's process only (the one that kills a
    Ray worker runs in tests/ray/test_distribution.py)."""
    out = tmp_path / "faults"
    result = run_cli(
        "run",
        "--zoo",
        str(FIXTURES / "faults"),
        "--models",
        "fault_segv,fault_killed,fault_exit,fault_sysexit,fault_hang*,fault_oom,fault_neighbour",
        "--exporters",
        "torchscript",
        "--opsets",
        "17",
        "--out",
        str(out),
        # the hangs need only outlast it; the other cells (tiny, or quick to die) fit well
        "--timeout",
        "15",
        "--max-memory-gb",
        "1",
        "--no-report",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    status = {r.model: r for r in store.read_records(out)}
    assert status["fault_segv"].status == "crashed"
    assert "SIGSEGV" in (status["fault_segv"].error_message or "")
    # Killed without last words: the cell's own process, judged by its zygote at once.
    assert status["fault_killed"].status == "crashed"
    assert "SIGKILL" in (status["fault_killed"].error_message or "")
    assert status["fault_exit"].status == status["fault_sysexit"].status == "crashed"
    dispatch = store.read_manifest(out).dispatch
    assert dispatch is not None
    assert (dispatch.retried, dispatch.lost_nodes, dispatch.node_settle_s_max) == (0, (), None)
    for hang in ("fault_hang", "fault_hang_with_child"):
        assert status[hang].status == "timeout"
        assert "its worker goes on" in (status[hang].error_message or "")
    assert (status["fault_oom"].status, status["fault_oom"].stage) == ("oom", "build")
    assert status["fault_neighbour"].status == "ok"
    assert all(r.attempt == 1 for r in status.values())  # failures are never retried
    # Every fault ended its cell's process only: the zygotes went on, one per slot.
    finished = store.read_manifest(out).dispatch
    assert finished and finished.slots and finished.slots.cpu
    workers = [r.worker or WorkerInfo() for r in status.values()]
    assert len({w.zygote_pid for w in workers} - {None}) <= finished.slots.cpu
    # stdout is the summary table and nothing else: what the cells print goes to the
    # zygotes' logs, never into it
    table = summary_table(store.read_records(out))
    assert result.stdout == f"{table}\nrun directory: {out}\n"


def test_a_crash_or_hang_only_under_export_is_one_for_both_exporters(tmp_path: Path) -> None:
    """A model that crashes or hangs only while `torch.onnx.is_in_onnx_export()` does so in
    a user's direct export call, so its cells must crash and time out too (issue 13: the
    old dynamo cell captured outside the export call and passed)."""
    out = tmp_path / "export_only"
    result = run_cli(
        "run",
        "--zoo",
        str(FIXTURES / "fidelity" / "export_only.py"),
        "--models",
        "export_only_crash,export_only_hang",
        "--exporters",
        "dynamo,torchscript",
        "--opsets",
        "18",
        "--out",
        str(out),
        # longer than an honest export of these models takes, so that a hang outside the
        # export call would pass and fail the test
        "--timeout",
        "20",
        "--no-report",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = {(r.model, r.exporter): r for r in store.read_records(out)}
    for exporter in ("dynamo", "torchscript"):
        crash = found[("export_only_crash", exporter)]
        assert crash.status == "crashed" and "SIGSEGV" in (crash.error_message or ""), exporter
        assert found[("export_only_hang", exporter)].status == "timeout", exporter


def test_cells_in_one_reused_worker_run_as_if_alone(tmp_path: Path) -> None:
    """Contaminators and their victims through one Ray worker, in that order: each victim
    gets the record it gets alone, while the controls (contaminator and victim in one
    cell) show that the contamination is real (tests/runtime/test_isolation.py has every
    kind)."""
    out = tmp_path / "contamination"
    # As many threads per cell as the local Ray instance has CPUs (the harness starts it
    # with os.cpu_count()): one slot on any machine, so every cell shares one worker, in
    # order (both_*, then contaminate_*, then victim_*).
    threads = os.cpu_count() or 1
    models = [
        f"{role}_{kind}"
        for kind in ("gelu", "export", "modules")
        for role in ("contaminate", "victim")
    ]
    result = run_cli(
        "run", "--zoo", str(FIXTURES / "contamination"), "--models", ",".join([*models, "both_gelu"]),
        "--exporters", "dynamo", "--opsets", "18", "--threads", str(threads), "--out", str(out),
        "--no-report",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = {r.model: r for r in store.read_records(out)}
    assert len(records) == 7
    gelu = records["victim_gelu"].export.onnx_ops or {}
    assert records["victim_gelu"].status == "ok" and "Erf" in gelu and "Tanh" not in gelu
    assert "Tanh" in (records["both_gelu"].export.onnx_ops or {})  # the control
    assert records["victim_export"].export.opset_actual == 18
    assert records["victim_modules"].status == "skipped"
    workers = [r.worker or WorkerInfo() for r in records.values()]
    assert len({w.pid for w in workers}) == len({w.zygote_pid for w in workers}) == 1
    assert len({w.cell_pid for w in workers}) == 7
    manifest = store.read_manifest(out)
    dispatch, cluster = manifest.dispatch, manifest.cluster
    assert dispatch is not None and cluster is not None
    assert "clean_reruns" not in dispatch.to_dict()
    # The slots, from what Ray reports: its CPUs over the threads of a cell (one, here);
    # backpressure keeps exactly that many tasks in flight at a time.
    slots = int(cluster.resources["CPU"]) // threads
    assert slots == 1
    assert dispatch.slots == DispatchSlots(cpu=slots, gpu=0)
    assert (dispatch.max_in_flight, dispatch.peak_in_flight) == (slots, slots)
    assert (dispatch.driver_peak_rss_mb or 0) > 100  # a driver that imported torch and ray


def test_threads_no_node_can_hold_exit_2_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "big"
    threads = 4 * (os.cpu_count() or 1)
    result = run_cli(
        "run", "--zoo", str(FIXTURES / "tiny"), "--models", "tiny_mlp", "--exporters",
        "torchscript", "--opsets", "17", "--threads", str(threads), "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"error: --threads {threads}: this machine has {os.cpu_count()} CPUs"
    assert "Traceback" not in result.stderr and not out.exists()


def test_a_full_disk_is_one_line_and_the_run_can_be_resumed(tmp_path: Path) -> None:
    """A real ENOSPC (a 256 KiB tmpfs; a record of a timed cell is about 70 KB): the driver
    used to die in a raw OSError traceback. Records written before it survive."""
    mount, kept = tmp_path / "disk", tmp_path / "kept"
    mount.mkdir()
    kept.mkdir()
    run_dir = mount / "run"
    result = run_cli_on_a_small_disk(
        mount, 256, kept, "run", "--suite", str(FIXTURES / "tiny_suite.toml"), "--zoo",
        str(FIXTURES / "tiny"), "--models", "tiny_mlp,tiny_conv", "--exporters", "torchscript",
        "--out", str(run_dir), "--no-report",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: cannot write {run_dir / 'records.jsonl'}: No space left on device; the records"
        f" written before it are kept: make room, then `harness run --resume {run_dir}` runs"
        " the cells without one"
    )
    saved = kept / "run"
    recorded = store.read_records(saved)  # a partial last line is a torn write
    assert 0 < len(recorded) < 9 and all(r.status == "ok" for r in recorded)
    plan = resume_plan(saved)
    assert len(plan.recorded) == len(recorded) and len(plan.pending) == 9 - len(recorded)


SIZED_ZOO = """
import torch
from harness.zoo import ModelSpec

def _entry(name, weight_bytes):
    metadata = {} if weight_bytes is None else {"parameter_bytes": weight_bytes}
    return ModelSpec(name=name, family="seed", build=lambda: torch.nn.Linear(4, 2),
                     example_inputs=lambda: (torch.rand(3, 4),), metadata=metadata)

SPECS = [_entry("w_1kb", 1_000), _entry("w_unsized", None), _entry("w_3mb", 3_000_000),
         _entry("w_2mb_a", 2_000_000), _entry("w_2mb_b", 2_000_000)]
"""


def test_the_largest_models_cells_go_first_and_a_models_cells_stay_together(
    tmp_path: Path,
) -> None:
    """Cells are submitted by their model's weight bytes, largest first (the longest cells
    start while small ones fill the cores beside them); equal sizes and models that do not
    say theirs keep the zoo's order, the latter last; a model's exporters go one after the
    other."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "sized.py").write_text(SIZED_ZOO)
    out = tmp_path / "run"
    result = run_cli(
        "run", "--zoo", str(zoo), "--exporters", "torchscript,dynamo", "--opsets", "18",
        "--static-only", "--no-report", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = store.read_records(out)
    assert {r.status for r in records} == {"ok"}
    submitted = sorted(records, key=lambda r: r.worker.submitted_at if r.worker else 0.0)
    order = [r.model for r in submitted]
    assert order[::2] == ["w_3mb", "w_2mb_a", "w_2mb_b", "w_1kb", "w_unsized"]
    assert order[1::2] == order[::2]
