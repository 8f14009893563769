"""Open, or update, the one tracking issue of the nightly's blocking findings with `gh`.

    python scripts/tracking_issue.py --body findings/ [--body more.md] \
        [--title "Nightly: blocking regressions"] [--label nightly-regression] [--dry-run]

Each --body is a markdown file, or a folder searched for issue.md files (what
nightly_compare.py writes when something blocks; one per nightly job). No body at all:
nothing blocked, nothing to do. Otherwise the open issue with exactly this title and label
gets the new findings as its body and as a comment (the comment notifies its
subscribers); without one, the issue is created (and the label, if missing). One fixed
title and label keep it to one issue however many nights fail.

--dry-run looks the issue up (read-only) and prints the commands it would run. Needs `gh`
with GH_TOKEN (issues: write) and GH_REPO. Exit 0, or 2 when gh fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

TITLE = "Nightly: blocking regressions"
LABEL = "nightly-regression"
LABEL_COLOR = "B60205"
# GitHub refuses an issue body or comment over 65,536 characters.
BODY_LIMIT = 65_000


class GhError(Exception):
    """gh failed: the message carries its stderr."""


def gh(*args: str) -> str:
    done = subprocess.run(["gh", *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise GhError(f"gh {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def body_files(paths: Sequence[Path]) -> list[Path]:
    """The given files, and every issue.md under the given folders, in a stable order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(path.rglob("issue.md"))
        elif path.is_file():
            found.append(path)
    return found


def compose(parts: Sequence[str], *, now: datetime) -> str:
    header = f"Blocking findings of the nightly of {now:%Y-%m-%d %H:%M} UTC (kept up to date by `scripts/tracking_issue.py`)."
    body = "\n\n---\n\n".join([header, *(p.strip() for p in parts)]) + "\n"
    if len(body) > BODY_LIMIT:
        body = (
            body[:BODY_LIMIT].rsplit("\n", 1)[0]
            + "\n\n… truncated: the run summaries have the rest.\n"
        )
    return body


def find_open_issue(title: str, label: str) -> int | None:
    """The open issue with this exact title and label (the oldest, should there be two)."""
    listing = ["issue", "list", "--state", "open", "--label", label, "--limit", "100"]
    out = gh(*listing, "--json", "number,title")
    numbers = [int(i["number"]) for i in json.loads(out or "[]") if i.get("title") == title]
    return min(numbers) if numbers else None


def plan(title: str, label: str, body_file: str, existing: int | None) -> list[list[str]]:
    """The gh commands that write: update the open issue and comment on it, or create it."""
    if existing is not None:
        n = str(existing)
        return [
            ["issue", "edit", n, "--body-file", body_file],
            ["issue", "comment", n, "--body-file", body_file],
        ]
    return [["issue", "create", "--title", title, "--label", label, "--body-file", body_file]]


def ensure_label(label: str) -> None:
    """Create the label, or update the one there (`--force`): creating an issue with a label
    that does not exist fails, and so may listing by it."""
    description = "blocking findings of the nightly"
    gh("label", "create", label, "--color", LABEL_COLOR, "--description", description, "--force")


def report(args: argparse.Namespace, body: str) -> int:
    if not args.dry_run:
        ensure_label(args.label)
    existing = find_open_issue(args.title, args.label)
    with tempfile.TemporaryDirectory() as tmp:
        body_file = Path(tmp) / "body.md"
        body_file.write_text(body)
        commands = plan(args.title, args.label, str(body_file), existing)
        if args.dry_run:
            print(f"dry run: open issue {existing or 'none'}; would run:")
            for command in commands:
                print("  gh " + " ".join(command))
            print(body)
            return 0
        outputs = [gh(*command) for command in commands]
    where = f"#{existing}" if existing is not None else outputs[-1].strip()
    print(f"{'updated' if existing is not None else 'opened'} tracking issue {where}")
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--body",
        type=Path,
        action="append",
        default=[],
        metavar="FILE|DIR",
        help="findings (repeatable)",
    )
    p.add_argument("--title", default=TITLE, help=f"the issue's fixed title (default {TITLE!r})")
    p.add_argument("--label", default=LABEL, help=f"the issue's label (default {LABEL!r})")
    p.add_argument("--dry-run", action="store_true", help="look up, print, change nothing")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    files = body_files(args.body)
    if not files:
        print("no findings to report: nothing blocking, the tracking issue is left as it is")
        return 0
    body = compose([f.read_text() for f in files], now=datetime.now(UTC))
    try:
        return report(args, body)
    except GhError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
