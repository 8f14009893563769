"""The matrix's axes, declared once (harness/store/axes.py): a cell's key, id and label come
from the declaration, a record or manifest written before an axis existed reads as its
default, and a misnamed axis or value is refused where it is written."""

from __future__ import annotations

import json
import pickle

import pytest

from harness.store.axes import AXES, BATCH, DTYPE, LIST_AXES, Dtype, OrtOpt
from harness.store.cell import Cell
from harness.store.options import RunOptions
from harness.store.records import Record
from harness.store.status import Status
from harness.zoo.expect import Expect


def test_every_value_of_every_axis_gives_a_cell_its_own_id_and_label() -> None:
    base = Cell("m", "dynamo", 18)
    others = [
        Cell("m", "dynamo", 17),
        base.replace(device="cuda"),
        base.replace(dynamic=True),
        base.replace(variant="old"),
        base.replace(patch="p"),
        base.replace(dtype=Dtype.FLOAT16),
        base.replace(ort_opt=OrtOpt.NONE),
        base.replace(batch=8),
    ]
    assert len({c.name for c in AXES}) == len(others)  # one other cell per axis
    ids = {c.cell_id for c in [base, *others]}
    labels = {c.label() for c in [base, *others]}
    assert len(ids) == len(labels) == len(others) + 1
    assert (
        base.label() == "m dynamo@18 cpu" and base.cell_id == "m--dynamo--op18--cpu--static--base"
    )
    assert base.replace(batch=8).label() == "m dynamo@18 cpu batch 8"


def test_a_cell_is_made_again_from_its_repr_and_survives_pickling() -> None:
    cell = Cell("m", "dynamo", 18, "cpu", True, family="f", dtype="float16", batch=4)
    again = eval(repr(cell), {"Cell": Cell})  # noqa: S307 - our own repr
    assert again == cell and again.family == "f" and again.dtype is Dtype.FLOAT16
    assert pickle.loads(pickle.dumps(cell)) == cell
    assert sorted([cell, Cell("a", "e", 17)])[0].model == "a"


def test_a_cell_refuses_an_axis_it_does_not_have_and_an_axis_given_twice() -> None:
    with pytest.raises(TypeError, match="no axis 'threads'"):
        Cell("m", "dynamo", 18, threads=2)
    with pytest.raises(TypeError, match="once"):
        Cell("m", "dynamo", 18, opset=17)
    with pytest.raises(TypeError, match="needs an opset"):
        Cell("m", "dynamo")


def test_a_record_written_before_the_list_axes_reads_as_their_defaults() -> None:
    line = Record(Cell("m", "dynamo", 18, dtype="float16", batch=2), "r", Status.OK).to_dict()
    for axis in LIST_AXES:
        assert line[axis.name] == axis.json(Cell("m", "e", 1, dtype="float16", batch=2)[axis])
        del line[axis.name]  # an older writer's line
    cell = Record.from_dict(json.loads(json.dumps(line))).cell
    assert cell == Cell("m", "dynamo", 18) and cell[BATCH] == 0 and cell[DTYPE] is Dtype.FLOAT32


def test_a_manifest_naming_list_axes_by_their_old_keys_reads_as_the_axes() -> None:
    old = {"dtypes": ["float16"], "ort_opts": ["none", "all"], "patches": [], "threads": 2}
    options = RunOptions.from_dict(old)
    assert options.axes == {"dtype": ("float16",), "ort_opt": ("none", "all")}
    assert RunOptions.from_dict(options.to_dict()) == options


def test_an_expectation_names_axes_by_their_columns_and_refuses_others() -> None:
    row = Expect("dynamo", "18", "export_failed", model="m", shape="dynamic", batch=8)
    assert row.selects(Cell("m", "dynamo", 18, dynamic=True, batch=8))
    assert not row.selects(Cell("m", "dynamo", 18, dynamic=True))
    assert (row.shape, row.batch, row.dtype) == ("dynamic", "8", "float32")
    with pytest.raises(TypeError, match="no axis 'threads'"):
        Expect("dynamo", threads="2")
    with pytest.raises(ValueError, match="dtype 'half' must be one of"):
        Expect("dynamo", dtype="half")
