"""`harness zoo`: regenerate a generated zoo's inventory (`refresh NAME`), or rewrite the
expected failures a generated zoo keeps from a run of it (`expected RUN_DIR`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import name_list
from harness.errors import UsageError
from harness.zoo.generated.catalog import REFRESHABLE, update_expected

HELP = "regenerate a generated zoo (ops, opinfo, transformers*) or its expected failures"
DESCRIPTION = """\
The generated zoos are built from inventories committed in model_zoo/, regenerated on
purpose (after a torch or transformers upgrade, or after adding zoo models) so that
discovering the zoo stays fast and its cells stay the same from run to run:

  ops                  one-op models of every ATen op the zoo's models use: captures every
                       zoo model as the dynamo exporter does (model_zoo/ops/_inventory.json)
  opinfo               torch's OpInfos at float32, float16, int64 and bool, with their CPU
                       sample counts (model_zoo/opinfo/_inventory.json)
  transformers         every model type of the installed transformers, probed in worker
                       processes (model_zoo/transformers/_inventory.json; 15-20 min)
  transformers-decode  every causal-LM and seq2seq-LM head, one step with a KV cache
                       (model_zoo/transformers/_decode_inventory.json)
  transformers-tasks   every task head (sequence classification, QA, detection, ...)
                       with its inputs and dynamic dimensions
                       (model_zoo/transformers/_tasks_inventory.json; about 40 min)

`expected RUN_DIR` rewrites the expected failures of each generated zoo the run holds cells
of (model_zoo/opinfo/_expected.csv, model_zoo/transformers/_expected.csv,
_decode_expected.csv, _tasks_expected.csv): failing cells get a row with their status, stage and a reason, fixed
ones lose theirs, a reason edited by hand stays while the failure does. Review and commit.
(CI's expected-status ratchet, expected/status.csv, is `harness compare --update-expected`.)

examples:
  harness zoo refresh ops                                # after adding zoo models
  harness zoo refresh ops --zoo ./my_models --out /tmp/inventory.json
  harness zoo refresh opinfo                             # after a torch upgrade
  harness zoo refresh opinfo --ops add,nn.functional.conv2d --merge
  harness zoo refresh transformers --types bert,gpt2 --merge
  harness zoo refresh transformers-decode
  harness zoo refresh transformers-tasks --types bert:BertForMultipleChoice --merge
  harness zoo expected results/opinfo                    # known failures, as data
"""

HF_ZOOS = ("transformers", "transformers-decode", "transformers-tasks")
# Which refresh flags each zoo takes (dest -> zoos); the others are refused.
FLAGS = {
    "zoo": ("ops",),
    "models": ("ops",),
    "ops": ("opinfo",),
    "merge": ("opinfo", *HF_ZOOS),
    "types": HF_ZOOS,
    "jobs": HF_ZOOS,
    "timeout": HF_ZOOS,
    "memory_gb": HF_ZOOS,
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    refresh = sub.add_parser(
        "refresh", help="regenerate a generated zoo's inventory in model_zoo/ (then commit it)"
    )
    refresh.add_argument("name", choices=REFRESHABLE, metavar="NAME", help=", ".join(REFRESHABLE))
    refresh.add_argument(
        "--out",
        "--inventory",
        type=Path,
        metavar="PATH",
        help="where to write the inventory (default: the zoo's own in model_zoo/)",
    )
    refresh.add_argument(
        "--zoo",
        action="append",
        type=Path,
        metavar="PATH",
        help="ops: add zoo entry files (repeatable)",
    )
    refresh.add_argument(
        "--models",
        type=name_list,
        metavar="GLOB[,GLOB]",
        help="ops: only these models (names, globs, tag:X, family:X)",
    )
    refresh.add_argument(
        "--ops",
        type=name_list,
        metavar="NAME[,NAME]",
        help="opinfo: only these OpInfos (name, name.variant or a glob; with --merge or --out)",
    )
    refresh.add_argument(
        "--types",
        type=name_list,
        metavar="TYPE[,TYPE]",
        help="transformers: only these model types (transformers-decode: TYPE:causal-lm, "
        "TYPE:seq2seq-lm; transformers-tasks: TYPE:HeadClass)",
    )
    refresh.add_argument(
        "--merge",
        action="store_true",
        default=None,
        help="opinfo, transformers: keep the other entries of the inventory, update these",
    )
    refresh.add_argument(
        "--jobs", type=int, metavar="N", help="transformers: probing processes (2)"
    )
    refresh.add_argument(
        "--timeout", type=float, metavar="S", help="transformers: seconds per probe (240)"
    )
    refresh.add_argument(
        "--memory-gb", type=float, metavar="GB", help="transformers: memory per probe (6)"
    )
    expected = sub.add_parser(
        "expected", help="rewrite a generated zoo's expected failures from a run of it"
    )
    expected.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    expected.add_argument(
        "--expected",
        type=Path,
        metavar="PATH",
        help="the file to write (default: the zoo's own, e.g. model_zoo/opinfo/_expected.csv)",
    )


def main(args: argparse.Namespace) -> int:
    if args.action == "expected":
        for line in update_expected(args.run_dir, path=args.expected):
            print(line)
        return 0
    return refresh(args)


def refresh(args: argparse.Namespace) -> int:
    for dest, zoos in FLAGS.items():
        if getattr(args, dest) is not None and args.name not in zoos:
            flag = "--" + dest.replace("_", "-")
            raise UsageError(f"zoo refresh {args.name}: {flag} goes with {' or '.join(zoos)}")
    if args.name == "ops":
        from harness.zoo.generated import ops

        print(ops.refresh(args.zoo or (), args.models or (), out=args.out, say=_say))
    elif args.name == "opinfo":
        from harness.zoo.generated import opinfo_inventory

        print(
            opinfo_inventory.refresh(args.ops or (), out=args.out, merge=bool(args.merge), say=_say)
        )
    else:
        print(_refresh_transformers(args))
    return 0


def _refresh_transformers(args: argparse.Namespace) -> str:
    from harness.zoo.generated import transformers

    default = transformers.Probing()
    probing = transformers.Probing(
        jobs=args.jobs if args.jobs is not None else default.jobs,
        timeout_s=args.timeout if args.timeout is not None else default.timeout_s,
        memory_gb=args.memory_gb if args.memory_gb is not None else default.memory_gb,
    )
    if probing.jobs < 1 or probing.timeout_s <= 0 or probing.memory_gb <= 0:
        raise UsageError("zoo refresh: --jobs, --timeout and --memory-gb take positive numbers")
    return transformers.refresh(
        args.types,
        zoo=args.name,
        out=args.out,
        merge=bool(args.merge),
        probing=probing,
        say=_say,
    )


def _say(line: str) -> None:
    print(line, flush=True)
