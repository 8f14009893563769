"""`harness`: the command line. Each verb lives in `harness/commands/<verb>.py`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from harness import __version__
from harness.commands import VERBS
from harness.errors import UsageError

DESCRIPTION = """\
Export a zoo of PyTorch models with both ONNX exporters (torch.export-based `dynamo` and
TorchScript-based `torchscript`/`torchscript-script`) at several opsets, check them in
ONNX Runtime against eager PyTorch, measure export time, memory and latency, and compare
runs for regressions. Cells run as Ray tasks (a local Ray instance by default).

examples:
  harness run --suite smoke                 # fast check, a few minutes
  harness run --suite vision --threads 2    # one suite, 2 cores per cell
  harness run --zoo my_models/              # your own zoo entries, default matrix
  harness list --json                       # models and suites
  harness compare results/A results/B       # what got worse from A to B
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as a UsageError (exit 2, one line)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND", parser_class=_Parser)
    for verb in VERBS:
        module = importlib.import_module(f"harness.commands.{verb}")
        p = sub.add_parser(
            verb,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_main=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
        args.command_line = ("harness", *argv)  # as the manifest and the tried log keep it
        if args.verb is None:
            parser.print_help()
            return 2
        return int(args._main(args))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
