"""Which cells get a minimal repro, and the figures over them: pure, hand-made records."""

from __future__ import annotations

from harness.repro.figures import figures
from harness.repro.select import choose, clusters, kind_of
from harness.store.details import MinimalRepro
from harness.store.diagnosis import repro_text
from harness.store.measures import OrtMeasures
from harness.store.records import Cell, Record

SIG_A = "DispatchError: No ONNX function found for aten.polygamma"
SIG_B = "InferenceError: axis must be in [-rank, rank-N]"


def _record(
    model: str, status: str, stage: str | None, signature: str | None = None, **extra: object
) -> Record:
    cell = Cell(model, "dynamo", 18)
    fields = {"error_signature": signature, **extra}
    return Record.without_run(cell, "r", status="skipped", reason="-").with_changes(
        status=status, stage=stage, **fields
    )


def test_the_kind_follows_the_failing_stage() -> None:
    assert kind_of(_record("m", "export_failed", "translate")) == "export"
    assert kind_of(_record("m", "export_failed", "capture")) == "capture"
    assert kind_of(_record("m", "checker_failed", "check")) == "check"
    assert kind_of(_record("m", "ort_run_failed", "ort_run")) == "ort_run"
    assert kind_of(_record("m", "numerics_mismatch", "numerics")) == "numerics"


def test_an_expected_failure_keeps_its_kind() -> None:
    assert kind_of(_record("m", "xfail", "translate")) == "export"


def test_no_repro_for_passes_timeouts_crashes_harness_errors_or_the_dynamic_shape() -> None:
    assert kind_of(_record("m", "ok", None)) is None
    assert kind_of(_record("m", "timeout", None)) is None
    assert kind_of(_record("m", "crashed", "translate")) is None  # a crash, not the stage's failure
    assert kind_of(_record("m", "harness_error", "build")) is None
    assert kind_of(_record("m", "dynamic_mismatch", "dynamic")) is None
    assert kind_of(_record("m", "xpass", None)) is None


def test_no_repro_where_the_runtime_is_to_blame() -> None:
    """A missing kernel, or numbers an ORT optimizer changed while the graph as exported
    gives eager's: the record names the op or the optimizer, not an exporter's failure."""
    assert kind_of(_record("m", "runtime_missing", "ort_session")) is None
    broken = _record("m", "numerics_mismatch", "numerics", ort=OrtMeasures(broken_by="x"))
    assert kind_of(broken) is None
    assert kind_of(_record("m", "numerics_mismatch", "numerics", ort=OrtMeasures())) == "numerics"


def test_clusters_by_signature_largest_first_cells_in_order() -> None:
    records = [
        _record("zeta", "export_failed", "translate", SIG_A),
        _record("alpha", "xfail", "translate", SIG_A),
        _record("mid", "checker_failed", "check", SIG_B),
        _record("ok", "ok", None),
        _record("late", "timeout", None, "timeout: N s"),
    ]
    found = clusters(records)
    assert [c.signature for c in found] == [SIG_A, SIG_B]
    assert [r.model for r in found[0].records] == ["alpha", "zeta"]
    assert [r.model for r in choose(records)] == ["alpha", "mid"]


def test_models_choose_every_failing_cell_of_theirs() -> None:
    records = [
        _record("hf.a", "export_failed", "translate", SIG_A),
        _record("hf.b", "export_failed", "translate", SIG_A),
        _record("tv.c", "export_failed", "translate", SIG_A),
    ]
    assert [r.model for r in choose(records, models=["hf.*"])] == ["hf.a", "hf.b"]


def test_cells_are_chosen_by_their_folder_name() -> None:
    records = [_record("a", "export_failed", "translate", SIG_A), _record("b", "ok", None)]
    wanted = [records[0].cell.cell_id, records[1].cell.cell_id]
    assert [r.model for r in choose(records, cells=wanted)] == ["a"]


