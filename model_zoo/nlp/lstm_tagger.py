"""Sequence tagger on a 2-layer bidirectional nn.LSTM over token embeddings."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec

VOCAB, TAGS = 1000, 9


class LSTMTagger(nn.Module):
    def __init__(self, dim: int = 32, hidden: int = 48) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, TAGS)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(input_ids))
        return self.out(states).log_softmax(dim=-1)


def build() -> nn.Module:
    return LSTMTagger()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, VOCAB, (2, 16)),)


SPEC = ModelSpec(
    name="lstm_tagger",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "sequence"},),
    tags=("nlp", "rnn", "lstm", "int64-inputs"),
    description="Bidirectional 2-layer LSTM tagger with log-softmax over tags",
)
