"""A program's nodes as a plain DAG, and what a kept subset of them needs and gives: pure,
no torch (tested with hand-made graphs).

A candidate repro keeps some nodes of the program. Every value a kept node reads from a
node that is not kept becomes an input of the candidate (its real value is fed); the kept
nodes that no kept node reads are its outputs. Some nodes come as a group: a node whose
value is a tuple is kept with the nodes that take its items (`tied`), so that every output
is a tensor. The search starts from the node a failure names (`rings`) and widens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cut:
    """What a kept subset reads from outside (in the program's order) and gives."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Dag:
    """`order`: the nodes in topological order; `reads[n]`: the nodes whose values n takes
    (only nodes of the DAG: inputs and weights of the program are not nodes);
    `tied[n]`: nodes that must be kept whenever n is."""

    order: tuple[str, ...]
    reads: Mapping[str, tuple[str, ...]]
    tied: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        users: dict[str, list[str]] = {n: [] for n in self.order}
        for node in self.order:
            for producer in self.reads.get(node, ()):
                users[producer].append(node)
        object.__setattr__(self, "_users", {n: tuple(u) for n, u in users.items()})
        object.__setattr__(self, "_position", {n: i for i, n in enumerate(self.order)})

    def users(self, node: str) -> tuple[str, ...]:
        found: tuple[str, ...] = self._users[node]  # type: ignore[attr-defined]
        return found

    def sorted(self, nodes: Iterable[str]) -> tuple[str, ...]:
        position: dict[str, int] = self._position  # type: ignore[attr-defined]
        return tuple(sorted(set(nodes), key=position.__getitem__))

    def closure(self, nodes: Iterable[str]) -> tuple[str, ...]:
        """The nodes with everything tied to them."""
        kept, pending = set(nodes), list(nodes)
        while pending:
            for other in self.tied.get(pending.pop(), ()):
                if other not in kept:
                    kept.add(other)
                    pending.append(other)
        return self.sorted(kept)

    def cut(self, kept: Iterable[str]) -> Cut:
        chosen = set(kept)
        inputs = {p for n in chosen for p in self.reads.get(n, ()) if p not in chosen}
        outputs = [n for n in chosen if not any(u in chosen for u in self.users(n))]
        return Cut(self.sorted(inputs), self.sorted(outputs))

    def within(self, focus: Iterable[str], radius: int, *, upstream_only: bool) -> set[str]:
        """The nodes at most `radius` edges from `focus`: along reads only (the values a
        node is computed from), or both ways."""
        found = set(focus)
        frontier = set(found)
        for _ in range(radius):
            step = {p for n in frontier for p in self.reads.get(n, ())}
            if not upstream_only:
                step |= {u for n in frontier for u in self.users(n)}
            frontier = step - found
            if not frontier:
                break
            found |= frontier
        return found

    def ancestors(self, nodes: Iterable[str]) -> set[str]:
        return self.within(nodes, len(self.order), upstream_only=True)

    def rings(self, focus: Iterable[str], *, upstream_only: bool) -> list[tuple[str, ...]]:
        """Growing candidates around `focus`: radius 0, 1, 2, 4, 8, ... then everything the
        focus can reach (its ancestors where only they matter, else the whole DAG); each
        one larger than the last. Without a focus, the whole DAG at once."""
        focus = [n for n in focus if n in self._users]  # type: ignore[attr-defined]
        everything = self.ancestors(focus) if upstream_only and focus else set(self.order)
        if not focus:
            return [self.sorted(everything)]
        rings: list[tuple[str, ...]] = []
        radius = 0
        while True:
            ring = self.closure(self.within(focus, radius, upstream_only=upstream_only))
            if rings and len(ring) == len(rings[-1]) and radius > 1:
                break  # the focus reaches no further: what it cannot reach comes last
            if not rings or len(ring) > len(rings[-1]):
                rings.append(ring)
            if set(ring) >= everything:
                return rings
            radius = max(1, radius * 2)
        rings.append(self.closure(everything | set(rings[-1])))
        return rings
