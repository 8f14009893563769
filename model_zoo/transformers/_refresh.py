"""Regenerate the `transformers` suite's inventory (`_inventory.json` beside this file): probe
every model type of the installed transformers' registry, each in a worker process with a
memory ceiling and a time limit, so one that hangs, crashes or eats the machine becomes a
reason and the others still get probed.

    python -m model_zoo.transformers._refresh                 # the whole registry, 2 processes
    python -m model_zoo.transformers._refresh --types bert,gpt2 --out /tmp/inventory.json
    python -m model_zoo.transformers._refresh --types gemma4,gemma4_text --merge   # update a few
    python -m model_zoo.transformers._refresh --decode      # the decode suite's inventory

About 800 model types take 15-20 minutes on 2 cores. Run it when transformers is upgraded,
then commit the file (and refresh `_expected.csv` from a run of the suite). `--decode`
probes every causal-LM and seq2seq-LM head of the registry with a KV cache instead
(`_decode_inventory.json`, read by the `transformers-decode` suite; --types then names
heads as TYPE:causal-lm or TYPE:seq2seq-lm).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from model_zoo.transformers._decode_inventory import DECODE_INVENTORY
from model_zoo.transformers._inventory import (
    INVENTORY,
    inventory_document,
    read_inventory,
    write_inventory,
)

PROBE_TIMEOUT_S = 240.0
PROBE_MEMORY_GB = 6.0


def registry() -> list[str]:
    """Every model type the installed transformers registers (transformers.CONFIG_MAPPING)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(CONFIG_MAPPING_NAMES)


def decode_registry() -> list[str]:
    """Every (type, head) with a causal-LM or seq2seq-LM head, as `type:head`."""
    from model_zoo.transformers._decode import CAUSAL, SEQ2SEQ, head_types

    return sorted(f"{t}:{head}" for head in (CAUSAL, SEQ2SEQ) for t in head_types(head))


def _probe_item(item: str, *, decode: bool) -> dict[str, Any]:
    if not decode:
        from model_zoo.transformers._probe import probe

        return probe(item)
    from model_zoo.transformers._decode_probe import probe as decode_probe

    model_type, _, head = item.partition(":")
    return decode_probe(model_type, head)


# -- the probing process ------------------------------------------------------------------------


def serve(memory_gb: float, *, decode: bool = False) -> None:
    """Probe the model types (or decode heads) named on stdin, one JSON line on stdout for
    each."""
    import warnings

    warnings.simplefilter("ignore")
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (int(memory_gb * 1024**3), hard))
    out = sys.stdout
    sys.stdout = sys.stderr  # model code that prints must not break the protocol
    for line in sys.stdin:
        model_type = line.strip()
        try:
            entry = _probe_item(model_type, decode=decode)
        except MemoryError:
            entry = {"stage": "build", "reason": f"needs more than {memory_gb:g} GiB"}
        except BaseException as exc:  # noqa: BLE001 - a probe must always answer
            entry = {"stage": "build", "reason": f"{type(exc).__name__}: {exc}"[:300]}
        out.write(json.dumps({"model_type": model_type, **entry}) + "\n")
        out.flush()


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class _Worker:
    process: subprocess.Popen[str]
    decode: bool = False
    current: str | None = None
    started: float = 0.0
    buffer: str = field(default="")


def _spawn(memory_gb: float, decode: bool) -> _Worker:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "model_zoo.transformers._refresh",
            "--serve",
            "--memory-gb",
            str(memory_gb),
            *(["--decode"] if decode else []),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        },
    )
    return _Worker(process, decode=decode)


def probe_all(
    model_types: list[str],
    *,
    jobs: int,
    timeout_s: float,
    memory_gb: float,
    say: Any = print,
    decode: bool = False,
) -> dict[str, dict[str, Any]]:
    """Probe every model type (or decode head) across `jobs` processes; one entry per
    item, always."""
    pending = list(reversed(model_types))
    results: dict[str, dict[str, Any]] = {}
    workers = [_spawn(memory_gb, decode) for _ in range(min(jobs, len(model_types)) or 1)]
    selector = selectors.DefaultSelector()
    for w in workers:
        selector.register(_stdout(w), selectors.EVENT_READ, w)
    while len(results) < len(model_types):
        for w in workers:
            if w.current is None and pending:
                _send(w, pending.pop())
        for key, _ in selector.select(timeout=1.0):
            _read(key.data, results, say, len(model_types))
        for i, w in enumerate(workers):
            replacement = _reap(w, results, timeout_s, memory_gb)
            if replacement is not None:
                selector.unregister(_stdout(w))
                workers[i] = replacement
                selector.register(_stdout(replacement), selectors.EVENT_READ, replacement)
    for w in workers:
        w.process.kill()
    return {t: results[t] for t in sorted(results)}


