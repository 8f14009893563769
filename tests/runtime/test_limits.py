"""The guards around a cell (harness/runtime/limits.py): what counts as running out of
memory, over hand-made exceptions, and whether a process came to its memory ceiling, over
real forked processes (128 MiB each at most)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time
from pathlib import Path

import pytest

from harness.runtime.limits import (
    CeilingWatch,
    is_out_of_memory,
    memory_limit,
    met_its_ceiling,
    reached_ceiling,
)


class TorchExportError(RuntimeError):
    """Stands for torch.onnx's own wrapper (raised `from` the export's error)."""


def _raised(make: object) -> BaseException:
    try:
        make()  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("nothing raised")


def _wrapped_memory_error() -> None:
    try:
        raise MemoryError
    except MemoryError as exc:
        raise TorchExportError("Failed to export the model with torch.export.") from exc


def _raised_while_handling_memory_error() -> None:
    try:
        raise MemoryError
    except MemoryError:
        raise RuntimeError("the report could not be written") from None


def _handled_then_unrelated() -> None:
    try:
        raise ValueError("no aten.histc")
    except ValueError as exc:
        raise TorchExportError("Failed to export") from exc


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_wrapped_memory_error, True),  # the hoarding model under torch.export (issue 34)
        (lambda: (_ for _ in ()).throw(RuntimeError("std::bad_alloc")), True),
        (lambda: (_ for _ in ()).throw(OSError(12, "Cannot allocate memory")), True),
        (_raised_while_handling_memory_error, False),  # `from None`: not its cause
        (_handled_then_unrelated, False),
    ],
)
def test_an_allocation_failure_counts_where_it_caused_the_error(
    make: object, expected: bool
) -> None:
    assert is_out_of_memory(_raised(make)) is expected


def test_a_cyclic_chain_of_causes_ends() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first
    assert is_out_of_memory(first) is False


# -- a process at its memory ceiling --------------------------------------------------------

MIB = 1 << 20


def test_the_margin_is_a_twentieth_of_the_ceiling_and_at_least_64_mib() -> None:
    assert reached_ceiling(1000 * MIB - 64 * MIB, 1000 * MIB)
    assert not reached_ceiling(1000 * MIB - 65 * MIB, 1000 * MIB)
    assert reached_ceiling(8000 * MIB - 400 * MIB, 8000 * MIB)
    assert not reached_ceiling(8000 * MIB - 401 * MIB, 8000 * MIB)


def _hoarded(hoard: bool) -> list[bytes]:
    """16 MiB blocks kept until an allocation fails (1 GiB at most), or none."""
    blocks: list[bytes] = []
    with contextlib.suppress(MemoryError):
        while hoard and len(blocks) < 64:
            blocks.append(b"\x01" * (16 * MIB))
    return blocks


def _child(hoard: bool, ready: int) -> None:
    """Under a ceiling 128 MiB above its data size: hoard 16 MiB blocks until one fails
    (or not), say so, and wait to be killed."""
    try:
        ceiling = _vm_data_bytes() + 128 * MIB
        resource.setrlimit(resource.RLIMIT_DATA, (ceiling, resource.RLIM_INFINITY))
        held = _hoarded(hoard)  # noqa: F841  (kept while the parent watches)
    finally:
        os.write(ready, b"x")
        time.sleep(60)
        os._exit(0)


def _vm_data_bytes() -> int:
    line = next(
        ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("VmData:")
    )
    return int(line.split()[1]) * 1024


@pytest.mark.parametrize("hoard", [True, False])
def test_a_watched_process_is_seen_to_reach_its_ceiling_or_not(hoard: bool) -> None:
    ready, told = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(hoard, told)
    try:
        os.read(ready, 1)
        watch = CeilingWatch(pid)
        watch.sample()
        assert watch.limit is not None and watch.reached is hoard
    finally:
        os.kill(pid, signal.SIGKILL)
        _, _, usage = os.wait4(pid, 0)
        os.close(ready)
        os.close(told)
    assert watch.after_exit(usage.ru_maxrss << 10) is hoard


def test_a_peak_after_the_last_sample_counts_from_the_peak_rss_kept_past_death() -> None:
    watch = CeilingWatch(0)
    watch.limit, watch.data, watch.rss = 1000 * MIB, 700 * MIB, 500 * MIB
    assert not watch.after_exit(700 * MIB)  # 700 + 200 grown: 100 MiB short
    assert watch.after_exit(740 * MIB)  # 700 + 240 grown: within 64 MiB
    assert not CeilingWatch(0).after_exit(10_000 * MIB)  # never seen under a ceiling


def _met_in_a_child(hoard: bool) -> bool:
    """In a forked child: a 128 MiB `memory_limit`, hoarded to (or not), then lifted; what
    `met_its_ceiling` said once it was."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with memory_limit(128 / 1024):
                _hoarded(hoard)
            os.write(write, b"1" if met_its_ceiling() else b"0")
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 1)
    os.waitpid(pid, 0)
    os.close(read)
    return said == b"1"


def test_whether_the_ceiling_was_met_is_kept_once_it_is_lifted() -> None:
    """What a cell raised outside its stages, after its ceiling was lifted, is judged by
    this (harness.runtime.zygote): the ceiling is gone from /proc by then."""
    assert (_met_in_a_child(hoard=True), _met_in_a_child(hoard=False)) == (True, False)
