"""Where a bisection stands (harness/bisect/progress.py): its phases and their transitions,
over hand-made states; no package set runs here."""

from __future__ import annotations

import pytest

from harness.bisect.culprit import Blame
from harness.bisect.progress import (
    Phase,
    Progress,
    answered,
    cells_so_far,
    endpoint_verdicts,
    tried,
    wanted,
    with_blames,
    with_round,
    with_targets,
)
from harness.bisect.search import Judgement, Verdict
from harness.bisect.sets import Attempt
from harness.bisect.verdict import Target

WIDEN = ("widen", "dynamo", 18, "cpu", False, "base", "none")
CHAIN = ("chain", "dynamo", 18, "cpu", False, "base", "none")
FAILS = Target("status", "status_changed", "ok -> export_failed")
WALK = {"core": ("1.0", "1.1", "1.2", "1.3", "1.4")}


def label(key: tuple[object, ...]) -> str:
    return str(key[0])


def _searching() -> Progress:
    found = with_targets(Progress(), {WIDEN: FAILS, CHAIN: FAILS})
    blames = {WIDEN: Blame("core", reason="core alone"), CHAIN: Blame(None, reason="no one")}
    return with_blames(found, blames, WALK)


def test_the_endpoints_lead_to_blame_or_to_nothing() -> None:
    assert with_targets(Progress(), {}).phase is Phase.NOTHING
    blaming = with_targets(Progress(), {WIDEN: FAILS})
    assert (blaming.phase, dict(blaming.found)) == (Phase.BLAME, {WIDEN: FAILS})
    assert wanted(blaming) == {}  # nothing is searched before the blames


def test_only_a_cell_blamed_on_a_package_searches_it() -> None:
    progress = _searching()
    assert progress.phase is Phase.SEARCH
    assert list(progress.searches) == [WIDEN]
    assert progress.searches[WIDEN].versions == WALK["core"]
    assert wanted(progress) == {("core", "1.2"): [WIDEN]}  # the middle of 1.0 .. 1.4


def test_rounds_walk_the_search_to_its_answer() -> None:
    progress = _searching()
    for version, judgement in (("1.2", Judgement.GOOD), ("1.3", Judgement.BAD)):
        ((asked, keys),) = wanted(progress).items()
        assert asked == ("core", version) and keys == [WIDEN]
        progress = with_round(progress, {asked: {WIDEN: Verdict(version, judgement)}})
    assert progress.rounds == 2 and wanted(progress) == {}
    done = answered(progress)
    outcome = done.searches[WIDEN].outcome()
    assert (done.phase, outcome.last_good, outcome.first_bad) == (Phase.ANSWER, "1.2", "1.3")


def test_a_step_out_of_its_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="in phase blame cannot take a search step"):
        with_round(with_targets(Progress(), {WIDEN: FAILS}), {})
    with pytest.raises(ValueError, match="still asks for a version"):
        answered(_searching())
    with pytest.raises(ValueError, match="in phase endpoints cannot take a blame step"):
        with_blames(Progress(), {}, WALK)


def test_the_result_so_far_shows_a_blame_once_known_and_a_search_once_it_has_a_round() -> None:
    blaming = with_targets(Progress(), {WIDEN: FAILS})
    (cell,) = cells_so_far(blaming, label)
    assert (cell.label, cell.blame, cell.package, cell.outcome) == (
        "widen", "not blamed yet", None, None
    )  # fmt: skip
    searching = _searching()
    before = {c.label: (c.blame, c.package) for c in cells_so_far(searching, label)}
    assert before == {"widen": ("core alone", None), "chain": ("no one", None)}
    after = with_round(searching, {("core", "1.2"): {WIDEN: Verdict("1.2", Judgement.BAD)}})
    widen = cells_so_far(after, label)[0]
    assert widen.package == "core" and widen.outcome is not None
    assert [v.version for v in widen.verdicts] == ["1.2"]


def test_the_tried_log_lines_carry_their_verdicts() -> None:
    good = Attempt("core-1.0", ("core==1.0",), run_dir="runs/core-1.0", variant="core-1.0")
    bad = Attempt("core-1.4", ("core==1.4",), skipped=None, installs=("core-1.4",), seconds=3.0)
    good_verdicts, bad_verdicts = endpoint_verdicts((good, bad), {WIDEN: FAILS}, label)
    assert good_verdicts == {"widen": Verdict("core-1.0", Judgement.GOOD, "the reference")}
    assert bad_verdicts == {"widen": Verdict("core-1.4", Judgement.BAD, "ok -> export_failed")}
    line = tried(bad, "bad", bad_verdicts)
    assert (line.label, line.purpose, line.installs, line.seconds) == (
        "core-1.4", "bad", ("core-1.4",), 3.0
    )  # fmt: skip
    assert line.verdicts == bad_verdicts and line.variant is None
    assert tried(good, "good", good_verdicts).variant == "core-1.0"
