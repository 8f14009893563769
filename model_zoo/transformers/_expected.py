"""The older spelling of `harness zoo expected RUN_DIR` for the transformers suites' known
failures (`_expected.csv`, `_decode_expected.csv` and `_tasks_expected.csv` beside this
file, rewritten from a run by harness.zoo.expected; see harness.zoo.generated):

    python -m model_zoo.transformers._expected RUN_DIR [--out PATH]

It says so and runs the same function, for these zoos only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import UsageError
from harness.zoo.generated.catalog import update_expected
from harness.zoo.generated.transformers import expected_files

ZOOS = expected_files()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run_dir", type=Path, help="a run of a transformers suite")
    p.add_argument("--out", type=Path, help="the file to write (default: the suite's own)")
    args = p.parse_args(argv)
    print(
        "python -m model_zoo.transformers._expected is deprecated: use `harness zoo expected RUN_DIR`",
        file=sys.stderr,
    )
    try:
        lines = update_expected(args.run_dir, path=args.out, families=[z.family for z in ZOOS])
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
