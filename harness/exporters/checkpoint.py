"""A cell's model as the checkpoint folder a model builder reads: `save_pretrained` (the
cell's random weights, as a user saves a model), with a tokenizer beside it, which the
onnxruntime-genai builder loads to write its `genai_config.json`. The zoo's models come
without one and nothing is downloaded: a tiny tokenizer is written from the config's
vocabulary size, offline."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cell.stages import StageFailure

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# The tokenizer's special tokens take the first ids; the config's own ids are what the
# builders write into genai_config.json and what generation uses (ids, never text).
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
BYTES = 256  # a byte-level vocabulary's symbols


def save(model: PreTrainedModel, folder: Path) -> float:
    """`save_pretrained(folder)` and a tokenizer beside it; the seconds it took. A failure
    is the capture stage's: nothing was built yet."""
    start = time.perf_counter()
    try:
        model.save_pretrained(str(folder))
        write_tokenizer(folder, vocabulary_size(model.config))
    except Exception as exc:
        raise StageFailure("capture", exc) from exc
    return time.perf_counter() - start


def vocabulary_size(config: Any) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.vocab_size)


def write_tokenizer(folder: Path, vocab_size: int) -> None:
    """A fast tokenizer of exactly `vocab_size` ids, padding on the left as a decoder's
    tokenizer pads for generation. From 260 ids, a byte-level BPE without merges (which
    transformers, the genai builder and onnxruntime_genai's own tokenizer all load and
    agree on); below, a word-level one (transformers and the builder load it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIALS)}
    if vocab_size >= len(SPECIALS) + BYTES:
        vocab |= {ch: len(SPECIALS) + i for i, ch in enumerate(sorted(_byte_alphabet()))}
        vocab |= {f"t{i}": i for i in range(len(vocab), vocab_size)}
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
    else:
        vocab |= {f"w{i}": i for i in range(len(vocab), vocab_size)}
        tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIALS[3]))
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    pad, bos, eos, unk = SPECIALS
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # transformers' own
        tokenizer_object=tokenizer,
        pad_token=pad,
        bos_token=bos,
        eos_token=eos,
        unk_token=unk,
        padding_side="left",
    )
    fast.save_pretrained(str(folder))


def _byte_alphabet() -> list[str]:
    from tokenizers import pre_tokenizers

    return list(pre_tokenizers.ByteLevel.alphabet())
