"""Sampled cells in this process, with real exports: OpInfo samples as small models, the
cell's summary and status from its samples, skipped samples with reasons, samples that
cannot be built, deterministic samples, the OpInfo's own tolerances."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.runtime import samples
from harness.runtime.worker import run_cell
from harness.store.measures import Numerics
from harness.store.records import Cell, CellTask, Measurements, Record
from harness.store.status import Stage, Status
from harness.zoo import ModelSpec, Sample, SampleSet
from harness.zoo.discovery import BUILTIN_ZOO
from harness.zoo.generated import opinfo_samples
from harness.zoo.generated.opinfo_specs import BUILTIN_OPINFO_INVENTORY, specs

SOURCE = str(BUILTIN_ZOO / "opinfo" / "opinfo.py")


def run(model: str, exporter: str, tmp_path: Path) -> Record:
    cell = Cell(model, exporter, 18, family="opinfo")
    return run_cell(CellTask(cell, SOURCE, "t", str(tmp_path)))


def test_samples_are_deterministic_spread_and_rebuild_the_call() -> None:
    first = opinfo_samples.sample_set("nn.functional.conv2d", "", "float32", max_samples=5)
    again = opinfo_samples.sample_set("nn.functional.conv2d", "", "float32", max_samples=5)
    assert first.total >= 20 and [s.index for s in first.samples] == [
        round(k * (first.total - 1) / 4) for k in range(5)
    ]
    for a, b in zip(first.samples, again.samples, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a.inputs, b.inputs, strict=True))
        assert a.description == b.description and a.description.startswith("input float32[")
    op = opinfo_samples.find_opinfo("nn.functional.conv2d")
    raw = list(op.sample_inputs("cpu", torch.float32))[first.samples[1].index]
    module = first.samples[1].build()
    assert type(module).__name__ == "OpInfo_nn_functional_conv2d"
    assert type(module) is not type(first.samples[2].build())  # a class per sample
    torch.testing.assert_close(
        module(*first.samples[1].inputs), op.op(raw.input, *raw.args, **raw.kwargs)
    )
    assert opinfo_samples.spread(3, 10) == [0, 1, 2] and opinfo_samples.spread(100, 0) == list(
        range(100)
    )


def test_the_opinfos_own_tolerance_is_used_where_it_declares_one() -> None:
    declared = [
        (op.full_name, *opinfo_samples.tolerance_of(op, torch.float16))
        for op in opinfo_samples.op_db_index().values()
        if torch.float16 in op.supported_dtypes("cpu")
    ]
    defaults = opinfo_samples.DEFAULT_TOLERANCES[torch.float16]
    overridden = [(name, source) for name, tol, source in declared if tol != defaults]
    # OpInfos whose forward-value tests override the tolerance at float16 (10 in torch 2.13)
    assert len(overridden) > 5 and all("toleranceOverride of" in s for _, s in overridden)


def test_a_cell_runs_every_sample_and_is_ok_when_all_match(tmp_path: Path) -> None:
    record = run("opinfo.add.float32", "torchscript", tmp_path)
    assert record.status == "ok", record.error_message
    s = record.samples
    assert s is not None and s.total is not None
    assert s.run == min(s.total, 10) == s.matched == s.exported
    assert record.metadata is None  # the driver adds the entry's metadata
    assert record.numerics.checks and all(
        c.name.startswith("sample") for c in record.numerics.checks
    )
    assert record.ort.latency is None  # sampled cells are not timed
    assert record.export.opset_actual == 18 and record.export.aten_ops


def test_a_failing_sample_names_its_stage_error_and_unsupported_op(tmp_path: Path) -> None:
    record = run("opinfo.fft.fft.float32", "torchscript", tmp_path)
    assert (record.status, record.stage) == ("export_failed", "translate")
    assert record.export.unsupported_ops == ["aten.fft_fft"]
    s = record.samples
    assert s is not None and s.failures and s.failed == s.run and s.exported == 0
    first = s.failures[0]
    assert first.stage == "translate" and "fft_fft" in (first.error_signature or "")
    assert first.unsupported_ops == ("aten.fft_fft",) and first.inputs
    assert (tmp_path / record.artifacts["error"]).is_file()


def test_random_ops_and_ops_without_a_tensor_are_skipped_samples_with_reasons(
    tmp_path: Path,
) -> None:
    random = run("opinfo.bernoulli.float32", "torchscript", tmp_path)
    assert random.status == "skipped" and "random" in (random.reason or "")
    assert "aten.bernoulli" in random.reason
    scalar = run("opinfo.item.float32", "torchscript", tmp_path)
    assert scalar.status == "skipped" and "returns no tensor" in (scalar.reason or "")
    assert scalar.samples and scalar.samples.skips
    assert scalar.samples.skips[0].reason == "the op returns no tensor"


def test_an_opinfo_whose_samples_cannot_be_built_is_a_skipped_cell_with_the_reason(
    tmp_path: Path,
) -> None:
    def broken() -> SampleSet:
        raise RuntimeError("sample_inputs_func raised: no such kernel")

    spec = ModelSpec(
        name="opinfo.broken.float32",
        family="opinfo",
        build=torch.nn.Identity,
        example_inputs=lambda: (torch.zeros(1),),
        samples=broken,
    )
    task = CellTask(Cell(spec.name, "torchscript", 18, family="opinfo"), "x", "t", str(tmp_path))
    record = samples.run_sampled(task, spec, Measurements())
    assert record.status == "skipped"
    assert (
        record.reason
        == "samples cannot be built: RuntimeError: sample_inputs_func raised: no such kernel"
    )


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_uninitialised_outputs_compare_shapes_only(exporter: str, tmp_path: Path) -> None:
    record = run("opinfo.empty_like.float32", exporter, tmp_path)
    assert record.status == "ok", record.error_message
    assert all("shape and dtype only" in (c.note or "") for c in record.numerics.checks or ())


def test_first_sample_is_the_entrys_plain_model() -> None:
    spec = next(s for s in specs(BUILTIN_OPINFO_INVENTORY) if s.name == "opinfo.add.int64")
    model = spec.build()
    out = model(*spec.example_inputs())
    assert out.dtype == torch.int64


@pytest.mark.slow
def test_a_sparse_opinfo_is_judged_on_its_export_not_a_harness_error(tmp_path: Path) -> None:
    """`to_sparse` returns a sparse tensor: eager's outputs are compared densified, so the
    cell ends on what the exporter does with the op (neither exporter translates it)."""
    record = run("opinfo.to_sparse.float32", "dynamo", tmp_path)
    assert (str(record.status), str(record.stage)) == ("export_failed", "translate")
    assert "_to_sparse" in (record.error_signature or "")


# -- views, and the tolerance that judged each sample ---------------------------------------------


def test_a_sample_whose_eager_depends_on_its_views_is_skipped_and_counted(tmp_path: Path) -> None:
    """as_strided on a partial view reads storage beyond the view; eager ran on clones, so
    the sample 'matched' a clone while eager on the original view gives other values."""
    record = run("opinfo.as_strided-partial_views.float32", "dynamo", tmp_path)
    s = record.samples
    assert s is not None and s.view_dependent == 1
    assert {"index": 1, "reason": samples.VIEW_DEPENDENT} in [k.to_dict() for k in s.skips or ()]
    assert 1 not in {i for t in s.tolerances or () for i in t.samples or ()}  # never compared
    assert s.run is not None and s.skipped is not None and s.wrong is not None
    assert s.matched == s.run - s.skipped - s.wrong - (s.failed or 0) > 0


@pytest.mark.slow
def test_sparse_inputs_have_no_views_to_check_and_fail_where_the_exporter_does(
    tmp_path: Path,
) -> None:
    """A sparse CSR tensor has no storage: the view check (a deepcopy keeping storages)
    made every sample a harness_error instead of the exporter's own failure."""
    record = run("opinfo.sparse.sampled_addmm.float32", "dynamo", tmp_path)
    s = record.samples
    assert s is not None and s.view_dependent == 0
    assert record.status is Status.EXPORT_FAILED, record.error_signature
    assert not [f for f in s.failures or () if f.status == str(Status.HARNESS_ERROR)]


