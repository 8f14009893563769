"""The `transformers` and `transformers-decode` suites' known failures (`_expected.csv` and
`_decode_expected.csv` beside this file), in the
grammar of expected/status.csv, rewritten from a run of the suite by the mechanism every
generated zoo uses (harness.plan.zoo_expected): a row per model, exporter and shape that
failed deterministically, naming the status, the stage and the error's type, with the ops
the exporter lacked or the error signature as the reason (a reason edited by hand stays
while the failure does). The zoo entries carry these rows as their `expect=`: a cell failing
the same way is `xfail`, one that starts to pass is `xpass`, one that fails another way
stays a failure.

    python -m model_zoo.transformers._expected RUN_DIR        # rewrite the file of its suite

A run of either suite rewrites that suite's file (the rows of the other one's family are
left alone).

Timeouts, crashes and out-of-memory cells get no row: they depend on the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from harness.plan import expected_file
from harness.plan.zoo_expected import ZooExpected
from harness.store import rundir
from model_zoo.transformers._decode_inventory import DECODE_EXPECTED, DECODE_FAMILY
from model_zoo.transformers._inventory import EXPECTED, FAMILY

ZOO = ZooExpected(
    EXPECTED,
    FAMILY,
    header=expected_file.HEADER.replace(
        "# Regenerate from a run with: harness compare --update-expected RUN_DIR",
        "# The transformers suite's known failures, read by model_zoo/transformers/architectures.py.\n"
        "# Rewrite from a run of the suite with: python -m model_zoo.transformers._expected RUN_DIR",
    ),
    pin_error_type=True,
)
DECODE_ZOO = ZooExpected(
    DECODE_EXPECTED,
    DECODE_FAMILY,
    header=expected_file.HEADER.replace(
        "# Regenerate from a run with: harness compare --update-expected RUN_DIR",
        "# The transformers-decode suite's known failures, read by model_zoo/transformers/decoders.py.\n"
        "# Rewrite from a run of the suite with: python -m model_zoo.transformers._expected RUN_DIR",
    ),
    pin_error_type=True,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "run_dir", type=Path, help="a run of the transformers or transformers-decode suite"
    )
    p.add_argument("--out", type=Path, help="the file to write (default: the suite's own)")
    args = p.parse_args(argv)
    records = list(rundir.iter_records(args.run_dir))
    families = {r.family for r in records}
    zoos = [z for z in (ZOO, DECODE_ZOO) if z.family in families]
    if not zoos:
        print(f"error: {args.run_dir} holds no cell of the transformers suites", file=sys.stderr)
        return 2
    for zoo in zoos:
        out = args.out or zoo.path
        before, after = dataclasses.replace(zoo, path=out).update(records)
        print(f"wrote {out}: {after} expected failures ({before} before) from {args.run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
