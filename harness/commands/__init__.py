"""One module per CLI verb (`harness <verb>`), each with `HELP`, `add_arguments(parser)`
and `main(args) -> int`. The modules import nothing heavy at import time (no torch, no
ray, no matplotlib) so that `harness --help` and user errors answer at once."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

# The verbs, in the order `harness --help` lists them.
VERBS = (
    "run",
    "list",
    "compare",
    "bisect",
    "history",
    "publish",
    "report",
    "coverage",
    "zoo",
    "repro",
    "debt",
)


def number(
    *, low: float = 0.0, high: float = float("inf"), open_low: bool = False
) -> Callable[[str], float]:
    """An argparse type: a finite number within [low, high] ((low, high] with `open_low`).
    NaN compares false with everything, so an unchecked `nan` floor or threshold would
    silently never judge anything."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        too_low = value <= low if open_low else value < low
        if not math.isfinite(value) or too_low or value > high:
            bound = f"{'above' if open_low else 'at least'} {low:g}"
            bound += f" and at most {high:g}" if math.isfinite(high) else ""
            raise argparse.ArgumentTypeError(f"takes a finite number {bound}, not {text!r}")
        return value

    return parse


def name_list(value: str) -> tuple[str, ...]:
    """An argparse type: 'a,b' -> ('a', 'b'); a list of nothing (',' or '') is refused,
    never read as 'all'."""
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"takes a comma-separated list, not {value!r}")
    return names