def test_only_forward_value_tests_give_an_opinfo_its_tolerance() -> None:
    """The loosest override of any class used to apply: conv3d at float32 took a bound of
    test classes that judge other things (decompositions, compiled code) at 1e-3/5e-3."""
    find = opinfo_samples.find_opinfo
    assert opinfo_samples.tolerance_of(find("nn.functional.conv3d"), torch.float32) == (
        (1e-4, 1e-5),
        "the harness's default for float32",
    )
    assert opinfo_samples.tolerance_of(find("nn.functional.layer_norm"), torch.float32) == (
        (1e-3, 1e-5),
        "toleranceOverride of nn.functional.layer_norm for TestCommon.test_numpy_refs",
    )
    assert opinfo_samples.tolerance_of(find("abs"), torch.int64) == (
        None,
        "the harness's default for int64",
    )


@pytest.mark.slow
def test_each_compared_sample_records_the_tolerance_that_judged_it(tmp_path: Path) -> None:
    record = run("opinfo.nn.functional.layer_norm.float32", "dynamo", tmp_path)
    s = record.samples
    assert s is not None and record.status == "ok", record.error_message
    (judged,) = s.tolerances or ()
    assert judged.to_dict() == {
        "rtol": 1e-3,
        "atol": 1e-5,
        "source": "toleranceOverride of nn.functional.layer_norm for TestCommon.test_numpy_refs",
        "samples": list(s.indices or ()),
    }
    assert all((c.rtol, c.atol) == (1e-3, 1e-5) for c in record.numerics.checks or ())


def test_a_failing_sample_names_its_tolerance_and_one_not_compared_none() -> None:
    sample = Sample(index=3, tolerance=(1e-2, 1e-3), tolerance_source="toleranceOverride of x")
    compared = samples.Outcome(sample, Status.NUMERICS_MISMATCH, Stage.NUMERICS)
    compared.measured.numerics = Numerics(checks=[])
    failed_export = samples.Outcome(Sample(index=4), Status.EXPORT_FAILED, Stage.TRANSLATE)
    summary = samples.summary(SampleSet((sample, Sample(index=4)), 2), [compared, failed_export])
    assert [f.tolerance for f in summary.failures or ()] == [
        {"rtol": 1e-2, "atol": 1e-3, "source": "toleranceOverride of x"},
        None,
    ]
    assert [t.to_dict() for t in summary.tolerances or ()] == [
        {"rtol": 1e-2, "atol": 1e-3, "source": "toleranceOverride of x", "samples": [3]}
    ]
