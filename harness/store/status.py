"""Statuses and stages: what a cell ended in, and where a failure happened.

Every fact about a status lives in `Status`'s one table below: whether it counts as a
pass, whether its model exported and passed every check, how bad it is (the rank the
comparison and the ratchet order by), and how progress, reports and plots show it. Code
asks a status (`status.passing`, `status.rank`, `status.colour`); it never keeps its own
set of status strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Colour:
    """A colour group of the status palette (Okabe-Ito, colour-blind safe): several
    statuses share one, and the legend of a plot names the group."""

    label: str
    fill: str
    text: str
    css: str  # the class name the HTML report styles it with


OK_GREEN = Colour("ok", "#009E73", "#FFFFFF", "ok")
XFAIL_YELLOW = Colour("xfail (expected failure)", "#F0E442", "#000000", "xfail")
XPASS_BLUE = Colour("xpass (expected failure passed)", "#56B4E9", "#000000", "xpass")
NOT_RUN_GREY = Colour("skipped / not run", "#DDDDDD", "#000000", "skipped")
EXPORT_RED = Colour("export failed", "#D55E00", "#FFFFFF", "export")
ORT_ORANGE = Colour("checker / ORT failed", "#E69F00", "#000000", "ort")
NUMERICS_PINK = Colour("numerics / dynamic mismatch", "#CC79A7", "#000000", "numerics")
TIMEOUT_BLUE = Colour("timeout", "#0072B2", "#FFFFFF", "timeout")
CRASH_BLACK = Colour("crashed / oom / harness error", "#333333", "#FFFFFF", "crashed")
COLOURS = (
    OK_GREEN,
    XFAIL_YELLOW,
    XPASS_BLUE,
    NOT_RUN_GREY,
    EXPORT_RED,
    ORT_ORANGE,
    NUMERICS_PINK,
    TIMEOUT_BLUE,
    CRASH_BLACK,
)


@dataclass(frozen=True)
class StatusFacts:
    passing: bool  # the cell did what was expected of it: not a failure anywhere
    exported: bool  # the exported model passed every check (export, checker, ORT, numerics)
    applies: bool  # the cell applies here (False: skipped, e.g. no GPU, a missing library)
    ran: bool  # a worker ran it to an outcome of its own
    judged: bool  # the outcome says something about the exporter (not the harness)
    wrong_numbers: bool  # exported and ran, with outputs that differ from eager
    by_expectation: bool  # the status an expectation gave a cell (xfail, xpass)
    # How far from a working ONNX model the cell stopped: 0 for every passing status; no
    # result at all (timeout, oom, crash) is worse than a clean failure, and a cell the
    # harness could not judge (harness_error, not_attempted) is worst.
    rank: int
    word: str  # the short word a matrix cell shows
    mark: str  # the symbol markdown shows before the word
    colour: Colour
    legend: str | None  # what the mark means, where the word alone does not say it


class Status(StrEnum):
    """How a cell ended (contract: the record's `status`)."""

    OK = "ok"
    XFAIL = "xfail"
    XPASS = "xpass"
    SKIPPED = "skipped"
    EXPORT_FAILED = "export_failed"
    CHECKER_FAILED = "checker_failed"
    ORT_LOAD_FAILED = "ort_load_failed"
    ORT_RUN_FAILED = "ort_run_failed"
    RUNTIME_MISSING = "runtime_missing"
    NUMERICS_MISMATCH = "numerics_mismatch"
    DYNAMIC_MISMATCH = "dynamic_mismatch"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    OOM = "oom"
    NOT_ATTEMPTED = "not_attempted"
    HARNESS_ERROR = "harness_error"

    @property
    def facts(self) -> StatusFacts:
        return _FACTS[self]

    @property
    def passing(self) -> bool:
        return self.facts.passing

    @property
    def blocking(self) -> bool:
        """A passing cell that ends in this status is a regression that blocks CI."""
        return not self.facts.passing

    @property
    def exported(self) -> bool:
        return self.facts.exported

    @property
    def applies(self) -> bool:
        return self.facts.applies

    @property
    def ran(self) -> bool:
        return self.facts.ran

    @property
    def judged(self) -> bool:
        return self.facts.judged

    @property
    def wrong_numbers(self) -> bool:
        return self.facts.wrong_numbers

    @property
    def by_expectation(self) -> bool:
        return self.facts.by_expectation

    @property
    def rank(self) -> int:
        return self.facts.rank

    @property
    def word(self) -> str:
        return self.facts.word

    @property
    def mark(self) -> str:
        return self.facts.mark

    @property
    def colour(self) -> Colour:
        return self.facts.colour

    @property
    def legend(self) -> str | None:
        return self.facts.legend

    @classmethod
    def of(cls, value: str) -> Status:
        """The status named `value`; ValueError naming the known ones otherwise."""
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown status {value!r} (known: {known})") from None


S, F = Status, StatusFacts
Y, N = True, False
# fmt: off
_FACTS: dict[Status, StatusFacts] = {
    #                  passing exported applies ran judged wrong_numbers by_expectation
    #                  rank word  mark  colour  legend
    S.OK:                F(Y, Y, Y, Y, Y, N, N, 0, "ok",       "✅", OK_GREEN,      None),
    S.XFAIL:             F(Y, N, Y, Y, Y, N, Y, 0, "xfail",    "🟡", XFAIL_YELLOW,  "expected failure"),
    S.XPASS:             F(Y, Y, Y, Y, Y, N, Y, 0, "xpass",    "⭐", XPASS_BLUE,    "expected failure passed: update the expectation"),
    S.SKIPPED:           F(Y, N, N, N, N, N, N, 0, "skipped",  "➖", NOT_RUN_GREY,  None),
    S.NUMERICS_MISMATCH: F(N, N, Y, Y, Y, Y, N, 1, "numerics", "⚠️", NUMERICS_PINK, "outputs differ from eager"),
    S.DYNAMIC_MISMATCH:  F(N, N, Y, Y, Y, Y, N, 1, "dynamic",  "⚠️", NUMERICS_PINK, "wrong at the second (dynamic) shape"),
    S.ORT_RUN_FAILED:    F(N, N, Y, Y, Y, N, N, 2, "ort run",  "❌", ORT_ORANGE,    "ORT run failed"),
    S.RUNTIME_MISSING:   F(N, N, Y, Y, N, N, N, 2, "no kernel", "🚫", ORT_ORANGE,   "the runtime has no kernel for the dtype"),
    S.ORT_LOAD_FAILED:   F(N, N, Y, Y, Y, N, N, 3, "ort load", "❌", ORT_ORANGE,    "ORT could not load the model"),
    S.CHECKER_FAILED:    F(N, N, Y, Y, Y, N, N, 4, "checker",  "❌", ORT_ORANGE,    "ONNX checker failed"),
    S.EXPORT_FAILED:     F(N, N, Y, Y, Y, N, N, 5, "export",   "❌", EXPORT_RED,    "export failed (at stage)"),
    S.TIMEOUT:           F(N, N, Y, Y, Y, N, N, 6, "timeout",  "⏱", TIMEOUT_BLUE,  None),
    S.OOM:               F(N, N, Y, Y, Y, N, N, 6, "oom",      "💥", CRASH_BLACK,   "out of memory"),
    S.CRASHED:           F(N, N, Y, Y, Y, N, N, 6, "crashed",  "💥", CRASH_BLACK,   "worker crashed"),
    S.HARNESS_ERROR:     F(N, N, Y, Y, N, N, N, 7, "harness",  "🛠", CRASH_BLACK,   "harness error (build/reference)"),
    S.NOT_ATTEMPTED:     F(N, N, Y, N, N, N, N, 7, "not run",  "⬜", NOT_RUN_GREY,  "never ran"),
}
# fmt: on
del S, F, Y, N

WORST_RANK = max(f.rank for f in _FACTS.values())


def rank_of(status: str) -> int:
    """The rank of a status string; an unknown one (a newer harness wrote it) counts as worst."""
    try:
        return Status(status).rank
    except ValueError:
        return WORST_RANK


class Stage(StrEnum):
    """Where in a cell a failure happened (contract: the record's `stage`), in order."""

    BUILD = "build"
    REFERENCE = "reference"
    CAPTURE = "capture"
    TRANSLATE = "translate"
    OPTIMIZE = "optimize"
    SAVE = "save"
    CHECK = "check"
    ORT_SESSION = "ort_session"
    ORT_RUN = "ort_run"
    NUMERICS = "numerics"
    DYNAMIC = "dynamic"
    LATENCY = "latency"

    @property
    def failure_status(self) -> Status:
        """The status a failure at this stage gets (unless the cell expected it: xfail)."""
        return _FAILURE_STATUS[self]

    @property
    def is_export(self) -> bool:
        """A phase of the exporter call itself (capture, translate, optimize, save)."""
        return self in EXPORT_PHASES


EXPORT_PHASES = (Stage.CAPTURE, Stage.TRANSLATE, Stage.OPTIMIZE, Stage.SAVE)
_FAILURE_STATUS = {
    Stage.BUILD: Status.HARNESS_ERROR,
    Stage.REFERENCE: Status.HARNESS_ERROR,
    Stage.CAPTURE: Status.EXPORT_FAILED,
    Stage.TRANSLATE: Status.EXPORT_FAILED,
    Stage.OPTIMIZE: Status.EXPORT_FAILED,
    Stage.SAVE: Status.EXPORT_FAILED,
    Stage.CHECK: Status.CHECKER_FAILED,
    Stage.ORT_SESSION: Status.ORT_LOAD_FAILED,
    Stage.ORT_RUN: Status.ORT_RUN_FAILED,
    Stage.NUMERICS: Status.NUMERICS_MISMATCH,
    Stage.DYNAMIC: Status.DYNAMIC_MISMATCH,
    Stage.LATENCY: Status.ORT_RUN_FAILED,
}
