"""Every cell in a process of its own, forked from the worker's zygote (no Ray: this test
process plays the worker). Real processes, real exports, a real onnxruntime.

The guarantee, not the mechanism: a victim model's record is the same whether it runs
alone or right after a model that changes process-global state, in the same zygote; and
each such pair really does contaminate when both run in one process (the `both_<kind>`
entries: the contaminator's build, then the victim's, in one cell)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cell.node import FOLDER_ENV
from harness.runtime import exits
from harness.runtime.exits import ChildExit, judge_exit
from harness.runtime.zygote import _WORKER, run_cell_isolated
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Status
from harness.zoo import ModelSpec
from tests.conftest import FIXTURES
from tests.zoo_fixtures.contamination.models import KINDS
from tests.zoo_fixtures.faults.faults import LEFT_BEHIND

QUICK = Protocol(warmup_min_iters=2, warmup_max_s=0.1, min_iters=5, min_time_s=0.02, max_time_s=0.2)
CONTAMINATION = FIXTURES / "contamination" / "models.py"
FAULTS = FIXTURES / "faults" / "faults.py"
HOARD = FIXTURES / "hoard" / "hoard.py"
STICKY = FIXTURES / "sticky" / "sticky.py"
# TorchScript symbolics mean nothing to the dynamo exporter.
PAIRS = [
    (k, e) for e in ("dynamo", "torchscript") for k in KINDS if (k, e) != ("symbolic", "dynamo")
]


def _task(run_dir: Path, source: Path, model: str, exporter: str = "torchscript", **kw: Any) -> CellTask:  # fmt: skip
    cell = Cell(model, exporter, 18)
    return CellTask(
        cell, str(source), "r", str(run_dir), protocol=QUICK, **{"timeout_s": 300, **kw}
    )


def _new_zygote() -> None:
    _WORKER.close()


def _verdict(r: Record) -> dict[str, Any]:
    """What a cell decided: everything but timings."""
    numerics = [(c.name, c.max_abs, c.ok, c.mismatches) for c in r.numerics.checks or []]
    return {
        "status": r.status, "stage": r.stage, "error": r.error_signature,
        "fingerprint": r.export.graph_fingerprint, "opset_actual": r.export.opset_actual,
        "onnx_ops": r.export.onnx_ops, "aten_ops": r.export.aten_ops, "numerics": numerics,
    }  # fmt: skip


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Record]]:
    """In one zygote: every victim alone, then for each kind the control (both in one
    cell), the contaminator, and the victim again."""
    run_dir = tmp_path_factory.mktemp("contamination")
    _new_zygote()
    found: dict[tuple[str, str], dict[str, Record]] = {}

    def run(kind: str, exporter: str, role: str) -> Record:
        requires = KINDS[kind][2].get("requires", ())
        task = _task(run_dir, CONTAMINATION, f"{role}_{kind}", exporter, requires=requires)
        return run_cell_isolated(task)

    for kind, exporter in PAIRS:
        found[kind, exporter] = {"alone": run(kind, exporter, "victim")}
    for kind, exporter in PAIRS:
        for role in ("both", "contaminate"):
            found[kind, exporter][role] = run(kind, exporter, role)
        found[kind, exporter]["after"] = run(kind, exporter, "victim")
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "exporter"), PAIRS)
def test_a_victim_after_a_contaminator_gets_its_record_alone(
    pairs: dict[tuple[str, str], dict[str, Record]], kind: str, exporter: str
) -> None:
    runs = pairs[kind, exporter]
    alone, after = runs["alone"], runs["after"]
    assert _verdict(after) == _verdict(alone)
    assert alone.worker and after.worker and runs["contaminate"].worker
    assert after.worker.zygote_pid == runs["contaminate"].worker.zygote_pid
    assert after.worker.cell_pid != runs["contaminate"].worker.cell_pid


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "exporter"), [p for p in PAIRS if p[0] != "modules"])
def test_each_contaminator_does_change_its_victim_in_one_process(
    pairs: dict[tuple[str, str], dict[str, Record]], kind: str, exporter: str
) -> None:
    """The control: without a process between them, the victim's record differs."""
    runs = pairs[kind, exporter]
    assert _verdict(runs["both"]) != _verdict(runs["alone"])


