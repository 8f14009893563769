"""One decoding step of a GRU seq2seq model: GRU encoder, dot attention, GRU decoder, hidden state in and out."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec

VOCAB, EMBED, HIDDEN = 1000, 32, 64


class GRUSeq2SeqStep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, EMBED)
        self.encoder = nn.GRU(EMBED, HIDDEN, batch_first=True)
        self.tgt_embed = nn.Embedding(VOCAB, EMBED)
        self.attn = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.decoder = nn.GRU(EMBED + HIDDEN, HIDDEN, batch_first=True)
        self.out = nn.Linear(2 * HIDDEN, VOCAB)

    def forward(
        self, src_ids: torch.Tensor, prev_token: torch.Tensor, hidden: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """src_ids (batch, src_len) int64, prev_token (batch,) int64, hidden (batch, HIDDEN)."""
        memory, _ = self.encoder(self.src_embed(src_ids))
        scores = (memory @ self.attn(hidden)[:, :, None]).squeeze(-1)  # Luong "general" attention
        context = (scores.softmax(-1)[:, :, None] * memory).sum(dim=1)
        step = torch.cat([self.tgt_embed(prev_token), context], dim=-1)[:, None]
        _, new_hidden = self.decoder(step, hidden[None].contiguous())
        new_hidden = new_hidden[0]
        return self.out(torch.cat([new_hidden, context], dim=-1)), new_hidden


def build() -> nn.Module:
    return GRUSeq2SeqStep()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return torch.randint(0, VOCAB, (2, 12)), torch.randint(0, VOCAB, (2,)), torch.randn(2, HIDDEN)


SPEC = ModelSpec(
    name="gru_seq2seq",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "source_sequence"}, {0: "batch"}, {0: "batch"}),
    tags=("nlp", "rnn", "gru", "seq2seq", "attention", "int64-inputs"),
    description="GRU seq2seq step: GRU encoder, Luong attention, one GRU decoder step with hidden state I/O",
)