def _repro(
    reproduces: bool | None,
    before: int | None,
    after: int | None,
    wall: float,
    reason: str | None = None,
) -> MinimalRepro:
    verify = {"exit_code": 1 if reproduces else 0} if after is not None else None
    return MinimalRepro(
        reproduces=reproduces,
        nodes_before=before,
        nodes_after=after,
        wall_s=wall,
        bound_s=60.0,
        reason=reason,
        verify=verify,
    )


def test_figures_over_hand_made_repros() -> None:
    records = [
        _record("a", "export_failed", "translate", SIG_A, minimal_repro=_repro(True, 100, 1, 10.0)),
        _record("b", "export_failed", "translate", SIG_B, minimal_repro=_repro(True, 300, 3, 20.0)),
        _record("c", "export_failed", "translate", "x", minimal_repro=_repro(False, 50, 5, 30.0)),
        _record(
            "d",
            "export_failed",
            "capture",
            "y",
            minimal_repro=_repro(None, None, None, 2.0, "torch.export captured no program: op x"),
        ),
        _record("e", "ok", None),
    ]
    f = figures(records)
    assert (f.attempted, f.scripts, f.verified) == (4, 3, 2)
    assert f.nodes_before is not None and f.nodes_after is not None and f.wall_s is not None
    assert (f.nodes_before.median, f.nodes_after.median) == (100, 3)
    assert f.nodes_before.p90 == 260  # rank 0.9 * 2 = 1.8: 100 + 0.8 * (300 - 100)
    assert (f.wall_s.median, f.wall_s.max) == (15.0, 30.0)
    assert dict(f.no_repro) == {
        "the script did not reproduce the failure in a fresh process": 1,
        "torch.export captured no program": 1,
    }
    assert f.lines()[0].startswith("2 of 4 cells with a repro that reproduces")


def _module_repro(path: str, before: int, after: int, reproduces: bool) -> MinimalRepro:
    return MinimalRepro(
        kind="capture",
        method="module",
        reproduces=reproduces,
        verify={"exit_code": 1 if reproduces else 0},
        module=path,
        params_before=before,
        params_after=after,
    )


def test_figures_count_module_repros_by_method_with_their_sizes() -> None:
    records = [
        _record(
            "a",
            "export_failed",
            "capture",
            SIG_A,
            minimal_repro=_module_repro("model.layers.13", 1000, 40, True),
        ),
        _record(
            "b",
            "export_failed",
            "capture",
            SIG_B,
            minimal_repro=_module_repro("blocks.2.mlp", 3000, 10, False),
        ),
        _record("c", "export_failed", "translate", "x", minimal_repro=_repro(True, 50, 5, 30.0)),
    ]
    f = figures(records)
    assert (f.attempted, f.scripts, f.verified) == (3, 3, 2)
    assert f.by_method == (("module", 1, 2), ("none", 1, 1))
    assert f.params_before is not None and f.params_after is not None
    assert (f.params_before.median, f.params_after.median) == (2000, 25)
    assert f.module_depth is not None and (f.module_depth.median, f.module_depth.max) == (3, 3)
    assert "by method: module 1 of 2, none 1 of 1" in "\n".join(f.lines())


def test_the_reports_line_for_a_module_repro_names_the_module_and_its_parameters() -> None:
    record = _record(
        "a",
        "export_failed",
        "capture",
        SIG_A,
        minimal_repro=_module_repro("model.layers.13", 1000, 40, True),
    ).with_changes(artifacts={"minimal_repro": "artifacts/a/repro_min.py"})
    assert repro_text(record) == "reproduces, module model.layers.13 (1000 -> 40 parameters)"
    assert repro_text(record.with_changes(artifacts={})) == "no repro: no reason given"


def test_no_repro_for_a_model_builders_graph() -> None:
    """A builder writes its graph from a checkpoint in a program of its own: no torch
    program to shrink."""
    for builder in ("genai-builder", "mobius"):
        failed = _record("m", "numerics_mismatch", "numerics").with_cell(exporter=builder)
        assert kind_of(failed) is None