def test_a_sys_modules_entry_does_turn_a_skip_into_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `modules` control (a requirement is checked before the build, so `both_modules`
    cannot show it): the shim makes the missing requirement importable."""
    spec = ModelSpec("m", "seed", lambda: None, tuple, requires=("harness_test_optional_dependency",))  # fmt: skip
    assert spec.missing_requirement() is not None
    monkeypatch.setitem(sys.modules, "harness_test_optional_dependency", object())
    assert spec.missing_requirement() is None


FAULT_RECORDS = [
    # model, status, stage, words in the reason
    ("fault_segv", Status.CRASHED, None, "SIGSEGV"),
    ("fault_killed", Status.CRASHED, None, "SIGKILL"),
    ("fault_exit", Status.CRASHED, None, "exited with code 0 before sending its record"),
    ("fault_sysexit", Status.CRASHED, None, "SystemExit: 3"),
    ("fault_oom", Status.OOM, "build", "can't allocate memory"),
    ("fault_hang", Status.TIMEOUT, None, "no result after 4 s"),
    ("fault_neighbour", Status.OK, None, ""),
]


@pytest.mark.slow
def test_each_fault_is_one_record_and_the_zygote_lives_on(tmp_path: Path) -> None:
    _new_zygote()
    records = {  # the hang alone gets 4 s: a loaded machine may take longer for a whole cell
        model: run_cell_isolated(
            _task(
                tmp_path,
                FAULTS,
                model,
                max_memory_gb=1,
                timeout_s=4 if status == Status.TIMEOUT else 120,
            )
        )
        for model, status, *_ in FAULT_RECORDS
    }
    for model, status, stage, words in FAULT_RECORDS:
        r = records[model]
        assert (r.status, r.stage) == (status, stage), (model, r.error_message)
        assert words in (r.error_message or r.error_type or ""), (model, r.error_message)
        if status in (Status.TIMEOUT, Status.CRASHED):  # killed in its build: it says so
            assert "; in its build stage, " in (r.reason or ""), (model, r.reason)
            assert r.stage_s is not None and list(r.stage_s) == ["build"], (model, r.stage_s)
    assert not list((tmp_path / ".crash").glob("*.stages"))  # read, and gone
    zygotes = {r.worker.zygote_pid for r in records.values() if r.worker}
    cells = {r.worker.cell_pid for r in records.values() if r.worker}
    assert len(zygotes) == 1 and len(cells) == len(FAULT_RECORDS)


@pytest.mark.slow
def test_a_model_hoarding_under_export_is_oom_as_a_direct_call_says(tmp_path: Path) -> None:
    """The hoarding model (issue 34) under a 1.5 GiB ceiling: a direct dynamo call in a
    fresh process (benchmarks/hoard_verdict.py, the same RLIMIT_DATA) raises torch.onnx's
    TorchExportError from a MemoryError, and the cell's verdict is that one, `oom`. Where
    the cell's heap runs out decides how it gets there: a MemoryError in the capture stage
    (it was `export_failed`), or, in a zygote that ran other cells first (here, after
    test_each_fault...), SIGSEGV in torch's config `__setattr__` (CPython 3.11's
    ContextVar.set, gh-151773; it was `crashed`), or a TypeError torch's config logging
    raised for the MemoryError it met, out of every stage (it was `crashed`)."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "hoard_verdict.py"
    plain = subprocess.run(
        [sys.executable, str(script), "fresh", "--gb", "1.5"],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    direct = json.loads(plain.stdout.splitlines()[-1])
    assert direct["chain"][0].startswith("TorchExportError")
    assert (direct["chain"][-1], direct["verdict"]) == ("MemoryError: ", "oom")
    r = run_cell_isolated(_task(tmp_path, HOARD, "hoard_bytes", "dynamo", max_memory_gb=1.5))
    assert r.status == Status.OOM, (r.stage, r.error_message)
    if r.stage is None:  # it died at its ceiling, or raised there from outside a stage
        assert (r.error_message or "").startswith(
            (
                "the cell's process died at its memory ceiling: SIGSEGV",
                "the cell ended its own process at its memory ceiling",
            )
        ), r.error_message
    else:  # an allocation error in the stage that ran out: capture here, alone
        assert r.error_signature in ("MemoryError: MemoryError()", "MemoryError: std::bad_alloc"), (
            r.stage, r.error_message
        )  # fmt: skip


@pytest.mark.slow
def test_a_crash_at_the_memory_ceiling_is_oom_and_one_below_it_is_crashed(tmp_path: Path) -> None:
    """A cell that dies of SIGSEGV once an allocation failed at its ceiling (the stand-in
    for CPython 3.11's unchecked ContextVar.set, issue 34) is `oom`; fault_segv, far below
    its ceiling, stays `crashed`."""
    at = run_cell_isolated(_task(tmp_path, HOARD, "hoard_then_segv", max_memory_gb=0.25))
    assert at.status == Status.OOM, at.error_message
    assert at.error_message is not None and at.error_message.startswith(
        "the cell's process died at its memory ceiling: SIGSEGV (Segmentation fault)"
    )
    below = run_cell_isolated(_task(tmp_path, FAULTS, "fault_segv", max_memory_gb=0.25))
    assert below.status == Status.CRASHED and "SIGSEGV" in (below.error_message or "")


@pytest.mark.slow
def test_a_cell_that_ends_its_process_after_meeting_its_ceiling_is_oom(tmp_path: Path) -> None:
    """hoard_then_exit meets its ceiling in its build, lets go and raises SystemExit, out
    of every stage and after its ceiling was lifted (as the TypeError CI met did): `oom`,
    with what it raised. It read `crashed` while the ceiling was looked for only then."""
    r = run_cell_isolated(_task(tmp_path, HOARD, "hoard_then_exit", max_memory_gb=0.25))
    assert (r.status, r.error_message) == (
        Status.OOM,
        "the cell ended its own process at its memory ceiling: "
        "SystemExit('out of memory a while ago')",
    )


@pytest.mark.slow
def test_a_timeout_kills_what_the_cell_started(tmp_path: Path) -> None:
    r = run_cell_isolated(_task(tmp_path, FAULTS, "fault_hang_with_child", timeout_s=4))
    assert r.status == Status.TIMEOUT
    # The kill is sent before the record comes back; on a loaded machine the kernel may
    # take a moment to take the child down (a hang that outlived it would stay for an hour).
    deadline = time.monotonic() + 10
    while _processes_running(LEFT_BEHIND) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_running(LEFT_BEHIND)


def _processes_running(argv: tuple[str, ...]) -> list[int]:
    """The processes running `argv` that this test process's cells started: they inherited
    its node folder (another xdist worker's test leaves the same command behind until its
    own timeout)."""
    ours = f"{FOLDER_ENV}={os.environ[FOLDER_ENV]}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
            if tuple(part.decode() for part in cmdline) != argv:
                continue
            if ours in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_the_zygotes_cold_start_rides_on_its_first_record_of_each_exporter(tmp_path: Path) -> None:
    _new_zygote()
    first, second = (run_cell_isolated(_task(tmp_path, STICKY, "sticky_a")) for _ in range(2))
    assert first.worker and second.worker
    cold = first.worker.cold_start
    assert cold is not None and cold.exporter == "torchscript" and (cold.seconds or 0) > 0
    assert 0 < (cold.cpu_seconds or 0) < 60  # the zygote's own CPU time for that export
    assert second.worker.cold_start is None


@pytest.mark.slow
def test_a_record_says_where_and_at_what_cost_it_ran(tmp_path: Path) -> None:
    r = run_cell_isolated(_task(tmp_path, STICKY, "sticky_b"))
    assert r.status == Status.OK and r.worker
    w = r.worker
    assert w.zygote_pid not in (w.cell_pid, os.getpid())
    assert w.fork_s is not None and w.exit_s is not None and w.prepare_s is not None
    assert 0 < w.fork_s < 60 and 0 <= w.exit_s < 60 and w.prepare_s >= 0
    assert w.cell_uss_mb is not None and w.zygote_rss_mb is not None
    assert 0 < w.cell_uss_mb < w.zygote_rss_mb  # the child shares the zygote's pages
    assert (w.cell_pss_mb or 0) > 0


@pytest.mark.slow
def test_a_zygote_killed_from_outside_is_started_again(tmp_path: Path) -> None:
    first = run_cell_isolated(_task(tmp_path, STICKY, "sticky_a"))
    assert first.worker
    os.kill(first.worker.zygote_pid, signal.SIGKILL)
    again = run_cell_isolated(_task(tmp_path, STICKY, "sticky_a"))
    assert again.status == "ok", again.reason
    assert again.worker and again.worker.zygote_pid != first.worker.zygote_pid


@pytest.mark.parametrize(
    ("wait_status", "timed_out", "oom_killed", "expected"),
    [
        (signal.SIGKILL, True, False, (Status.TIMEOUT, "no result after 30 s")),
        (signal.SIGKILL, False, True, (Status.OOM, "OOM killer")),
        (signal.SIGKILL, False, False, (Status.CRASHED, "died: SIGKILL")),
        (signal.SIGSEGV, False, False, (Status.CRASHED, "last words")),
        (3 << 8, False, False, (Status.CRASHED, "exited with code 3")),
    ],
)
def test_judge_exit(
    wait_status: int, timed_out: bool, oom_killed: bool, expected: tuple[Status, str]
) -> None:
    last_words = "last words" if wait_status == signal.SIGSEGV else None
    status, reason = judge_exit(
        wait_status, timed_out=timed_out, oom_killed=oom_killed, timeout_s=30, last_words=last_words
    )
    assert status == expected[0] and expected[1] in reason


@pytest.mark.parametrize(
    ("wait_status", "expected"),
    [
        (signal.SIGSEGV, (Status.OOM, "died at its memory ceiling: last words")),
        (signal.SIGABRT, (Status.OOM, "died at its memory ceiling: SIGABRT")),
        (signal.SIGKILL, (Status.CRASHED, "died: SIGKILL")),  # killed: not its own crash
        (3 << 8, (Status.CRASHED, "exited with code 3 before sending its record")),
    ],
)
def test_a_crash_once_at_the_memory_ceiling_is_oom(
    wait_status: int, expected: tuple[Status, str]
) -> None:
    last_words = "last words" if wait_status == signal.SIGSEGV else None
    status, reason = judge_exit(
        wait_status, timed_out=False, oom_killed=False, timeout_s=30, last_words=last_words,
        at_ceiling=True,
    )  # fmt: skip
    assert (status, reason[len("the cell's process ") :]) == (expected[0], expected[1])


def test_a_cell_killed_at_its_timeout_keeps_what_it_waited_for_the_node(tmp_path: Path) -> None:
    """Its record says how long the cell waited for its turn (the report's time table),
    and its reason that the wait was left off its clock."""
    ended = ChildExit(1, b"", signal.SIGKILL, timed_out=True, oom_killed=False, reaped_at=0.0,
                      waited_s=3.5)  # fmt: skip
    record, facts = ended.record(_task(tmp_path, FAULTS, "fault_hang", timeout_s=30))
    assert record.status == Status.TIMEOUT and facts.node_wait_s == 3.5
    assert (record.error_message or "").startswith(
        "no result after 30 s, besides 3.5 s waiting for the node;"
    )


def test_oom_kills_reads_cgroup_v2_then_v1_and_none_without_either(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.events", tmp_path / "memory.oom_control"
    v2.write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n")
    counters = ((v2, "oom_kill"), (v1, "oom_kill"))
    assert exits.oom_kills(counters) == 2
    v2.unlink()
    assert exits.oom_kills(counters) == 7
    v1.unlink()
    assert exits.oom_kills(counters) is None
