"""The program torch.export captured, as nodes a repro keeps or drops.

Built from an ExportedProgram and the cell's inputs: its call_function nodes (the DAG the
search works on), its weights (parameters, buffers, lifted constants), and the real value
of every node, from one run of the program. `candidate(kept)` makes a plain
`torch.fx.GraphModule` of the kept nodes, named as in the program: the values they read
from dropped nodes become its inputs (fed with their real values; a number or a dtype is
written in as a constant), the weights they read stay weights, and the kept nodes nothing
kept reads are its outputs.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.repro.dag import Dag

# Values a candidate writes into its code instead of taking them as inputs.
_LITERALS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format)


@dataclass
class Candidate:
    """A kept subgraph as a module of its own, with everything needed to run it."""

    module: torch.fx.GraphModule
    inputs: tuple[torch.Tensor, ...]
    input_names: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[str, ...]
    parameters: dict[str, torch.Tensor] = field(default_factory=dict)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)


class Program:
    """An ExportedProgram's nodes, weights and values (see the module docstring)."""

    def __init__(self, exported: Any, flat_inputs: Sequence[Any]) -> None:
        self.graph: torch.fx.Graph = exported.graph
        self.parameters: dict[str, torch.Tensor] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self.values: dict[str, Any] = {}
        self._bind(exported, list(flat_inputs))
        self.nodes = {n.name: n for n in self.graph.nodes if n.op == "call_function"}
        self._run(exported)
        self.dag = self._dag()

    def _bind(self, exported: Any, flat_inputs: list[Any]) -> None:
        """Each placeholder's value: a weight by its kind, else the next user input."""
        by_name = {s.arg.name: s for s in exported.graph_signature.input_specs}
        users = iter(flat_inputs)
        for node in (n for n in self.graph.nodes if n.op == "placeholder"):
            spec = by_name.get(node.name)
            kind = getattr(getattr(spec, "kind", None), "name", "USER_INPUT")
            if kind == "USER_INPUT":
                self.values[node.name] = next(users, None)
                continue
            value = exported.state_dict.get(spec.target)  # type: ignore[union-attr]
            if value is None:
                value = exported.constants.get(spec.target)  # type: ignore[union-attr]
            self.values[node.name] = value
            (self.parameters if kind == "PARAMETER" else self.buffers)[node.name] = value

    def _run(self, exported: Any) -> None:
        """The real value of every node, from the program's own graph module."""
        values = self.values

        class Recorder(torch.fx.Interpreter):
            def run_node(self, n: torch.fx.Node) -> Any:
                result = super().run_node(n)
                if n.op == "call_function":
                    values[n.name] = result
                return result

        placeholders = [values[n.name] for n in self.graph.nodes if n.op == "placeholder"]
        with torch.no_grad():
            Recorder(exported.graph_module).run(*placeholders)

    def _dag(self) -> Dag:
        reads: dict[str, tuple[str, ...]] = {}
        tied: dict[str, list[str]] = {}
        for name, node in self.nodes.items():
            producers = [a.name for a in node.all_input_nodes if a.name in self.nodes]
            reads[name] = tuple(producers)
            for p in producers:
                if node.target is operator.getitem:
                    tied.setdefault(p, []).append(name)  # a tuple comes with its items
                elif not self._feedable(self.values.get(p)):
                    tied.setdefault(name, []).append(p)  # no way to feed it: keep its producer
        return Dag(tuple(self.nodes), reads, {k: tuple(v) for k, v in tied.items()})

    @staticmethod
    def _feedable(value: Any) -> bool:
        return isinstance(value, (torch.Tensor, *_LITERALS))

    @property
    def size(self) -> int:
        return len(self.nodes)

    def candidate(self, kept: Iterable[str], outputs: Sequence[str] | None = None) -> Candidate:
        """The kept nodes (with what is tied to them) as a module of their own."""
        chosen = self.dag.closure(kept)
        wanted = tuple(outputs) if outputs is not None else self.dag.cut(chosen).outputs
        wanted = tuple(o for o in wanted if isinstance(self.values.get(o), torch.Tensor))
        graph = torch.fx.Graph()
        env, made = self._external(chosen, graph)
        for name in chosen:
            env[name] = graph.node_copy(self.nodes[name], lambda arg: env[arg.name])
        graph.output(tuple(env[o] for o in wanted))
        root = torch.nn.Module()
        for name, value in made.parameters.items():
            root.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
        for name, value in made.buffers.items():
            root.register_buffer(name, value)
        made.module = torch.fx.GraphModule(root, graph, class_name="Repro").eval()
        made.outputs, made.nodes = wanted, chosen
        return made

    def _external(
        self, chosen: Sequence[str], graph: torch.fx.Graph
    ) -> tuple[dict[str, Any], Candidate]:
        """Inputs and weights the kept nodes read, in the program's order."""
        read = {a.name for n in chosen for a in self.nodes[n].all_input_nodes}
        env: dict[str, Any] = {}
        made = Candidate(module=None, inputs=(), input_names=(), outputs=(), nodes=())  # type: ignore[arg-type]
        inputs: list[torch.Tensor] = []
        for node in self.graph.nodes:
            if node.name not in read or node.name in chosen:
                continue
            value = self.values.get(node.name)
            if node.name in self.parameters or node.name in self.buffers:
                env[node.name] = graph.get_attr(node.name)
                weights = made.parameters if node.name in self.parameters else made.buffers
                weights[node.name] = value  # type: ignore[assignment]
            elif isinstance(value, torch.Tensor):
                env[node.name] = graph.placeholder(node.name)
                inputs.append(value)
            else:
                env[node.name] = value  # a number, dtype or device: written in
        made.inputs = tuple(inputs)
        made.input_names = tuple(n.name for n in graph.nodes if n.op == "placeholder")
        return env, made
