"""`harness bisect`: from a finding between two versions of a package to the version that
caused it. The core is `harness.bisect` (a pure search and verdicts, and two runners: each
version in a Ray runtime_env, or in a Python environment of its own); this module turns
flags into a request and writes the answer."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from harness.bisect.index import PipSource, list_versions
from harness.bisect.output import to_json, to_markdown, write_outputs
from harness.bisect.result import BisectResult
from harness.bisect.search import rounds_estimate
from harness.bisect.session import BisectError, Request, bisect
from harness.bisect.verdict import FAMILIES, GRAPH, Criterion, CriterionError
from harness.bisect.versions import Move, VersionError, canonical_name, walk
from harness.commands import name_list
from harness.commands.run import (
    _check_onnxruntime,
    add_selection_arguments,
    selection_from_args,
)
from harness.errors import UsageError
from harness.plan.build import RunOptions, RunPlan, make_plan, new_run_id

if TYPE_CHECKING:
    from harness.bisect.isolated import EnvRunner
    from harness.bisect.runner import Runner

DEFAULT_ENV_CACHE = Path.home() / ".cache" / "harness" / "bisect-envs"
HELP = "find the package version that caused a finding (bisect over pip versions)"


def _families() -> str:
    names = ", ".join(FAMILIES)
    text = f"--finding FAMILY[,FAMILY], FAMILY one of {names}, or `{GRAPH}` (the graph"
    return textwrap.fill(text + " fingerprint differs from the good version's).", width=90)


DESCRIPTION = f"""\
Find the first version of a package that makes a cell worse, the way `git bisect` finds a
commit. The versions between --good and --bad come from pip's index (or --index-url, or a
folder of wheels with --find-links, e.g. nightlies you kept); each version tried runs only
the cells in question, isolated one of two ways (--isolation):
  ray  in a Ray runtime_env that pip-installs it on top of this environment (as `harness run
       --variant` does), the sets of a step side by side;
  env  in a Python environment of its own, made once under --env-cache and kept between
       tries and bisections (a venv that pip-installs the set and sees this environment
       underneath), or taken from --environments DIR (DIR/torch-2.13.0, made beforehand:
       torch's wheels weigh several GB); its cells run there as `harness run --local` runs
       them, without Ray. The default (auto) is env where torch, onnxruntime or ray moves
       or --environments is given, else ray.
A version that cannot be installed or imported is skipped with the reason, as `git bisect
skip` does. --fix bisects for the version that fixed a finding (--good the newer, fixed one).

What counts as bad (--finding): by default, what `harness compare` of the good and the bad
version reports for the selected cells (its blocking findings, else its warnings): a status
change, an opset change, a numerics flip, lost ops, an ORT latency regression (the changed
graph timed together with the good version's, interleaved in one process). Or name them:
{_families()}

Several packages (repeat --package/--good/--bad, in that order): the good set (every package
at its good version) and the bad set run first; then each package alone at its bad version
on top of the good set, to find whose move causes each cell's finding; then that package is
bisected on the good set.

Writes OUT/bisect.json (first_bad, last_good, every version tried, each cell's answer with
the two records at its boundary, their op count diff and, for latency, the paired ratio),
OUT/bisect.md, and one run directory per version tried under OUT/runs/. Progress goes to
stderr, the markdown to stdout.

exit codes: 0 a first bad version found for every cell, 1 not for every cell (nothing to
bisect, skipped versions at the boundary, no single package to blame), 2 usage or
infrastructure error (unknown package, a version not offered, good not older than bad (not
newer with --fix), no version between them, unknown model, the good or bad version not
installable).

examples:
  harness bisect --package onnxscript --good 0.6.0 --bad 0.7.2 --models resnet_small \\
      --exporters dynamo --opsets 18 --finding graph --pre
  harness bisect --package onnxscript --good 0.5.4 --bad 0.7.2 --models 'hf.mistral' \\
      --exporters dynamo --opsets 18
  harness bisect --package my-exporter --good 1.0 --bad 1.6 --find-links ./wheels --zoo ./zoo
  harness bisect --package onnxscript --good 0.6.2 --bad 0.7.2 \\
      --package onnx-ir --good 0.1.12 --bad 1.1.0 --suite smoke
  harness bisect --package torch --good 2.11.0 --bad 2.14.1 --environments /work/envs \\
      --zoo benchmarks/zoo_releases --models int_mask_attention --exporters dynamo
  harness bisect --package onnxscript --good 0.7.2 --bad 0.6.2 --fix --isolation env \\
      --zoo benchmarks/zoo_releases --models addmm_beta_bn --exporters dynamo
"""

ISOLATIONS = ("auto", "env", "ray")
# Packages a Ray runtime_env cannot move well: torch's wheels weigh GB and come from their own
# indexes, Ray is the runtime_env's own, onnxruntime's builds overwrite each other's files.
ENV_PACKAGES = frozenset(
    {"torch", "torchvision", "torchaudio", "onnxruntime", "onnxruntime-gpu", "ray"}
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_argument_group("what to bisect")
    what.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="NAME",
        help="the package that moved (repeatable)",
    )
    what.add_argument(
        "--good", action="append", default=[], metavar="VERSION", help="its last version known good"
    )
    what.add_argument(
        "--bad", action="append", default=[], metavar="VERSION", help="its first version known bad"
    )
    what.add_argument(
        "--finding",
        type=name_list,
        default=("auto",),
        metavar="FAMILY[,FAMILY]",
        help=f"what counts as bad: auto (default), {', '.join(FAMILIES)}, {GRAPH}",
    )
    what.add_argument(
        "--fix",
        action="store_true",
        help="bisect for the version that fixed a finding: --good is the newer, fixed version",
    )
    what.add_argument(
        "--pre",
        action="store_true",
        help="also try pre-releases and dev builds between (default: only where --good or --bad is one)",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--find-links", metavar="DIR", help="take the versions from this folder of wheels, no index"
    )
    source.add_argument(
        "--index-url", metavar="URL", help="take the versions from this index instead of pip's"
    )
    add_selection_arguments(p)  # which cells, as `harness run` chooses them
    run = p.add_argument_group("how each version runs")
    run.add_argument(
        "--out",
        metavar="DIR",
        help="where bisect.json, bisect.md and runs/ go (default results/bisect-<id>/)",
    )
    run.add_argument(
        "--timeout", type=float, default=600.0, metavar="SECONDS", help="per cell (default 600)"
    )
    run.add_argument(
        "--threads", type=int, default=1, metavar="N", help="CPU cores per cell (default 1)"
    )
    run.add_argument("--address", metavar="auto|HOST:PORT", help="join an existing Ray cluster")
    run.add_argument(
        "--isolation",
        choices=ISOLATIONS,
        default="auto",
        help="each version in a Ray runtime_env (ray) or a Python environment of its own (env);"
        " auto: env where torch, onnxruntime or ray moves or --environments is given",
    )
    run.add_argument(
        "--env-cache",
        metavar="DIR",
        help="where --isolation env makes and keeps each set's environment"
        " (default ~/.cache/harness/bisect-envs)",
    )
    run.add_argument(
        "--environments",
        metavar="DIR",
        help="take each set's environment from DIR/<package>-<version>[-<package>-<version>],"
        " venvs made beforehand (a set without one is skipped); implies --isolation env",
    )
    p.add_argument(
        "--format",
        choices=("md", "json"),
        default="md",
        help="what to print on stdout (default md)",
    )


def _moves(args: argparse.Namespace) -> tuple[Move, ...]:
    counts = (len(args.package), len(args.good), len(args.bad))
    if counts[0] == 0:
        raise UsageError("bisect: --package NAME --good VERSION --bad VERSION are required")
    if len(set(counts)) != 1:
        raise UsageError(
            f"bisect: each --package needs one --good and one --bad, in order (got {counts[0]} packages, {counts[1]} --good, {counts[2]} --bad)"
        )
    names = [canonical_name(p) for p in args.package]
    if len(set(names)) != len(names):
        raise UsageError(f"bisect: a package is named twice ({', '.join(args.package)})")
    return tuple(Move(p, g, b) for p, g, b in zip(args.package, args.good, args.bad, strict=True))


def _out(args: argparse.Namespace) -> Path:
    out = Path(args.out) if args.out else Path("results") / f"bisect-{new_run_id()}"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out} exists and is not an empty directory; choose another")
    return out


def _source(args: argparse.Namespace) -> PipSource:
    if args.find_links and not Path(args.find_links).is_dir():
        raise UsageError(f"--find-links {args.find_links}: no such directory")
    return PipSource(find_links=args.find_links, index_url=args.index_url)


def _selection(args: argparse.Namespace) -> RunPlan:
    """The cells, validated as `harness run` validates them (unknown model: exit 2)."""
    options = RunOptions(
        **selection_from_args(args),
        timeout_s=args.timeout,
        threads=args.threads,
        address=args.address,
    )
    return make_plan(options)  # its run directory is never written: each version has its own


def _walks(
    moves: tuple[Move, ...], source: PipSource, *, pre: bool, fix: bool = False
) -> dict[str, tuple[str, ...]]:
    walks: dict[str, tuple[str, ...]] = {}
    for m in moves:
        offered = list_versions(m.package, source)
        walks[m.package] = walk(offered, m, pre=pre, source=source.describe(), fix=fix)
    if len(moves) == 1 and len(walks[moves[0].package]) == 2:
        m = moves[0]
        raise VersionError(
            f"{source.describe()} offers no {m.package} version between {m.good} and {m.bad}:"
            f" {m.good if fix else m.bad} is the first {'fixed' if fix else 'bad'} one"
            + ("" if pre else " (--pre also tries pre-releases and dev builds)")
        )
    return walks


def main(args: argparse.Namespace) -> int:
    moves, out, source = _moves(args), _out(args), _source(args)
    try:
        criterion = Criterion.parse(args.finding)
        selection = _selection(args)
        _check_onnxruntime()
        isolation = _isolation(args, moves)
        walks = _walks(moves, source, pre=args.pre, fix=args.fix)
    except (CriterionError, VersionError) as exc:
        raise UsageError(str(exc)) from None
    _announce(moves, walks, selection, source)
    print(f"each version in {isolation}", file=sys.stderr)
    request = Request(moves, walks, criterion, command=tuple(args.command_line), fix=args.fix)
    result = _run(request, _runner(args, isolation, selection, source, out))
    write_outputs(result, out)
    print(json.dumps(to_json(result), indent=2) if args.format == "json" else to_markdown(result))
    print(f"bisection: {out}", file=sys.stderr)
    return 0 if result.answered else 1


def _isolation(args: argparse.Namespace, moves: tuple[Move, ...]) -> str:
    """How each version runs: as asked, else env where a package a runtime_env cannot move
    well moves or environments are given, else ray."""
    for flag, given in (("--environments", args.environments), ("--env-cache", args.env_cache)):
        if given and args.isolation == "ray":
            raise UsageError(f"bisect: {flag} needs --isolation env (each version in a venv)")
    env = bool(args.environments or args.env_cache) or any(
        canonical_name(m.package) in ENV_PACKAGES for m in moves
    )
    isolation = str(args.isolation)
    if isolation == "auto":
        isolation = "env" if env and not args.address else "ray"
    if isolation == "env" and args.address:
        raise UsageError("bisect: --address joins a Ray cluster: it needs --isolation ray")
    if args.environments and not Path(args.environments).is_dir():
        raise UsageError(f"--environments {args.environments}: no such directory")
    return isolation


def _runner(
    args: argparse.Namespace, isolation: str, selection: RunPlan, source: PipSource, out: Path
) -> Runner | EnvRunner:
    """The runner of each version: environments of their own, or a Ray instance."""
    if isolation == "env":
        from harness.bisect.environments import Environments
        from harness.bisect.isolated import EnvRunner

        cache = Path(args.env_cache) if args.env_cache else DEFAULT_ENV_CACHE
        premade = Path(args.environments).resolve() if args.environments else None
        return EnvRunner(selection, out, Environments(cache.resolve(), source, premade))
    from harness.bisect.runner import Runner  # starts Ray: imported only when a bisection runs

    return Runner(selection, out, source)


def _run(request: Request, runner: Runner | EnvRunner) -> BisectResult:
    out = runner.out
    try:
        with runner:
            return bisect(request, runner, on_step=lambda so_far: write_outputs(so_far, out))
    except BisectError as exc:
        raise UsageError(str(exc)) from None


def _announce(
    moves: tuple[Move, ...],
    walks: dict[str, tuple[str, ...]],
    selection: RunPlan,
    source: PipSource,
) -> None:
    for m in moves:
        n = len(walks[m.package])
        print(
            f"{m.package} {m.good} (good) .. {m.bad} (bad): {n - 2} versions between in {source.describe()},"
            f" about {rounds_estimate(n)} tries",
            file=sys.stderr,
        )
    print(f"{len(selection.matrix)} cells: {selection.matrix.announcement}", file=sys.stderr)
