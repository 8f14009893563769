"""The op inventory and one-op models: real captures, real shapes, one real op cell."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.runtime.worker import run_cell
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask
from harness.zoo import ModelSpec
from harness.zoo.discovery import discover, load_file
from harness.zoo.generated import one_op, ops
from tests.conftest import FIXTURES

COVERAGE_ZOO = FIXTURES / "coverage"


@pytest.fixture(scope="module")
def fixture_inventory() -> dict:
    return ops.build_inventory(load_file(COVERAGE_ZOO / "models.py"))


def entry(inventory: dict, op: str) -> dict:
    return next(e for e in inventory["ops"] if e["op"] == op)


def first_conv_call(model: torch.nn.Module, inputs: tuple) -> list[list[int]]:
    """The shapes the first Conv2d really saw: input, weight, bias."""
    seen: list[list[list[int]]] = []

    def hook(module: torch.nn.Conv2d, args: tuple) -> None:
        bias = [list(module.bias.shape)] if module.bias is not None else []
        seen.append([list(args[0].shape), list(module.weight.shape), *bias])

    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.register_forward_pre_hook(hook)
    with torch.no_grad():
        model(*inputs)
    return seen[0]


def template_shapes(e: dict) -> list[list[int]]:
    return [leaf["shape"] for leaf in one_op.tensor_leaves(e["args"], e["kwargs"])]


# -- the inventory -----------------------------------------------------------------------------


@pytest.mark.slow
def test_inventory_lists_each_op_with_its_models(fixture_inventory):
    names = {e["op"] for e in fixture_inventory["ops"]}
    assert {
        "aten.conv2d.default",
        "aten.cummax.default",
        "aten.special_erfcx.default",
        "aten.logcumsumexp.default",
        "aten.relu.default",
    } <= names
    assert entry(fixture_inventory, "aten.cummax.default")["models"] == ["cov_cummax"]
    assert entry(fixture_inventory, "aten.mul.Tensor")["models"] == ["cov_cummax", "cov_erfcx"]
    assert entry(fixture_inventory, "aten.mul.Tensor")["name"] == "aten.mul.tensor"
    assert set(fixture_inventory["models"]) == {
        "cov_plain",
        "cov_cummax",
        "cov_erfcx",
        "cov_logcumsumexp",
    }
    (getitem,) = fixture_inventory["skipped"]
    assert getitem["op"] == "operator.getitem" and "plumbing" in getitem["reason"]


@pytest.mark.slow
def test_template_reproduces_the_real_shapes_of_the_conv(fixture_inventory):
    conv = entry(fixture_inventory, "aten.conv2d.default")
    spec = next(
        s for s in load_file(COVERAGE_ZOO / "models.py") if s.name == conv["first_call"]["model"]
    )
    real = first_conv_call(spec.build().eval(), spec.example_inputs())
    assert template_shapes(conv) == real == [[2, 3, 8, 8], [4, 3, 3, 3], [4]]
    roles = [leaf["role"] for leaf in one_op.tensor_leaves(conv["args"], conv["kwargs"])]
    assert roles == ["input", "param", "param"]
    assert conv["args"][3:] == [[1, 1], [1, 1]]  # stride, padding (defaults left out)


@pytest.mark.slow
def test_one_op_model_takes_the_real_shapes_as_inputs_and_state(fixture_inventory):
    conv = entry(fixture_inventory, "aten.conv2d.default")
    spec = one_op.op_spec(conv)
    assert (spec.name, spec.family) == ("aten.conv2d.default", "ops")
    module = spec.build()
    (x,) = spec.example_inputs()
    assert list(x.shape) == [2, 3, 8, 8]
    assert [list(b.shape) for b in module.buffers()] == [[4, 3, 3, 3], [4]]
    assert list(module(x).shape) == [2, 4, 8, 8]


@pytest.mark.slow
def test_multi_output_op_returns_only_the_outputs_the_graph_used(fixture_inventory):
    cummax = entry(fixture_inventory, "aten.cummax.default")
    assert cummax["outputs"] == [0]
    out = one_op.op_spec(cummax).build()(*one_op.example_inputs(cummax["args"], cummax["kwargs"]))
    assert isinstance(out, tuple) and len(out) == 1 and out[0].dtype == torch.float32


def test_integer_inputs_stay_valid_indices():
    weight = {"tensor": {"shape": [5, 16], "dtype": "float32", "role": "param"}}
    ids = {"tensor": {"shape": [4, 7], "dtype": "int64", "role": "input"}}
    module = one_op.OneOp("aten.embedding.default", [weight, ids], {})
    (x,) = one_op.example_inputs([weight, ids], {})
    assert x.dtype == torch.int64 and int(x.min()) >= 0 and int(x.max()) < 5
    assert list(module(x).shape) == [4, 7, 16]


def test_a_call_without_input_tensors_takes_all_its_tensors_as_inputs():
    weight = {"tensor": {"shape": [3, 4], "dtype": "float32", "role": "param"}}
    module = one_op.OneOp("aten.t.default", [weight], {})
    assert list(module.buffers()) == []
    assert [list(t.shape) for t in one_op.example_inputs([weight], {})] == [[3, 4]]


def test_ops_that_cannot_be_isolated_say_why():
    assert "in-place" in (ops.skip_reason(torch.ops.aten.add_.Tensor) or "")
    assert "non-tensor" in (ops.skip_reason(torch.ops.aten.item.default) or "")
    assert "uninitialised" in (ops.skip_reason(torch.ops.aten.empty.memory_format) or "")
    assert ops.skip_reason(torch.ops.aten.conv2d.default) is None


class Noisy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x, 0.5, training=True) + 1


class Log(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x.abs() + 1)


@pytest.mark.slow
def test_random_ops_are_skipped_and_log_gets_inputs_in_its_domain():
    specs = [
        ModelSpec("noisy", "seed", Noisy, lambda: (torch.randn(4, 4),)),
        ModelSpec("log", "seed", Log, lambda: (torch.randn(4, 4),)),
    ]
    inventory = ops.build_inventory(specs)
    reasons = {e["op"]: e["reason"] for e in inventory["skipped"]}
    assert any("random" in r for r in reasons.values()), inventory
    log = entry(inventory, "aten.log.default")
    assert log["floats"] == "uniform"  # standard normal inputs would give NaN
    assert entry(inventory, "aten.abs.default")["floats"] == "normal"
    (x,) = one_op.op_spec(log).example_inputs()
    assert float(x.min()) >= 0


# -- one real op cell ---------------------------------------------------------------------------


@pytest.mark.slow
def test_an_op_cell_exports_just_the_op(fixture_inventory, tmp_path: Path):
    inventory_path = tmp_path / "_inventory.json"
    ops.write_inventory(fixture_inventory, inventory_path)
    zoo_file = tmp_path / "ops_zoo.py"
    zoo_file.write_text(
        "from pathlib import Path\n"
        "from harness.zoo.generated.ops import read_inventory\n"
        "from harness.zoo.generated.one_op import specs_from_inventory\n"
        f"SPECS = specs_from_inventory(read_inventory(Path({str(inventory_path)!r})))\n"
    )
    task = CellTask(
        cell=Cell("aten.conv2d.default", "dynamo", 18, family="ops"),
        source=str(zoo_file),
        run_id="t",
        run_dir=str(tmp_path / "run"),
        protocol=Protocol(min_iters=2, min_time_s=0.0, warmup_max_s=0.0, max_time_s=0.1),
    )
    record = run_cell(task)
    assert record.status == "ok", (record.stage, record.error_message)
    assert record.export.aten_ops == {"aten.conv2d.default": 1}
    assert record.export.onnx_ops == {"Conv": 1}


# -- the committed inventory ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed() -> dict:
    if not ops_inventory_path().is_file():
        pytest.skip("no committed op inventory")
    return ops.read_inventory(ops_inventory_path())


def ops_inventory_path() -> Path:
    from harness.coverage.matrix import BUILTIN_INVENTORY

    return BUILTIN_INVENTORY


def test_committed_inventory_builds_the_ops_family(committed):
    zoo = discover()
    ops_models = {m.name for m in zoo.models.values() if m.family == "ops"}
    assert ops_models == {e["name"] for e in committed["ops"]}
    for e in committed["ops"]:
        one_op.resolve(e["op"])  # every op exists in this torch
        assert set(e["models"]) <= set(zoo.models), f"{e['op']}: stale, {ops.REFRESH_COMMAND}"


def test_committed_inventory_reproduces_a_zoo_cnn_conv(committed):
    conv = entry(committed, "aten.conv2d.default")
    spec = discover().get(conv["first_call"]["model"])
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    assert template_shapes(conv) == first_conv_call(model, spec.example_inputs())
