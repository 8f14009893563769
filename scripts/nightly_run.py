"""Run each nightly suite into its own run directory: `harness run --suite S --out OUT/S`.

`harness run` takes one suite; the nightly takes a list. A suite whose run fails does not
stop the others (their results are still compared and published); the exit code is then
the first failing one. Each OUT/S is created first, so a suite that wrote nothing still
leaves an empty directory that `nightly_compare.py` reports as an error instead of missing
it silently.

    python scripts/nightly_run.py --devices cpu --out nightly/runs \
        --keep-graphs nightly/graphs --previous-graphs previous/graphs

Without --suites it runs the nightly's own (DEFAULT_SUITES): the smoke and vision suites,
the transformers registry's static suite, its decode suite (one generation step with a
KV cache per causal-/seq2seq-LM head), the decode suite through transformers' exporter with
ORT's fusions, and its task heads, which need the hf extra.

--keep-graphs keeps each ok cell's graph in a store shared by the suites (content-addressed
by graph fingerprint), so that the next night can time its changed graphs against these;
--previous-graphs first links the previous night's store into it, so that only the graphs
that changed are written (nightly_compare.py --graphs prunes what tonight no longer uses).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.store import graphs

DEFAULT_SUITES = (
    "smoke,vision,transformers,transformers-decode,transformers-decode-fused,transformers-tasks"
)


def split_list(text: str) -> list[str]:
    """'smoke, vision' or 'smoke vision' -> ['smoke', 'vision']."""
    return [item for item in re.split(r"[,\s]+", text) if item]


def run_dir_name(suite: str) -> str:
    """The run directory of a suite: its name, or a suite file's stem (`my/x.toml` -> `x`)."""
    return Path(suite).stem if suite.endswith(".toml") else suite


def harness_command() -> list[str]:
    """`harness` on PATH (the installed entry point), else this interpreter's module."""
    found = shutil.which("harness")
    return [found] if found else [sys.executable, "-m", "harness.cli"]


def suite_command(
    suite: str, out: Path, *, opsets: str, devices: str, keep_graphs: Path | None = None
) -> list[str]:
    """The `harness run` command line of one suite; empty opsets/devices keep the suite's."""
    command = [*harness_command(), "run", "--suite", suite, "--out", str(out)]
    if keep_graphs is not None:
        command += ["--keep-graphs", str(keep_graphs)]
    if opsets:
        command += ["--opsets", ",".join(split_list(opsets))]
    if devices:
        command += ["--devices", ",".join(split_list(devices))]
    return command


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--suites",
        default=DEFAULT_SUITES,
        help=f"comma- or space-separated suite names or files (default: {DEFAULT_SUITES})",
    )
    p.add_argument("--opsets", default="", help="e.g. 18,20 (default: each suite's)")
    p.add_argument("--devices", default="", help="e.g. cpu or cuda (default: each suite's)")
    p.add_argument("--out", type=Path, required=True, help="folder of the run directories")
    p.add_argument(
        "--keep-graphs", type=Path, metavar="DIR", help="the graph store the suites share"
    )
    p.add_argument(
        "--previous-graphs",
        type=Path,
        metavar="DIR",
        help="the previous night's graph store, linked into --keep-graphs first",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    suites = split_list(args.suites)
    if not suites:
        print("error: --suites names no suite", file=sys.stderr)
        return 2
    names = [run_dir_name(s) for s in suites]
    if len(set(names)) != len(names):
        print(f"error: --suites {args.suites!r} gives two runs the same directory", file=sys.stderr)
        return 2
    if args.keep_graphs and args.previous_graphs and args.previous_graphs.is_dir():
        added = graphs.seed(args.keep_graphs, args.previous_graphs)
        print(f"graph store: {added} graphs from {args.previous_graphs}", flush=True)
    first_failure = 0
    for suite, name in zip(suites, names, strict=True):
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        command = suite_command(
            suite, out, opsets=args.opsets, devices=args.devices, keep_graphs=args.keep_graphs
        )
        print(f"::group::harness run --suite {suite}", flush=True)
        code = subprocess.run(command, check=False).returncode
        print("::endgroup::", flush=True)
        if code:
            print(f"error: suite {suite} exited with {code}", file=sys.stderr, flush=True)
            first_failure = first_failure or code
    return first_failure


if __name__ == "__main__":
    sys.exit(main())
