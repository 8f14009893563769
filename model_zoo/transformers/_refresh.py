"""The probing side of the `transformers` zoos' generator: what each probing process runs
(`--serve`: probe the model types or decode heads named on stdin, one JSON line each) and the
registry it probes. The driver is harness.zoo.generated.transformers, reached with

    harness zoo refresh transformers [--types bert,gpt2] [--out PATH] [--merge]
    harness zoo refresh transformers-decode

`python -m model_zoo.transformers._refresh [--types ..] [--out ..] [--merge] [--decode]` is
the older spelling of those commands: it says so and runs them.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path
from typing import Any

from harness.zoo.generated.transformers import (
    PROBE_MEMORY_GB,
    PROBE_TIMEOUT_S,
    Probing,
    refresh,
)


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
    name = "transformers-decode" if args.decode else "transformers"
    print(
        f"python -m model_zoo.transformers._refresh is deprecated: use `harness zoo refresh {name}`",
        file=sys.stderr,
    )
    probing = Probing(jobs=args.jobs, timeout_s=args.timeout, memory_gb=args.memory_gb)
    types = args.types.split(",") if args.types else None
    print(refresh(types, decode=args.decode, out=args.out, merge=args.merge, probing=probing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
