"""`harness coverage`: the op x (exporter, opset) coverage matrix of a run (and the older
spellings of `harness zoo refresh ops|opinfo` and `harness zoo expected`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from harness.errors import UsageError

HELP = "which ATen ops (or OpInfos) each exporter covers at each opset, from a run"
DESCRIPTION = """\
The op coverage matrix of a run: for each ATen op, and each exporter and opset, whether it
exports and matches eager ('ok'), exports with wrong numbers ('wrong'), fails (with the
error signature), or is only seen in cells that failed otherwise ('?'); how many zoo models
use it; and per exporter and opset the share of ops covered, also weighted by model usage.

From an `ops` suite run (one model per op) the states are those of the op cells; from an
`opinfo` suite run the rows are torch's OpInfos, the columns carry the dtype, and 'ok'
means every sample matched eager (partly matching cells show 'FAILS 3/8'; the summary
counts samples too); from any other run, an op is 'ok' where a passing cell used it and
'fails' where a cell reported it unsupported.

The op inventory (the usage column, and the ops that cannot be isolated) is the `ops`
zoo's, model_zoo/ops/_inventory.json, regenerated with `harness zoo refresh ops`. The older
--refresh-inventory [ops|opinfo] and --update-expected flags still work: they say so and
run `harness zoo refresh ops|opinfo` and `harness zoo expected RUN_DIR`.

examples:
  harness run --suite ops --out results/ops && harness coverage results/ops
  harness run --suite opinfo --models dtype:float32 --out results/opinfo
  harness coverage results/opinfo --format csv         # OpInfo x (exporter, opset, dtype)
  harness coverage results/nightly --format csv > coverage.csv
  harness coverage results/ops --format json --problems-only
"""

FORMATS = ("md", "json", "csv")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", nargs="?", type=Path, metavar="RUN_DIR", help="the run directory")
    p.add_argument(
        "--format", choices=FORMATS, default="md", help="output format (default: %(default)s)"
    )
    p.add_argument(
        "--problems-only",
        action="store_true",
        help="only the ops that are not 'ok' in every column (the summary stays whole)",
    )
    p.add_argument(
        "--inventory",
        type=Path,
        metavar="PATH",
        help="the op inventory (default: model_zoo/ops/_inventory.json); with "
        "--refresh-inventory, where to write it",
    )
    p.add_argument(
        "--refresh-inventory",
        nargs="?",
        const="ops",
        choices=("ops", "opinfo"),
        help="deprecated: `harness zoo refresh ops|opinfo` (rewrite an inventory: 'ops', the default, captures the "
        "zoo; 'opinfo' lists torch's OpInfos and their samples)",
    )
    p.add_argument(
        "--update-expected",
        action="store_true",
        help="deprecated: `harness zoo expected RUN_DIR` (rewrite the opinfo zoo's expected "
        "failures from RUN_DIR)",
    )
    p.add_argument(
        "--expected",
        type=Path,
        metavar="PATH",
        help="with --update-expected: the file (default model_zoo/opinfo/_expected.csv)",
    )
    p.add_argument(
        "--zoo",
        action="append",
        default=[],
        metavar="PATH",
        help="with --refresh-inventory: add zoo entry files (repeatable)",
    )
    p.add_argument(
        "--models",
        default="",
        metavar="GLOB[,GLOB]",
        help="with --refresh-inventory: only these models (names, globs, tag:X, family:X)",
    )


def main(args: argparse.Namespace) -> int:
    if args.refresh_inventory:
        if args.run_dir is not None:
            raise UsageError("coverage --refresh-inventory takes no RUN_DIR")
        return _refresh_opinfo(args) if args.refresh_inventory == "opinfo" else _refresh(args)
    if args.zoo or args.models:
        raise UsageError("coverage: --zoo and --models go with --refresh-inventory")
    if args.run_dir is None:
        raise UsageError("coverage: give a RUN_DIR, or --refresh-inventory")
    if args.update_expected:
        return _update_expected(args)
    if args.expected is not None:
        raise UsageError("coverage: --expected goes with --update-expected")
    return _matrix(args)


def _update_expected(args: argparse.Namespace) -> int:
    from harness.zoo.generated.catalog import update_expected
    from harness.zoo.generated.opinfo_specs import OPINFO_FAMILY

    _deprecated("--update-expected", "harness zoo expected RUN_DIR")
    for line in update_expected(args.run_dir, path=args.expected, families=(OPINFO_FAMILY,)):
        print(line)
    return 0


def _deprecated(flag: str, instead: str) -> None:
    print(f"harness coverage {flag} is deprecated: use `{instead}`", file=sys.stderr)


def _matrix(args: argparse.Namespace) -> int:
    from harness.coverage import matrix as coverage
    from harness.coverage import render
    from harness.store.rundir import RunDirError, read_manifest, read_records

    inventory = args.inventory or coverage.BUILTIN_INVENTORY
    if args.inventory is not None and not inventory.is_file():
        raise UsageError(f"--inventory {inventory}: no such file")
    try:
        read_manifest(args.run_dir)
        records = read_records(args.run_dir)
    except RunDirError as exc:
        raise UsageError(str(exc)) from None
    ops_run = any(r.family == coverage.OPS_FAMILY for r in records)
    cov = coverage.build_coverage(records, usage=coverage.usage_for(records, inventory))
    if ops_run:
        cov = dataclasses.replace(cov, not_isolated=coverage.not_isolated(inventory))
    if cov.is_empty:
        print(f"{args.run_dir}: no ATen op data in this run's records", file=sys.stderr)
    if args.problems_only:
        kept = tuple(r for r in cov.rows if any(s.state != coverage.OK for s in r.states.values()))
        shown = dataclasses.replace(cov, rows=kept)
    else:
        shown = cov
    if args.format == "json":
        data = render.to_json(shown)
        data["summary"] = render.to_json(cov)["summary"]
        print(json.dumps(data, indent=2))
    elif args.format == "csv":
        sys.stdout.write(render.to_csv(shown))
    else:
        print(render.to_markdown(cov, problems_only=args.problems_only))
    return 0


def _refresh(args: argparse.Namespace) -> int:
    from harness.zoo.generated import ops

    _deprecated("--refresh-inventory", "harness zoo refresh ops")
    patterns = [m.strip() for m in args.models.split(",") if m.strip()]
    print(ops.refresh([Path(p) for p in args.zoo], patterns, out=args.inventory, say=_say))
    return 0


def _refresh_opinfo(args: argparse.Namespace) -> int:
    from harness.zoo.generated import opinfo_inventory

    _deprecated("--refresh-inventory opinfo", "harness zoo refresh opinfo")
    if args.zoo or args.models:
        raise UsageError(
            "coverage --refresh-inventory opinfo reads torch's op_db: no --zoo or --models"
        )
    print(opinfo_inventory.refresh(out=args.inventory, say=_say))
    return 0


def _say(line: str) -> None:
    print(line, flush=True)
