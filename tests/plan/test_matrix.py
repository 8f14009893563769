from __future__ import annotations

from harness.plan.matrix import ModelRef, expand

MODELS = [ModelRef("b_model", "vision", True), ModelRef("a_model", "nlp", False)]


def test_expand_counts_and_sorts() -> None:
    opsets = {"dynamo": (18, 20), "torchscript": (17, 18, 20)}
    m = expand(MODELS, ["torchscript", "dynamo"], lambda e: opsets[e], dynamic=True)
    # a_model: static only (5 cells); b_model: static + dynamic (10 cells)
    assert len(m) == 15
    assert [c.model for c in m.cells[:5]] == ["a_model"] * 5
    assert m.cells == tuple(sorted(m.cells))
    assert sum(c.dynamic for c in m.cells) == 5
    assert m.announcement.startswith("15 cells = 2 models x 2 exporters")


def test_expand_without_dynamic_has_static_cells_only() -> None:
    m = expand(MODELS, ["dynamo"], lambda e: (17, 18, 20), devices=("cpu", "cuda"))
    assert len(m) == 2 * 3 * 2
    assert not any(c.dynamic for c in m.cells)
    assert "2 devices (cpu, cuda)" in m.announcement


def test_variants_multiply_and_are_announced() -> None:
    m = expand(MODELS[:1], ["dynamo"], lambda e: (18,), variants=("base", "old"))
    assert [c.variant for c in m.cells] == ["base", "old"]
    assert "2 variants (base, old)" in m.announcement


def test_cell_ids_are_unique() -> None:
    m = expand(MODELS, ["dynamo", "torchscript"], lambda e: (17, 18), dynamic=True)
    ids = [c.cell_id for c in m.cells]
    assert len(ids) == len(set(ids))
