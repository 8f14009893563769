"""`harness publish`: the nightly's static site from the history databases."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UsageError

HELP = "build the static nightly site (pass rates, matrices, timelines, clusters, feeds)"
DESCRIPTION = """\
Build a static site (HTML, CSS, JS and JSON; no server, no external scripts or fonts) from
the history database: the pass rate per suite x exporter (x dtype, task) over nights, the
newest night's regressions, fixes and environment changes, each suite's matrix with
filters kept in the URL, each model's timelines with the compare's noise band, failure
clusters with their repros, op coverage, an Atom feed and regressions.json. With
--pre-release, a second history (the newest pre-releases) is shown beside the first: the
versions each ran, the cells whose status differs and those whose graph does. A
--pre-release database that is missing (its job failed) is said on the site; the stable
channel still publishes.

examples:
  harness publish results/history.sqlite --out site
  harness publish stable.sqlite --pre-release pre.sqlite --out site --url https://o.github.io/r/
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("history", type=Path, metavar="HISTORY", help="the (stable) history database")
    p.add_argument("--out", type=Path, required=True, metavar="SITE", help="the site's folder")
    p.add_argument(
        "--pre-release",
        type=Path,
        metavar="HISTORY",
        help="a second history database: the nightly's runs on the newest pre-releases",
    )
    p.add_argument(
        "--url",
        default="https://example.invalid/",
        metavar="URL",
        help="where the site is served (the Atom feed's links; default: %(default)s)",
    )


def main(args: argparse.Namespace) -> int:
    from harness.history.db import HistoryError
    from harness.publish.nights import PRE_RELEASE, STABLE
    from harness.publish.site import publish
    from harness.store.rundir import RunDirError

    channels, missing = {STABLE: args.history}, {}
    if args.pre_release is not None and args.pre_release.is_file():
        channels[PRE_RELEASE] = args.pre_release
    elif args.pre_release is not None:  # its job failed (an install, say): stable publishes
        missing[PRE_RELEASE] = (
            f"no history tonight ({args.pre_release} is missing: its nightly job published "
            "none, as when the install of its packages fails)"
        )
        print(f"{PRE_RELEASE}: {missing[PRE_RELEASE]}")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a folder")
    try:
        done = publish(channels, args.out, base_url=args.url, missing=missing)
    except (HistoryError, RunDirError) as exc:
        raise UsageError(str(exc)) from None
    nights = ", ".join(f"{name} {n} nights" for name, n in done.nights.items())
    print(
        f"published {args.out}: {done.files} files, {done.bytes / 1024:.0f} KiB, {nights}, "
        f"{done.seconds:.1f} s"
    )
    return 0