def _stdout(w: _Worker) -> IO[str]:
    assert w.process.stdout is not None
    return w.process.stdout


def _send(w: _Worker, model_type: str) -> None:
    assert w.process.stdin is not None
    w.current, w.started = model_type, time.monotonic()
    w.process.stdin.write(model_type + "\n")
    w.process.stdin.flush()


def _read(w: _Worker, results: dict[str, dict[str, Any]], say: Any, total: int) -> None:
    line = _stdout(w).readline()
    if not line:
        return  # the process died: _reap notices
    entry = json.loads(line)
    model_type = entry.pop("model_type")
    results[model_type] = entry
    w.current = None
    verdict = "ok" if "reason" not in entry else f"{entry['stage']}: {entry['reason'][:90]}"
    say(f"[{len(results)}/{total}] {model_type}: {verdict}")


def _reap(
    w: _Worker, results: dict[str, dict[str, Any]], timeout_s: float, memory_gb: float
) -> _Worker | None:
    """A worker that died or ran past the limit: its type gets the reason, and a new
    process takes its place."""
    died = w.process.poll() is not None
    late = w.current is not None and time.monotonic() - w.started > timeout_s
    if not (died or late):
        return None
    if w.current is not None:
        if late:
            reason = f"probe took longer than {timeout_s:.0f} s"
        else:
            reason = f"probe process died (exit {w.process.returncode})"
        results[w.current] = {"stage": "build", "reason": reason}
    w.process.kill()
    w.process.wait()
    return _spawn(memory_gb, w.decode)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--types", help="only these model types (comma-separated)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=PROBE_TIMEOUT_S)
    p.add_argument("--memory-gb", type=float, default=PROBE_MEMORY_GB)
    p.add_argument("--out", type=Path, help="default: the inventory beside this file")
    p.add_argument(
        "--merge", action="store_true", help="keep the other model types of --out, update these"
    )
    p.add_argument(
        "--decode", action="store_true", help="probe the causal-/seq2seq-LM heads with a KV cache"
    )
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.memory_gb, decode=args.decode)
        return 0
    out = args.out or (DECODE_INVENTORY if args.decode else INVENTORY)
    known = decode_registry() if args.decode else registry()
    types = args.types.split(",") if args.types else known
    start = time.perf_counter()
    entries = probe_all(
        types,
        jobs=args.jobs,
        timeout_s=args.timeout,
        memory_gb=args.memory_gb,
        decode=args.decode,
    )
    seconds = time.perf_counter() - start
    if args.merge and out.is_file():
        old = read_inventory(out)["models"]
        old = _decode_items(old) if args.decode else old
        entries, seconds = {**old, **entries}, read_inventory(out)["probe_s"]  # the full probe's
    unknown = sorted(set(entries) - set(known))
    if unknown:
        print(f"not in this transformers' registry, dropped: {', '.join(unknown)}")
    entries = {t: e for t, e in entries.items() if t not in unknown}
    built = sum("reason" not in e for e in entries.values())
    document = inventory_document(
        _decode_named(entries) if args.decode else entries,
        registry_size=len(known),
        seconds=seconds,
    )
    write_inventory(document, out)
    what = (
        "heads build and run a step with a cache"
        if args.decode
        else "model types build and run in eager"
    )
    print(f"{built} of {len(entries)} {what}; wrote {out}")
    return 0


def _decode_named(items: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`type:head` -> the entry's zoo name, with its type and head inside."""
    from model_zoo.transformers._decode_inventory import decode_name

    named = {}
    for item, entry in items.items():
        model_type, _, head = item.partition(":")
        named[decode_name(model_type, head)] = {"model_type": model_type, "head": head, **entry}
    return named


def _decode_items(named: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The inverse of `_decode_named`, for --merge."""
    return {
        f"{e['model_type']}:{e['head']}": {
            k: v for k, v in e.items() if k not in ("model_type", "head")
        }
        for e in named.values()
    }


if __name__ == "__main__":
    sys.exit(main())
