"""Generation on a padded batch (harness/cell/batched.py): the padding, the positions, the
loop's bookkeeping on the left and on the right, and which row the record keeps. Hand-made
steps whose logits say which token and position they saw; real graphs are in
tests/e2e/test_builders.py."""

from __future__ import annotations

import torch

from harness.cell import batched

VOCAB = 50


def test_rows_are_padded_on_either_side_with_their_mask() -> None:
    ids, mask = batched.padded([[7, 8, 9], [5]], batched.LEFT, pad=0)
    assert ids.tolist() == [[7, 8, 9], [0, 0, 5]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    ids, mask = batched.padded([[7, 8, 9], [5]], batched.RIGHT, pad=0)
    assert ids.tolist() == [[7, 8, 9], [5, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_positions_count_real_tokens_as_generate_does() -> None:
    mask = torch.tensor([[1, 1, 1], [0, 0, 1], [0, 1, 1]])
    assert batched.positions_of(mask).tolist() == [[0, 1, 2], [1, 1, 0], [1, 0, 1]]


def _toy_step(seen: list[tuple[list[int], list[int]]]) -> batched.Step:
    """Logits that pick (token + 3 * position + 1) % VOCAB: the next token depends on the
    last token and its position only, whatever the padding, as a correct model's does."""

    def step(ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        seen.append((ids[:, -1].tolist(), positions[:, -1].tolist()))
        picks = (ids + 3 * positions + 1) % VOCAB
        return torch.nn.functional.one_hot(picks, VOCAB).float()

    return step


def test_the_loop_gives_each_row_the_same_tokens_padded_left_or_right() -> None:
    rows = [[4, 9, 2, 6], [11], [3, 8]]
    left = batched.greedy(_toy_step([]), rows, batched.LEFT, new_tokens=4)
    right = batched.greedy(_toy_step([]), rows, batched.RIGHT, new_tokens=4)
    alone = [batched.greedy(_toy_step([]), [r], batched.LEFT, new_tokens=4)[0] for r in rows]
    tokens = [r[0] for r in left]
    assert tokens == [r[0] for r in right] == [r[0] for r in alone]
    # by hand, the second row: 11 at position 0 -> 12; then 12 at 1 -> 16; 16 at 2 -> 23; 23 at 3 -> 33
    assert tokens[1] == [12, 16, 23, 33]


def test_on_the_right_each_rows_logits_are_read_at_its_own_last_token() -> None:
    seen: list[tuple[list[int], list[int]]] = []
    batched.greedy(_toy_step(seen), [[4, 9, 2, 6], [11]], batched.RIGHT, new_tokens=2)
    # the prompt: the last column holds row 0's last token and row 1's padding
    assert seen[0] == ([6, 0], [3, 3])
    # the first decode step: each row's new token at the position after its own prompt
    assert seen[1][1] == [4, 1]


def test_the_record_keeps_the_first_row_that_differs() -> None:
    same = ([1, 2], [torch.tensor([0.0, 5.0, 1.0]), torch.tensor([0.0, 0.0, 3.0])])
    other = ([1, 0], [torch.tensor([0.0, 5.0, 1.0]), torch.tensor([4.0, 0.0, 3.0])])
    found = batched.compare(
        [same, same, same], [same, other, other], (1e-4, 1e-5), lengths=[3, 2, 1], side="left"
    )
    assert (found.row, found.agree, found.first_difference) == (1, 1, 1)
    assert (found.lengths, found.padding, found.ok) == ([3, 2, 1], "left", False)
    agreed = batched.compare([same], [same], (1e-4, 1e-5), lengths=[3], side="right")
    assert (agreed.row, agreed.ok, agreed.agree) == (0, True, 2)


def test_graphs_with_group_query_attention_are_fed_on_the_right() -> None:
    assert batched.padding_for({"MatMul", "GroupQueryAttention"}) == batched.RIGHT
    assert batched.padding_for({"MatMul", "Softmax"}) == batched.LEFT
