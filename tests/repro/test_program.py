"""Surgery on a captured program: a kept subset of its nodes as a module of its own, fed
with the real values of what it cuts off (torch.export, no exporter)."""

from __future__ import annotations

import torch

from harness.repro.program import Program


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x)) * self.scale
        top, where = torch.max(y, dim=1)
        return top + where.to(torch.float32)


def _program() -> tuple[Program, torch.Tensor]:
    torch.manual_seed(0)
    model, x = Model().eval(), torch.rand(3, 4)
    return Program(torch.export.export(model, (x,)), [x]), model(x)


def test_every_node_has_its_real_value() -> None:
    program, expected = _program()
    last = program.dag.order[-1]
    assert torch.equal(program.values[last], expected)


def test_a_kept_node_reads_its_cut_producer_as_an_input_and_gives_the_same_value() -> None:
    program, _ = _program()
    mul = next(n for n in program.dag.order if n.startswith("mul"))
    candidate = program.candidate([mul])
    assert candidate.outputs == (mul,)
    assert candidate.input_names == ("relu",)  # the cut value, named as in the program
    assert torch.equal(candidate.inputs[0], program.values["relu"])
    assert set(candidate.buffers) == {"b_scale"}  # the buffer stays a weight, not an input
    (got,) = candidate.module(*candidate.inputs)
    assert torch.equal(got, program.values[mul])


def test_weights_stay_weights_and_user_inputs_stay_inputs() -> None:
    program, _ = _program()
    linear = next(n for n in program.dag.order if "linear" in n)
    candidate = program.candidate([linear])
    assert candidate.input_names == ("x",)
    assert set(candidate.parameters) == {"p_fc_weight", "p_fc_bias"}
    assert not any(p.requires_grad for p in candidate.module.parameters())


def test_a_tuple_valued_node_comes_with_the_items_taken_from_it() -> None:
    program, _ = _program()
    maximum = next(
        n for n in program.dag.order if str(program.nodes[n].target).startswith("aten.max")
    )
    candidate = program.candidate([maximum])
    assert len(candidate.nodes) == 3  # max and its two getitems
    assert all(isinstance(t, torch.Tensor) for t in candidate.module(*candidate.inputs))


def test_outputs_can_be_chosen() -> None:
    program, _ = _program()
    nodes = program.dag.order[:3]
    candidate = program.candidate(nodes, outputs=(nodes[1],))
    assert candidate.outputs == (nodes[1],)
    assert len(candidate.module(*candidate.inputs)) == 1
