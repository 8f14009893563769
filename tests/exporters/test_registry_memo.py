"""The dynamo exporter's memoised ONNX function registry and CIA materialisation
(harness.exporters.registry_memo): exports are byte for byte those of the plain call; a
translation replaced later is used; an op registered later is materialised as the plain call
does; what an export adds to its registry stays out of the memo; the variable turns both off."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
import torch

from harness import exporters
from harness.cell.shapes import Inputs
from harness.exporters import registry_memo
from harness.exporters.request import ExportRequest
from harness.runtime.warmup import WarmUpModel
from harness.zoo.generated.opinfo_samples import sample_set
from tests.zoo_fixtures.opinfo_inject.models import inject_wrong_translation


class Neg(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -x


def export(model: torch.nn.Module, inputs: tuple, path: Path, opset: int = 18) -> dict[str, str]:
    """Export with the harness's dynamo call; the digest of every file it wrote."""
    path.mkdir(parents=True)
    request = ExportRequest(
        model=model.eval(),
        inputs=Inputs(inputs, {}, ()),
        opset=opset,
        path=path / "model.onnx",
        output_names=("output_0",),
    )
    exporters.get("dynamo").export(request)
    return {f.name: _digest(f) for f in sorted(path.iterdir())}


@pytest.fixture
def memo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(registry_memo.ENV, "1")
    registry_memo.clear()
    yield
    registry_memo.clear()


def models() -> list[tuple[str, torch.nn.Module, tuple, int]]:
    found: list[tuple[str, torch.nn.Module, tuple, int]] = [
        ("warm_up@18", WarmUpModel(), WarmUpModel.example_inputs(), 18),
        ("warm_up@20", WarmUpModel(), WarmUpModel.example_inputs(), 20),  # opset conversion
    ]
    for op in ("nn.functional.conv2d", "cumsum", "nn.functional.layer_norm"):
        for s in sample_set(op, "", "float32", max_samples=2).samples:
            assert s.build is not None
            found.append((f"{op}[{s.index}]@18", s.build(), s.inputs, 18))
    return found


