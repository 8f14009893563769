"""`harness run --resume DIR` on a run directory as a user may hand it over: a garbage line
amid its records, flags that contradict the run, another `--resume` already at work.
Each is exit 2 with one line, and nothing in the run directory changes."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
from pathlib import Path

import pytest

from harness.commands.run import as_first_attempt
from harness.plan.build import RunOptions
from harness.plan.resume import conflict
from harness.store import lock, rundir
from harness.store.manifest import Cluster, Manifest, Settings
from harness.store.records import Cell, Record
from tests.conftest import FIXTURES, one_line_error, run_cli, start_cli, wait_for

OPTIONS = RunOptions(
    zoo=(str(FIXTURES / "slow"),),  # each model takes 8 s to build
    models=("slow_0", "slow_1"),
    exporters=("torchscript",),
    opsets=(17,),
    timeout_s=300.0,
)


def _interrupted_run(
    run_dir: Path, *, records: int = 1, command: tuple[str, ...] = ("harness", "run")
) -> Path:
    """A run whose driver died after `records` of its two cells: its manifest, its records."""
    manifest = Manifest.begin(
        run_id="interrupted",
        command=list(command),
        suite=None,
        settings=Settings(threads=1, timeout_s=300.0),
        matrix="2 cells = 2 models x 1 exporter (torchscript) x opsets 17 x 1 device (cpu)",
        cells=2,
        options=OPTIONS.to_dict(),
        zoo_problems=(),
        cluster=Cluster(),
        versions={},
    )
    rundir.write_manifest(run_dir, manifest)
    with rundir.RecordWriter(run_dir) as writer:
        for model in OPTIONS.models[:records]:
            cell = Cell(model, "torchscript", 17, family="seed")
            writer.write(Record.without_run(cell, "interrupted", status="skipped", reason="x"))
    return run_dir


def _files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())}


def test_a_garbage_line_amid_the_records_is_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = _interrupted_run(tmp_path / "run", records=2)
    path = rundir.records_path(run)
    first, second = path.read_text().splitlines()
    path.write_text(f"{first}\nnot a record\n{second}\n")
    before = _files(run)
    message = one_line_error(capsys, "run", "--resume", str(run))
    assert f"{path}:2 is not a JSON record" in message
    assert _files(run) == before


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--opsets", "99", "--exporters", "bogus"], "--exporters bogus differs"),
        (["--timeout", "30"], "--timeout 30.0 differs from the run being resumed (300.0)"),
        (["--threads", "1", "--keep-onnx"], "--keep-onnx True differs"),
        (["--models", "slow_1"], "--models slow_1 differs"),
        (["--out", "elsewhere"], "--out elsewhere differs"),
        # $HARNESS_PROTOCOL (tests/conftest.py) is a new run's default, never a conflict
        (
            ["--protocol", "min_iters=3"],
            "--protocol min_iters=3 differs from the run being resumed (default)",
        ),
    ],
)
def test_flags_that_contradict_the_run_being_resumed_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str], named: str
) -> None:
    """They used to be ignored without a word."""
    run = _interrupted_run(tmp_path / "run")
    before = _files(run)
    message = one_line_error(capsys, "run", "--resume", str(run), *flags)
    assert message.startswith(f"error: --resume {run}: {named}")
    assert _files(run) == before


def test_flags_that_agree_with_the_run_are_no_conflict(tmp_path: Path) -> None:
    run = tmp_path / "run"
    same = {"exporters": ("torchscript",), "threads": 1, "timeout_s": 300.0, "out": str(run)}
    assert conflict(OPTIONS, {**same, "address": "auto"}, run) is None
    assert conflict(OPTIONS, {"zoo": (str(FIXTURES / "slow" / ".." / "slow"),)}, run) is None
    spaced = dataclasses.replace(OPTIONS, protocol="min_iters=3,max_time_s=1")
    assert conflict(spaced, {"protocol": "max_time_s = 1.0, min_iters = 3"}, run) is None
    assert conflict(spaced, {"protocol": "min_iters=4,max_time_s=1"}, run) is not None
    assert conflict(OPTIONS, {"threads": 2}, run) == (
        "--threads 2 differs from the run being resumed (1); a resumed run keeps its own"
        " settings: drop the flag, or start a new run"
    )


def test_a_run_directory_holding_a_symlink_is_not_resumed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Its workers would write their artifacts through it, out of the run directory."""
    run = _interrupted_run(tmp_path / "run")
    link = run / "artifacts" / Cell("slow_1", "torchscript", 17).cell_id
    link.parent.mkdir()
    link.symlink_to(tmp_path, target_is_directory=True)
    message = one_line_error(capsys, "run", "--resume", str(run))
    assert message == f"error: --resume {run}: {link} is a symlink; a run never writes through one"


