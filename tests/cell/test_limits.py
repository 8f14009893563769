"""The guards around a cell (harness/cell/limits.py): what counts as running out of
memory, over hand-made exceptions."""

from __future__ import annotations

import pytest

from harness.cell.limits import is_out_of_memory


class TorchExportError(RuntimeError):
    """Stands for torch.onnx's own wrapper (raised `from` the export's error)."""


def _raised(make: object) -> BaseException:
    try:
        make()  # type: ignore[operator]
    except BaseException as exc:  # noqa: B036 - what was raised is what is judged
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
