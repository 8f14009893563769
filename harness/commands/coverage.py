"""`harness coverage`: the op x (exporter, opset) coverage matrix of a run, or a fresh op
inventory (the one-op models of `harness run --suite ops`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from harness.errors import UsageError

HELP = "which ATen ops (or OpInfos) each exporter covers at each opset (from a run), or refresh an inventory"
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

--refresh-inventory captures every zoo model as the dynamo exporter does (torch.export,
then its decompositions) and rewrites the inventory that the `ops` family is built from
(model_zoo/ops/_inventory.json): each ATen overload, the models using it, and its first
call's argument shapes and dtypes. `--refresh-inventory opinfo` rewrites the `opinfo`
family's (model_zoo/opinfo/_inventory.json) from torch's op_db: each OpInfo, its dtypes
among float32, float16, int64 and bool, and its CPU sample counts. Commit the result.

--update-expected RUN_DIR rewrites the opinfo zoo's expected failures
(model_zoo/opinfo/_expected.csv) from a run: failing cells get a row with their status,
stage and a reason, fixed ones lose theirs; review the reasons and commit the file.

examples:
  harness run --suite ops --out results/ops && harness coverage results/ops
  harness run --suite opinfo --models dtype:float32 --out results/opinfo
  harness coverage results/opinfo --format csv         # OpInfo x (exporter, opset, dtype)
  harness coverage --update-expected results/opinfo    # known failures, as data
  harness coverage results/nightly --format csv > coverage.csv
  harness coverage results/ops --format json --problems-only
  harness coverage --refresh-inventory                    # after adding zoo models
  harness coverage --refresh-inventory --zoo ./my_models --inventory /tmp/inventory.json
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
        help="rewrite an inventory instead of reading a run: 'ops' (default) captures the "
        "zoo; 'opinfo' lists torch's OpInfos and their samples (model_zoo/opinfo/)",
    )
    p.add_argument(
        "--update-expected",
        action="store_true",
        help="rewrite the opinfo zoo's expected failures from RUN_DIR (see --expected)",
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
    from harness.coverage.opinfo_specs import EXPECTED
    from harness.plan import expected_file
    from harness.store.rundir import RunDirError, read_manifest, read_records

    zoo = dataclasses.replace(EXPECTED, path=args.expected) if args.expected else EXPECTED
    try:
        read_manifest(args.run_dir)
        before, after = zoo.update(read_records(args.run_dir))
    except (RunDirError, expected_file.ExpectedFileError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {zoo.path}: {after} rows ({before} before) from {args.run_dir}")
    return 0


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
    from harness.coverage import matrix as coverage
    from harness.coverage.inventory import build_inventory, write_inventory
    from harness.plan.discovery import discover

    zoo = discover([Path(p) for p in args.zoo])
    patterns = [m.strip() for m in args.models.split(",") if m.strip()]
    specs = zoo.select(patterns) if patterns else list(zoo.models.values())
    for problem in zoo.problems:
        print(f"warning: zoo file {problem.source} failed to import: {problem.error}")
    path = args.inventory or coverage.BUILTIN_INVENTORY
    inventory = build_inventory(specs, progress=lambda line: print(line, flush=True))
    write_inventory(inventory, path)
    failed = [name for name, m in inventory["models"].items() if "error" in m]
    print(
        f"{len(inventory['ops'])} ops with a one-op model, {len(inventory['skipped'])} not isolated, "
        f"from {len(inventory['models']) - len(failed)} models"
        + (f" ({len(failed)} could not be captured: {', '.join(failed)})" if failed else "")
        + f" -> {path}"
    )
    return 0


def _refresh_opinfo(args: argparse.Namespace) -> int:
    from harness.coverage.opinfo_inventory import build_inventory, write_inventory
    from harness.coverage.opinfo_specs import BUILTIN_OPINFO_INVENTORY

    if args.zoo or args.models:
        raise UsageError(
            "coverage --refresh-inventory opinfo reads torch's op_db: no --zoo or --models"
        )
    path = args.inventory or BUILTIN_OPINFO_INVENTORY
    inventory = build_inventory(progress=lambda line: print(line, flush=True))
    write_inventory(inventory, path)
    entries = inventory["opinfos"]
    cells = sum(len(e["samples"]) + len(e["problems"]) for e in entries)
    failing = sum(len(e["problems"]) for e in entries)
    print(
        f"{len(entries)} OpInfos, {cells} (OpInfo, dtype) entries at {', '.join(inventory['dtypes'])}"
        + (f" ({failing} whose samples cannot be built: skipped cells)" if failing else "")
        + f" -> {path}"
    )
    return 0
