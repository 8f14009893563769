"""What a kept subset of a program's nodes reads and gives, on hand-made graphs."""

from __future__ import annotations

import itertools

from harness.repro.dag import Dag

# a -> b -> c -> d, with a -> e -> d (a diamond), and f, g hanging off d and a
#     a
#    / \
#   b   e
#   |   |
#   c   |
#    \ /
#     d -> f
#   a -> g
DIAMOND = Dag(
    order=("a", "b", "e", "c", "d", "f", "g"),
    reads={"b": ("a",), "e": ("a",), "c": ("b",), "d": ("c", "e"), "f": ("d",), "g": ("a",)},
)


def test_a_kept_subgraph_reads_what_it_does_not_compute() -> None:
    cut = DIAMOND.cut(["c", "d"])
    assert cut.inputs == ("b", "e")
    assert cut.outputs == ("d",)


def test_every_kept_node_no_kept_node_reads_is_an_output_in_program_order() -> None:
    cut = DIAMOND.cut(["g", "b", "e"])
    assert cut.inputs == ("a",)
    assert cut.outputs == ("b", "e", "g")


def test_tied_nodes_come_together() -> None:
    dag = Dag(
        order=("split", "item0", "item1", "add"),
        reads={"item0": ("split",), "item1": ("split",), "add": ("item0", "item1")},
        tied={"split": ("item0", "item1")},
    )
    assert dag.closure(["split"]) == ("split", "item0", "item1")
    assert dag.closure(["item1"]) == ("item1",)  # an item alone is a tensor: a fine cut


def test_upstream_rings_grow_from_the_focus_to_its_ancestors_only() -> None:
    rings = DIAMOND.rings(["d"], upstream_only=True)
    assert rings[0] == ("d",)
    assert set(rings[1]) == {"c", "e", "d"}
    assert set(rings[-1]) == {"a", "b", "e", "c", "d"}  # never f or g
    assert [len(r) for r in rings] == sorted({len(r) for r in rings})


def test_two_way_rings_end_with_the_whole_graph() -> None:
    rings = DIAMOND.rings(["b"], upstream_only=False)
    assert rings[0] == ("b",)
    assert set(rings[1]) == {"a", "b", "c"}
    assert set(rings[-1]) == set(DIAMOND.order)


def test_without_a_focus_the_one_ring_is_everything() -> None:
    assert DIAMOND.rings(["not-a-node"], upstream_only=False) == [DIAMOND.order]


def test_rings_on_a_long_chain_double_their_radius() -> None:
    names = [f"n{i}" for i in range(100)]
    chain = Dag(tuple(names), {b: (a,) for a, b in itertools.pairwise(names)})
    sizes = [len(r) for r in chain.rings(["n99"], upstream_only=True)]
    assert sizes == [1, 2, 3, 5, 9, 17, 33, 65, 100]


def test_rings_end_with_the_nodes_the_focus_cannot_reach() -> None:
    """Two components: growing from one never reaches the other; the last ring has all."""
    dag = Dag(("a", "b", "x", "y"), {"b": ("a",), "y": ("x",)})
    rings = dag.rings(["b"], upstream_only=False)
    assert rings[0] == ("b",)
    assert set(rings[-1]) == {"a", "b", "x", "y"}
    assert len(rings) == 3