@pytest.mark.slow
def test_memoised_exports_are_byte_identical_to_plain_ones(
    memo: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cases = models()
    with_memo = {name: export(m, i, tmp_path / "memo" / name, o) for name, m, i, o in cases}
    assert registry_memo.stats()["hits"] >= len(cases) - 2  # one build per opset
    assert registry_memo.stats()["materialisations_skipped"] >= len(cases)
    monkeypatch.setenv(registry_memo.ENV, "0")
    before = registry_memo.stats()
    plain = {name: export(m, i, tmp_path / "plain" / name, o) for name, m, i, o in cases}
    assert registry_memo.stats() == before  # off: every call built and materialised its own
    assert with_memo == plain
    graph = onnx.load(str(tmp_path / "memo" / "warm_up@18" / "model.onnx"))
    assert {n.op_type for n in graph.graph.node} >= {"Conv", "Softmax"}


@pytest.mark.slow
def test_a_translation_replaced_after_the_memo_was_built_is_used(
    memo: None, tmp_path: Path
) -> None:
    from onnxscript.function_libs.torch_lib.registration import default_registry

    x = (torch.randn(3, 4),)
    before = export(Neg(), x, tmp_path / "before")
    entry = default_registry["aten::neg"]
    saved = list(entry.overloads)
    misses = registry_memo.stats()["misses"]
    try:
        inject_wrong_translation("neg")
        export(Neg(), x, tmp_path / "injected")
        assert registry_memo.stats()["misses"] == misses + 1  # a new key: built again
        assert "Neg" not in _op_types(tmp_path / "injected")  # Identity, optimised away
    finally:
        entry.overloads[:] = saved
        entry.harness_injected = False
    after = export(Neg(), x, tmp_path / "after")
    assert after == before
    assert "Neg" in _op_types(tmp_path / "after")


def _op_types(folder: Path) -> set[str]:
    model = onnx.load(str(folder / "model.onnx"))
    return {n.op_type for n in model.graph.node}


def test_what_an_export_adds_to_its_registry_stays_out_of_the_memo(memo: None) -> None:
    from torch.onnx._internal.exporter import _registration

    def fake(self):
        return self

    with registry_memo.memoised_registry():
        first = _registration.ONNXRegistry.from_torchlib(18)
        first.register_op(torch.ops.aten.neg.default, fake)
        second = _registration.ONNXRegistry.from_torchlib(18)
    assert first.functions is not second.functions
    assert len(first.get_decomps(torch.ops.aten.neg.default)) == 1 + len(
        second.get_decomps(torch.ops.aten.neg.default)
    )
    assert not any(d.is_custom for d in second.get_decomps(torch.ops.aten.neg.default))
    # outside an export call the exporter's own function is back
    assert "from_torchlib" in vars(_registration.ONNXRegistry)
    assert not hasattr(vars(_registration.ONNXRegistry)["from_torchlib"].__func__, "__wrapped__")


def test_an_op_registered_after_the_memo_is_materialised_as_the_plain_call_does(
    memo: None, tmp_path: Path
) -> None:
    x = (torch.randn(3, 4),)
    export(Neg(), x, tmp_path / "first")
    ran = registry_memo.stats()["materialisations"]
    export(Neg(), x, tmp_path / "second")
    assert registry_memo.stats()["materialisations"] == ran  # nothing new: skipped
    library = torch.library.Library("harness_memo_test", "DEF")  # a library a cell loads
    try:
        library.define("twice(Tensor x) -> Tensor")
        library.impl("twice", lambda t: t * 2, "CompositeImplicitAutograd")
        namespace = torch.ops.harness_memo_test
        assert "twice" not in list(namespace)  # listed by the dispatcher, not materialised
        third = export(Neg(), x, tmp_path / "third")
        assert "twice" in list(namespace)  # as torch's own materialisation leaves it
        assert registry_memo.stats()["materialisations"] == ran + 1  # once, then skipped
        assert third == export(Neg(), x, tmp_path / "fourth")
    finally:
        library._destroy()


def _counted_listing(monkeypatch: pytest.MonkeyPatch, drop: str | None = None) -> list[int]:
    """The exporter's torchlib listing, its calls counted; `drop`: a function left out of
    it, as another onnxscript's listing might."""
    from torch.onnx._internal._lazy_import import onnxscript_apis

    source = importlib.import_module(onnxscript_apis.__name__)
    raw = source.get_torchlib_ops
    calls: list[int] = []

    def listing() -> list:
        calls.append(1)
        return [m for m in raw() if m.qualified_name != drop]

    monkeypatch.setattr(source, "get_torchlib_ops", listing)
    monkeypatch.setattr(registry_memo._State, "trusted", None)  # as in a fresh process
    return calls


def test_the_first_build_checks_its_key_against_the_listing_it_read(
    memo: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The key's check reads what the build listed, not a second listing of its own (0.6 s
    of a fresh process's cold start); a second export at the opset builds nothing."""
    calls = _counted_listing(monkeypatch)
    export(Neg(), (torch.randn(3),), tmp_path / "a")
    export(Neg(), (torch.randn(3),), tmp_path / "b")
    assert registry_memo._State.trusted is True
    assert len(calls) == 1
    assert registry_memo.stats()["hits"] >= 1


def test_a_listing_other_than_what_the_key_reads_turns_the_memo_off(
    memo: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _counted_listing(monkeypatch, drop="aten::cos")
    export(Neg(), (torch.randn(3),), tmp_path / "a")
    export(Neg(), (torch.randn(3),), tmp_path / "b")
    assert registry_memo._State.trusted is False
    assert len(calls) == 2  # each export built its own registry
    assert registry_memo.stats()["registries"] == 0


@pytest.mark.slow
def test_a_protocol_without_the_memo_exports_as_a_users_call_builds_its_registry(
    memo: None, tmp_path: Path
) -> None:
    """The real-size suites' `registry_memo = false`: the cell's export builds the registry
    and materialises the ops itself, where the default protocol's cell takes the memo's."""
    from harness.runtime.worker import run_cell
    from harness.store.protocol import Protocol
    from harness.store.records import Cell, CellTask
    from tests.conftest import FIXTURES

    def cell(protocol: Protocol) -> None:
        task = CellTask(Cell("tiny_mlp", "dynamo", 18), str(FIXTURES / "tiny" / "models.py"),
                        "t", str(tmp_path), protocol=protocol)  # fmt: skip
        assert run_cell(task).status == "ok"

    cell(Protocol())  # the memo holds the opset's registry now
    before = registry_memo.stats()
    cell(Protocol().overridden("registry_memo=false"))  # as `--protocol` gives it
    assert registry_memo.stats() == before
    cell(Protocol())
    after = registry_memo.stats()
    assert after["hits"] > before["hits"]
    assert after["materialisations_skipped"] > before["materialisations_skipped"]


@pytest.mark.slow
def test_transformers_calls_and_the_exports_that_explain_a_cell_take_the_memo(
    memo: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """transformers' exporter's calls (its BERT sample) hit the memo as dynamo's do, and
    so do the exports the harness makes to explain a cell (the program dynamo translates,
    the graph before the optimizer); the graphs are those of the plain calls."""
    from harness.exporters.dynamo import translated_program
    from harness.exporters.dynamo_stages import _unoptimized

    sample = exporters.get("transformers").sample()
    assert sample is not None
    bert, inputs = sample

    def transformers_export(folder: Path) -> dict[str, str]:
        folder.mkdir(parents=True)
        request = ExportRequest(model=bert, inputs=inputs, opset=18, path=folder / "model.onnx")
        exporters.get("transformers").export(request)
        return {f.name: _digest(f) for f in sorted(folder.iterdir()) if "onnx" in f.name}

    first = transformers_export(tmp_path / "first")
    hits = registry_memo.stats()["hits"]
    assert transformers_export(tmp_path / "second") == first
    assert registry_memo.stats()["hits"] == hits + 1
    x = (torch.randn(3, 4),)
    program = translated_program(Neg(), x, {})  # at the exporter's default opset
    translated_program(Neg(), x, {})
    assert registry_memo.stats()["hits"] == hits + 2
    request = ExportRequest(model=Neg(), inputs=Inputs(x, {}, ()), opset=18, path=tmp_path / "n")
    before = _unoptimized(program, request)
    assert registry_memo.stats()["hits"] == hits + 3
    monkeypatch.setenv(registry_memo.ENV, "0")
    assert transformers_export(tmp_path / "plain") == first
    assert _unoptimized(program, request).SerializeToString() == before.SerializeToString()
    assert registry_memo.stats()["hits"] == hits + 3  # off: the plain calls


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
