from __future__ import annotations

from harness.plan.matrix import ModelRef, expand
from harness.store.records import Dtype, OrtOpt

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


def test_dynamic_only_gives_dynamic_cells_and_none_to_static_models() -> None:
    m = expand(MODELS, ["dynamo", "torchscript"], lambda e: (18,), dynamic="only")
    assert [(c.model, c.exporter, c.dynamic) for c in m.cells] == [
        ("b_model", "dynamo", True),
        ("b_model", "torchscript", True),
    ]
    assert "dynamic only" in m.announcement


def test_dtypes_are_an_axis_and_a_float32_cell_keeps_its_name() -> None:
    both = (Dtype.FLOAT32, Dtype.FLOAT16)
    m = expand(MODELS[:1], ["dynamo", "torchscript"], lambda e: (18,), axes={"dtype": both})
    assert sorted((c.exporter, c.dtype) for c in m.cells) == [
        ("dynamo", "float16"),
        ("dynamo", "float32"),
        ("torchscript", "float16"),
        ("torchscript", "float32"),
    ]
    assert len({c.cell_id for c in m.cells}) == len({c.key for c in m.cells}) == 4
    assert m.announcement.endswith("x 2 dtypes (float32, float16)")
    plain = {
        c.cell_id for c in expand(MODELS[:1], ["dynamo", "torchscript"], lambda e: (18,)).cells
    }
    assert plain == {c.cell_id for c in m.cells if c.dtype is Dtype.FLOAT32}


def test_ort_optimisations_are_an_axis_and_a_default_cell_keeps_its_name() -> None:
    levels = (OrtOpt.DEFAULT, OrtOpt.NONE, OrtOpt.FUSIONS)
    m = expand(MODELS[:1], ["dynamo"], lambda e: (18,), axes={"ort_opt": levels})
    assert sorted(c.ort_opt for c in m.cells) == sorted(levels)
    ids = sorted(c.cell_id for c in m.cells)
    assert ids == [
        "b_model--dynamo--op18--cpu--static--base",
        "b_model--dynamo--op18--cpu--static--base--ort-fusions",
        "b_model--dynamo--op18--cpu--static--base--ort-none",
    ]
    assert m.announcement.endswith("x 3 ORT optimisations (default, none, fusions)")


def test_patches_are_an_axis_of_their_own_beside_variants() -> None:
    m = expand(
        MODELS[:1],
        ["dynamo"],
        lambda e: (18,),
        variants=("base", "old"),
        axes={"patch": ("none", "p")},
    )
    assert sorted((c.variant, c.patch) for c in m.cells) == [
        ("base", "none"),
        ("base", "p"),
        ("old", "none"),
        ("old", "p"),
    ]
    assert len({c.cell_id for c in m.cells}) == 4
    assert "2 patches (none, p)" in m.announcement
    plain = expand(MODELS[:1], ["dynamo"], lambda e: (18,))
    assert "patch" not in plain.announcement
    # A plain cell keeps the name it had before patches existed (artifacts, old runs).
    assert plain.cells[0].cell_id == "b_model--dynamo--op18--cpu--static--base"
