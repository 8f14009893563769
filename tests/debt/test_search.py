"""transformers' workarounds one by one (issue 40; harness.exporters.hf_debt,
harness.debt.search, `harness debt`'s choice of cells): the real registries of the installed
transformers, observed and disabled, and left as they were."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from harness.commands.debt import chosen_cells
from harness.compare.deterministic import workaround_findings
from harness.debt.search import _Spent, settle
from harness.exporters import hf_debt
from harness.store.details import Workarounds
from harness.store.records import Cell, Record


def _snapshot() -> tuple[object, ...]:
    patches, fixes = hf_debt._registries()
    return (
        {backend: list(entries) for backend, entries in patches.items()},
        [list(fix_list) for fix_list in fixes],
    )


def test_every_workaround_has_a_name_and_the_registries_come_back_as_they_were() -> None:
    names = hf_debt.workarounds()
    assert len(names) > 20 and len(set(names)) == len(names)
    assert "exporter_dynamo._patch_sliding_window_layer" in names
    before = _snapshot()
    with hf_debt.observed() as used:
        assert _snapshot() != before  # every factory and fix wrapped
    assert _snapshot() == before and used == set()
    with pytest.raises(RuntimeError), hf_debt.disabled(names[0]):
        raise RuntimeError("an export that fails inside")
    assert _snapshot() == before


def test_a_disabled_patch_installs_the_original_and_an_observed_one_says_it_ran() -> None:
    """`torch.where`'s patch as transformers' own `apply_patches` installs it."""
    import torch
    from transformers.exporters.utils import apply_patches

    where = torch.where
    name = next(n for n in hf_debt.workarounds() if n.endswith("._patch_where"))
    with hf_debt.disabled(name), apply_patches("onnx"):
        assert torch.where is where
    with hf_debt.observed() as used, apply_patches("onnx"):
        assert torch.where is not where
        torch.where(torch.tensor([True]), torch.tensor([1.0]), torch.tensor([2.0]))
    assert name in used and torch.where is where


def _record(exporter: str, status: str, model: str = "m") -> Record:
    cell = Cell(model, exporter, 18, dynamic=True)
    return Record.without_run(cell, "r", status=status, reason="-")


def test_the_cells_searched_are_the_ones_only_transformers_exporter_passes() -> None:
    ok = Record.without_run(
        Cell("m", "transformers", 18, dynamic=True), "r", status="ok", reason="-"
    )
    records = [
        ok,
        _record("dynamo", "export_failed"),
        replace(ok, cell=ok.cell.replace(model="both")),
        _record("dynamo", "ok", "both"),
        replace(ok, cell=ok.cell.replace(model="xfail")),
        _record("dynamo", "xfail", "xfail"),
        _record("transformers", "numerics_mismatch", "neither"),
        _record("dynamo", "export_failed", "neither"),
        replace(ok, cell=ok.cell.replace(model="alone")),
    ]
    assert [r.model for r in chosen_cells(records)] == ["m", "xfail"]
    assert [r.model for r in chosen_cells(records, ("x*",))] == ["xfail"]


def test_compare_names_a_workaround_no_longer_needed_and_one_newly_needed() -> None:
    base = _record("transformers", "ok")
    before = Workarounds(("a", "b", "c"), ("a", "b", "c"), {"a": "E", "b": "E"}, 1.0, 60.0)
    after = Workarounds(("a", "b", "c"), ("a", "b", "c"), {"b": "E", "c": "E"}, 1.0, 60.0)
    found = workaround_findings(replace(base, workarounds=before), replace(base, workarounds=after))
    assert [(f.kind, f.message) for f in found] == [
        ("workaround_obsolete", "no longer needs a"),
        ("workaround_needed", "now needs c"),
    ]
    untried = replace(after, tried=("b", "c"))
    found = workaround_findings(
        replace(base, workarounds=before), replace(base, workarounds=untried)
    )
    assert [f.kind for f in found] == ["workaround_needed"]  # `a` untried: not called obsolete


def test_a_translation_of_transformers_is_used_where_its_op_is_translated() -> None:
    """transformers' table passed to `torch.onnx.export` as its exporter passes it: the
    translation of an op in the program counts as used; disabled, it leaves the table."""
    import torch

    class Masked(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.masked_fill(x > 0.5, 0.0)

    table = hf_debt._translations()
    name = next(n for n in hf_debt.workarounds() if n.endswith("._aten_masked_fill"))
    export = torch.onnx.export
    with hf_debt.observed() as used:
        program = torch.export.export(Masked(), (torch.rand(2, 3),))
        torch.onnx.export(program, (), custom_translation_table=table, dynamo=True)
    assert name in used and "exporter_onnx._aten_grouped_mm" not in used
    assert torch.onnx.export is export
    keys = set(table)
    with hf_debt.disabled(name):
        assert not any(hf_debt.name_of(fn) == name for fn in table.values())
        assert torch.ops.aten.masked_fill.Scalar not in table
    assert set(table) == keys


def test_a_search_of_a_few_adds_to_what_the_record_knew() -> None:
    """`--workarounds t` after a whole search: t's answer replaces the old one, the others
    stay (a workaround the later export no longer used drops out)."""
    whole = Workarounds(("a", "b", "gone"), ("a", "b", "gone"), {"a": "E1"}, 100.0, 600.0)
    few = Workarounds(("a", "b", "t"), ("a", "t"), {"t": "E2"}, 20.0, 600.0)
    merged = whole.then(few)
    assert merged.used == ("a", "b", "t") and merged.tried == ("a", "b", "t")
    assert merged.needed == {"t": "E2"} and merged.obsolete == ["a", "b"]
    assert merged.seconds == 120.0 and merged.complete


def _cell_needing(
    needed: dict[str, str], tries: list[list[str]]
) -> Callable[[list[str]], str | None]:
    """A stand-in for running the cell with a group off (a real try is a whole export, which
    the e2e test makes): it fails with the first needed workaround's signature."""

    def without(group: list[str]) -> str | None:
        tries.append(group)
        return next((needed[n] for n in group if n in needed), None)

    return without


