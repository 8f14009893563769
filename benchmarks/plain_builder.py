"""A model builder the way a user runs it, in a fresh Python process, no harness code: a
decode entry's language model built from the shrunk config under the seed (the zoo's build
only), `save_pretrained` with a tiny tokenizer beside it, the builder's command line
(`python -m onnxruntime_genai.models.builder -i CKPT -o OUT -p fp32 -e cpu`, or `mobius
build --config CKPT --ep cpu --dtype f32 --runtime ort-genai OUT`), then 16 greedy tokens
three ways: transformers' `generate` in eager, a plain ONNX Runtime loop over the graph
(the prompt from an empty past, then one token at a time, each step's `present.*` fed back
as `past_key_values.*`), and onnxruntime_genai's `Generator` on the folder.

    python benchmarks/plain_builder.py --model hf.llama.decode --builder genai-builder --prompt 5,17,...

Prints one JSON object: whether it built (else the exit code and the last line), the eager,
ORT and Generator tokens, the prompt's logits' largest difference from eager, and the op
counts of the graph.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

# removed as the script exits (a folder of its own per run)
SCRATCH = tempfile.TemporaryDirectory()

REPO = Path(__file__).resolve().parents[1]
NEW_TOKENS = 16


def language_model(name: str) -> torch.nn.Module:
    sys.path.insert(0, str(REPO))  # the zoo's build only, as the harness's cell builds it
    from model_zoo.transformers.decoders import SPECS

    (spec,) = [s for s in SPECS if s.name == name]
    torch.manual_seed(0)
    return spec.build().eval().model


def tokenizer(folder: Path, vocab_size: int) -> None:
    """A byte-level BPE without merges over the vocabulary (what the genai builder loads)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(("<pad>", "<s>", "</s>", "<unk>"))}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    vocab |= {f"t{i}": i for i in range(len(vocab), vocab_size)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    fast.save_pretrained(str(folder))


def command(builder: str, checkpoint: Path, out: Path) -> list[str]:
    if builder == "genai-builder":
        return [sys.executable, "-P", "-m", "onnxruntime_genai.models.builder", "-i", str(checkpoint),
                "-o", str(out), "-p", "fp32", "-e", "cpu", "-c", str(checkpoint / "cache")]  # fmt: skip
    return [sys.executable, "-P", "-m", "mobius", "build", "--config", str(checkpoint), "--ep", "cpu",
            "--dtype", "f32", "--runtime", "ort-genai", str(out)]  # fmt: skip


def eager(model: torch.nn.Module, ids: torch.Tensor) -> tuple[list[int], np.ndarray]:
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
        )
        prompt_logits = model(input_ids=ids).logits[0].numpy()
    return out[0, ids.shape[1] :].tolist(), prompt_logits


def ort_loop(out: Path, ids: list[int]) -> tuple[list[int], np.ndarray]:
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    decoder = json.loads((out / "genai_config.json").read_text())["model"]["decoder"]
    past = {
        i.name: np.zeros((1, decoder["num_key_value_heads"], 0, decoder["head_size"]), np.float32)
        for i in session.get_inputs()
        if i.name.startswith("past_key_values.")
    }
    wanted = {i.name for i in session.get_inputs()}
    new, tokens, first = np.array([ids], np.int64), [], None
    for _ in range(NEW_TOKENS):
        total = sum(len(x) for x in [ids, tokens]) if tokens else len(ids)
        feeds = {"input_ids": new, "attention_mask": np.ones((1, total), np.int64), **past}
        if "position_ids" in wanted:
            feeds["position_ids"] = np.arange(total - new.shape[1], total, dtype=np.int64)[None]
        outputs = dict(
            zip(
                names,
                session.run(names, {k: v for k, v in feeds.items() if k in wanted}),
                strict=True,
            )
        )
        logits = outputs["logits"][0]
        first = logits if first is None else first
        tokens.append(int(logits[-1].argmax()))
        past = {
            "past_key_values." + k.removeprefix("present."): v
            for k, v in outputs.items()
            if k.startswith("present.")
        }
        new = np.array([[tokens[-1]]], np.int64)
    return tokens, first


def generator(out: Path, ids: list[int]) -> list[int]:
    import onnxruntime_genai as og

    model = og.Model(str(out))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + NEW_TOKENS, do_sample=False, batch_size=1)
    gen = og.Generator(model, params)
    gen.append_tokens(np.array([ids], np.int32))
    tokens: list[int] = []
    while len(tokens) < NEW_TOKENS and not gen.is_done():
        gen.generate_next_token()
        tokens.append(int(gen.get_next_tokens()[0]))
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--builder", choices=("genai-builder", "mobius"), required=True)
    parser.add_argument("--prompt", required=True, help="comma-separated token ids")
    args = parser.parse_args()
    ids = [int(t) for t in args.prompt.split(",")]
    model = language_model(args.model)
    folder = Path(SCRATCH.name)
    checkpoint, out = folder / "checkpoint", folder / "out"
    model.save_pretrained(str(checkpoint))
    tokenizer(checkpoint, model.config.vocab_size)
    start = time.perf_counter()
    done = subprocess.run(command(args.builder, checkpoint, out), capture_output=True, text=True,
                          cwd=folder, env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
    build_s = time.perf_counter() - start
    if done.returncode != 0 or not (out / "model.onnx").is_file():
        last = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-1:]
        print(
            json.dumps(
                {"built": False, "returncode": done.returncode, "last": last, "build_s": build_s}
            )
        )
        return
    want, want_logits = eager(model, torch.tensor([ids]))
    got, got_logits = ort_loop(out, ids)
    graph = onnx.load(str(out / "model.onnx"), load_external_data=False).graph
    result = {
        "built": True,
        "build_s": build_s,
        "eager": want,
        "ort": got,
        "generator": generator(out, ids),
        "prompt_max_abs": float(np.abs(want_logits - got_logits).max()),
        "ops": dict(collections.Counter(n.op_type for n in graph.node)),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
