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
import functools
import json
import resource
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.zoo.generated.transformers import (
    PROBE_MEMORY_GB,
    PROBE_TIMEOUT_S,
    Probed,
    Probing,
    refresh,
)
from model_zoo.transformers._decode_inventory import DECODE_INVENTORY, decode_name
from model_zoo.transformers._inventory import INVENTORY
from model_zoo.transformers._tasks import TASKS_INVENTORY


def registry() -> list[str]:
    """Every model type the installed transformers registers (transformers.CONFIG_MAPPING)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(CONFIG_MAPPING_NAMES)


def decode_registry() -> list[str]:
    """Every (type, head) with a causal-LM or seq2seq-LM head, as `type:head`."""
    from model_zoo.transformers._decode import CAUSAL, SEQ2SEQ, head_types

    return sorted(f"{t}:{head}" for head in (CAUSAL, SEQ2SEQ) for t in head_types(head))


@functools.cache
def task_heads() -> dict[str, tuple[str, ...]]:
    """Every task head of the registry as `type:Class`, with the tasks whose mapping names
    it (`MODEL_FOR_<TASK>_MAPPING_NAMES` but the base models'), in naming order."""
    from transformers.models.auto import modeling_auto

    from model_zoo.transformers._tasks import task_of, task_order

    heads: dict[str, list[str]] = {}
    for mapping in sorted(dir(modeling_auto)):
        if not (mapping.startswith("MODEL_FOR_") and mapping.endswith("_MAPPING_NAMES")):
            continue
        for model_type, names in getattr(modeling_auto, mapping).items():
            for name in [names] if isinstance(names, str) else names:
                heads.setdefault(f"{model_type}:{name}", []).append(task_of(mapping))
    return {item: tuple(sorted(set(t), key=task_order)) for item, t in sorted(heads.items())}


def _decode_named(items: dict[str, Probed]) -> dict[str, Probed]:
    """`type:head` -> the entry's zoo name, with its type and head inside."""
    named = {}
    for item, entry in items.items():
        model_type, _, head = item.partition(":")
        named[decode_name(model_type, head)] = {"model_type": model_type, "head": head, **entry}
    return named


def _decode_items(named: dict[str, Probed]) -> dict[str, Probed]:
    """The inverse of `_decode_named`, for --merge."""
    return {
        f"{e['model_type']}:{e['head']}": {
            k: v for k, v in e.items() if k not in ("model_type", "head")
        }
        for e in named.values()
    }


def _tasks_named(items: dict[str, Probed]) -> dict[str, Probed]:
    """`type:Class` -> the entry's zoo name (`hf.bert.sequence-classification`; a head
    sharing its type and first task with another is named by its class's own task), with
    its type, class and tasks inside."""
    from model_zoo.transformers._tasks import class_task, task_entry_name

    heads = task_heads()
    firsts = Counter((i.partition(":")[0], heads[i][0]) for i in items if i in heads)
    named = {}
    for item, entry in items.items():
        model_type, _, class_name = item.partition(":")
        tasks = heads.get(item, ("unknown",))
        shared = firsts[(model_type, tasks[0])] > 1
        name = task_entry_name(model_type, class_task(class_name) if shared else tasks[0])
        facts = {
            "model_type": model_type,
            "class": class_name,
            "task": tasks[0],
            "tasks": list(tasks),
        }
        named[name] = {**facts, **entry}
    return named


def _tasks_items(named: dict[str, Probed]) -> dict[str, Probed]:
    """The inverse of `_tasks_named`, for --merge."""
    keys = ("model_type", "class", "task", "tasks")
    return {
        f"{e['model_type']}:{e['class']}": {k: v for k, v in e.items() if k not in keys}
        for e in named.values()
    }


def _probe_task(item: str) -> dict[str, Any]:
    from model_zoo.transformers._task_probe import probe as task_probe

    model_type, _, class_name = item.partition(":")
    return task_probe(model_type, class_name, list(task_heads().get(item, ())))


def _probe_decode(item: str) -> dict[str, Any]:
    from model_zoo.transformers._decode_probe import probe as decode_probe

    model_type, _, head = item.partition(":")
    return decode_probe(model_type, head)


def _probe_type(item: str) -> dict[str, Any]:
    from model_zoo.transformers._probe import probe

    return probe(item)


def _identity(entries: dict[str, Probed]) -> dict[str, Probed]:
    return entries


@dataclass(frozen=True)
class ProbedZoo:
    """One generated transformers zoo: the items of the registry it probes, the probe of
    one item, and how probed items become the inventory's entries and back (--merge)."""

    inventory: Path
    registry: Callable[[], list[str]]
    probe: Callable[[str], dict[str, Any]]
    named: Callable[[dict[str, Probed]], dict[str, Probed]]
    items: Callable[[dict[str, Probed]], dict[str, Probed]]
    built: str  # what the summary line says of the built ones


ZOOS = {
    "transformers": ProbedZoo(
        INVENTORY, registry, _probe_type, _identity, _identity, "model types build and run in eager"
    ),
    "transformers-decode": ProbedZoo(
        DECODE_INVENTORY,
        decode_registry,
        _probe_decode,
        _decode_named,
        _decode_items,
        "heads build and run a step with a cache",
    ),
    "transformers-tasks": ProbedZoo(
        TASKS_INVENTORY,
        lambda: list(task_heads()),
        _probe_task,
        _tasks_named,
        _tasks_items,
        "task heads build and run in eager",
    ),
}


# -- the probing process ------------------------------------------------------------------------


def serve(memory_gb: float, *, zoo: str = "transformers") -> None:
    """Probe the items of `zoo` named on stdin, one JSON line on stdout for each."""
    import warnings

    warnings.simplefilter("ignore")
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (int(memory_gb * 1024**3), hard))
    out = sys.stdout
    sys.stdout = sys.stderr  # model code that prints must not break the protocol
    for line in sys.stdin:
        model_type = line.strip()
        try:
            entry = ZOOS[zoo].probe(model_type)
        except MemoryError:
            entry = {"stage": "build", "reason": f"needs more than {memory_gb:g} GiB"}
        except BaseException as exc:
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
    p.add_argument("--zoo", choices=tuple(ZOOS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    name = args.zoo or ("transformers-decode" if args.decode else "transformers")
    if args.serve:
        serve(args.memory_gb, zoo=name)
        return 0
    print(
        f"python -m model_zoo.transformers._refresh is deprecated: use `harness zoo refresh {name}`",
        file=sys.stderr,
    )
    probing = Probing(jobs=args.jobs, timeout_s=args.timeout, memory_gb=args.memory_gb)
    types = args.types.split(",") if args.types else None
    print(refresh(types, zoo=name, out=args.out, merge=args.merge, probing=probing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