# -- one run at a time ---------------------------------------------------------------------------


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    with lock.holding(tmp_path), pytest.raises(rundir.RunDirError) as info, lock.holding(tmp_path):
        pass
    assert f"is in use by another harness run (pid {os.getpid()} on " in str(info.value)
    assert not (tmp_path / lock.LOCK).exists()  # let go: the file goes too
    with lock.holding(tmp_path):  # and the next run takes it
        pass


def test_a_lock_file_left_by_a_killed_run_does_not_block(tmp_path: Path) -> None:
    (tmp_path / lock.LOCK).write_text(json.dumps({"pid": 1, "host": "gone", "since": "then"}))
    with lock.holding(tmp_path):
        about = json.loads((tmp_path / lock.LOCK).read_text())
        assert about["pid"] == os.getpid()


def test_a_run_refused_at_its_start_leaves_no_folder_behind(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "run"
    held = []
    with pytest.raises(RuntimeError, match="refused"), lock.holding(out, create=True):  # noqa: PT012
        held.append((out / lock.LOCK).is_file())
        raise RuntimeError("refused after the lock was taken")
    assert held == [True]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_two_resumes_of_one_run_at_once_the_second_is_refused_naming_the_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Both used to run the pending cells, each appending its own records."""
    run = _interrupted_run(tmp_path / "run")
    first = start_cli("run", "--resume", str(run), "--no-report")
    try:
        wait_for(lambda: b'"pid"' in _read(run / lock.LOCK), timeout=120, proc=first)
        message = one_line_error(capsys, "run", "--resume", str(run))
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert f"error: {run} is in use by another harness run (pid {first.pid} on " in message
    assert f"harness run --resume {run} --no-report" in message
    assert len(rundir.read_records(run)) == 1  # the first run's cell never ran twice


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _args(*argv: str) -> argparse.Namespace:
    from harness.cli import build_parser

    return build_parser().parse_args(["run", *argv])


def test_a_resumed_run_makes_repros_and_a_report_as_its_first_attempt_asked(
    tmp_path: Path,
) -> None:
    first = ("harness", "run", "--suite", "s", "--repro-bound", "0", "--no-report")
    run = _interrupted_run(tmp_path / "run", command=first)
    resumed = as_first_attempt(_args("--resume", str(run)), run)
    assert (resumed.repro_bound, resumed.no_report) == (0.0, True)
    again = as_first_attempt(_args("--resume", str(run), "--repro-bound", "30"), run)
    assert again.repro_bound == 30.0  # given again: that one
    other = _interrupted_run(tmp_path / "other", command=("harness", "run", "--repro-bound=5"))
    plain = as_first_attempt(_args("--resume", str(other)), other)
    assert (plain.repro_bound, plain.no_report) == (5.0, False)
    # read as the CLI reads it: an abbreviated flag counts; one it no longer knows, nothing
    short = _interrupted_run(tmp_path / "short", command=("harness", "run", "--repro-b", "7"))
    assert as_first_attempt(_args("--resume", str(short)), short).repro_bound == 7.0
    odd = _interrupted_run(tmp_path / "odd", command=("harness", "run", "--gone", "--no-report"))
    assert as_first_attempt(_args("--resume", str(odd)), odd).no_report is False


def test_resuming_a_finished_run_that_asked_for_no_report_writes_none(tmp_path: Path) -> None:
    run = _interrupted_run(
        tmp_path / "run", records=2, command=("harness", "run", "--repro-bound", "0", "--no-report")
    )
    done = run_cli("run", "--resume", str(run), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (run / "report.md").exists()


@pytest.mark.slow
def test_a_killed_driver_is_resumed_without_duplicates(tmp_path: Path) -> None:
    """The driver and every process it started killed mid-run, a record torn by the kill:
    the resumed run keeps what was measured and runs each missing cell once."""
    out = tmp_path / "resume"
    proc = start_cli(
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
    wait_for(lambda: _line_count(out) >= 2, timeout=180, proc=proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything it started
    proc.wait()
    before = rundir.records_path(out).read_text().splitlines()
    with rundir.records_path(out).open("a") as f:
        f.write('{"schema": 1, "model": "torn')  # a write cut short by the kill
    result = run_cli("run", "--resume", str(out), "--no-report")
    assert result.returncode == 0, result.stderr[-3000:]
    records = rundir.read_records(out)
    keys = [r.cell.key for r in records]
    assert len(keys) == len(set(keys)) == 6  # 3 tiny + 3 slow models, one record each
    after = rundir.records_path(out).read_text().splitlines()
    assert after[: len(before)] == before  # what was measured before the kill is kept as is
    assert "resuming" in result.stderr


def _line_count(run_dir: Path) -> int:
    path = rundir.records_path(run_dir)
    return len(path.read_text().splitlines()) if path.is_file() else 0