@pytest.mark.parametrize("needed", [{}, {"w07": "E7"}, {"w00": "E0", "w13": "E13"}])
def test_group_testing_finds_exactly_the_needed_in_fewer_tries(needed: dict[str, str]) -> None:
    names = [f"w{i:02}" for i in range(16)]
    tries: list[list[str]] = []
    tried, found = settle(names, [], _cell_needing(needed, tries))
    assert tried == names and found == needed
    assert len(tries) < len(names)  # one at a time takes 16
    assert all([n] in tries for n in needed)  # each needed one's failure is its own


def test_a_suspected_workaround_is_tried_alone_before_the_rest_together() -> None:
    tries: list[list[str]] = []
    names = ["a", "b", "c", "d", "e"]
    tried, found = settle(names, ["c", "z"], _cell_needing({"c": "E"}, tries))
    assert tries == [["c"], ["a", "b", "d", "e"]] and found == {"c": "E"} and tried == names


def test_a_search_out_of_time_keeps_what_it_settled() -> None:
    tries: list[list[str]] = []
    cell = _cell_needing({"b": "E"}, tries)

    def without(group: list[str]) -> str | None:
        if len(tries) == 3:
            raise _Spent
        return cell(group)

    tried, found = settle(["a", "b", "c", "d"], [], without)
    # [a b c d] fails, [a b] fails, [a] passes; [b] is where the bound ran out.
    assert tries == [["a", "b", "c", "d"], ["a", "b"], ["a"]]
    assert tried == ["a"] and found == {}


def test_the_report_names_a_few_cells_and_counts_the_rest() -> None:
    """A workaround obsolete for ten cells: eight named, then how many more; one needed by
    a single cell is named whole."""
    from harness.report.document import Table
    from harness.report.hf import workarounds_section

    found = Workarounds(("a", "b"), ("a", "b"), {"a": "E"}, 1.0, 60.0)
    records = [
        replace(_record("transformers", "ok", f"m{i}"), workarounds=found)
        if i == 0
        else replace(_record("transformers", "ok", f"m{i}"), workarounds=replace(found, needed={}))
        for i in range(10)
    ]
    section = workarounds_section(records)
    assert section is not None
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    rows = {row[0].text: [cell.text for cell in row[1:]] for row in table.rows}
    assert rows["a"] == [
        "1",
        "m0 @18 cpu dynamic",
        "m1 @18 cpu dynamic; m2 @18 cpu dynamic; "
        "m3 @18 cpu dynamic; m4 @18 cpu dynamic; m5 @18 cpu dynamic; "
        "m6 @18 cpu dynamic; m7 @18 cpu dynamic; m8 @18 cpu dynamic; and 1 more",
    ]
    assert rows["b"][:2] == ["0", "-"] and rows["b"][2].endswith("m7 @18 cpu dynamic; and 2 more")
