"""The bisection's search, over hand-made states: it finds the first bad version in about
log2 tries wherever it is, skips what cannot be tried, and says when skips hide the answer."""

from __future__ import annotations

import math

import pytest

from harness.bisect.search import Judgement, Search, Verdict, next_round, rounds_estimate

GOOD, BAD, SKIP = Judgement.GOOD, Judgement.BAD, Judgement.SKIP


def versions(n: int) -> tuple[str, ...]:
    return tuple(f"1.{i}" for i in range(n))


def run_to_end(search: Search, judge: dict[str, Judgement]) -> tuple[Search, list[str]]:
    """Drive a search with an oracle (version -> judgement); the versions tried, in order."""
    tried = []
    while (version := search.next_version()) is not None:
        tried.append(version)
        search = search.with_verdict(Verdict(version, judge[version], "oracle"))
    return search, tried


@pytest.mark.parametrize("n", [3, 4, 5, 8, 13, 67])
def test_finds_the_first_bad_version_wherever_it_is_in_at_most_log2_tries(n: int) -> None:
    all_versions = versions(n)
    for first_bad in range(1, n):
        oracle = {v: (BAD if i >= first_bad else GOOD) for i, v in enumerate(all_versions)}
        search, tried = run_to_end(Search("pkg", all_versions), oracle)
        outcome = search.outcome()
        assert outcome.done
        assert outcome.first_bad == all_versions[first_bad]
        assert outcome.last_good == all_versions[first_bad - 1]
        assert len(tried) <= math.ceil(math.log2(n - 1)), (first_bad, tried)
        assert len(set(tried)) == len(tried)  # never the same version twice


def test_the_estimate_is_the_bound_of_the_search() -> None:
    assert [rounds_estimate(n) for n in (2, 3, 4, 5, 9, 67)] == [0, 1, 2, 2, 3, 7]


def test_tries_the_middle_first_and_the_lower_of_two_middles() -> None:
    assert Search("pkg", versions(5)).next_version() == "1.2"  # 0 .. 4: middle 2
    assert Search("pkg", versions(6)).next_version() == "1.2"  # 0 .. 5: 2.5, the lower of 2 and 3


def test_a_skipped_version_is_stepped_around_and_the_answer_stays_exact() -> None:
    all_versions = versions(8)
    oracle = {v: (BAD if i >= 5 else GOOD) for i, v in enumerate(all_versions)}
    oracle["1.3"] = SKIP  # the middle, not installable
    search, tried = run_to_end(Search("pkg", all_versions), oracle)
    assert tried[0] == "1.3" and tried[1] == "1.4"  # then the nearest to the middle
    outcome = search.outcome()
    assert (outcome.last_good, outcome.first_bad) == ("1.4", "1.5")


def test_skips_just_before_the_first_bad_leave_it_among_candidates() -> None:
    all_versions = versions(6)  # 1.0 good .. 1.5 bad
    oracle = {"1.1": GOOD, "1.2": SKIP, "1.3": SKIP, "1.4": BAD}
    search, _ = run_to_end(Search("pkg", all_versions), oracle)
    outcome = search.outcome()
    assert outcome.done
    assert outcome.first_bad is None
    assert outcome.last_good == "1.1"
    assert outcome.candidates == ("1.2", "1.3", "1.4")


def test_every_version_skipped_leaves_bad_as_the_last_candidate() -> None:
    search, tried = run_to_end(Search("pkg", versions(4)), {"1.1": SKIP, "1.2": SKIP})
    assert sorted(tried) == ["1.1", "1.2"]
    assert search.outcome().candidates == ("1.1", "1.2", "1.3")


def test_adjacent_good_and_bad_need_no_try() -> None:
    search = Search("pkg", ("1.0", "1.1"))
    assert search.next_version() is None
    assert search.outcome().first_bad == "1.1"


def test_a_verdict_on_an_endpoint_or_a_stranger_is_refused() -> None:
    search = Search("pkg", versions(4))
    for version in ("1.0", "1.3", "9.9"):
        with pytest.raises(ValueError, match="is not between"):
            search.with_verdict(Verdict(version, BAD))
    with pytest.raises(ValueError, match="a good and a bad version"):
        Search("pkg", ("1.0",))


def test_a_new_verdict_on_a_version_replaces_the_old_one() -> None:
    search = Search("pkg", versions(5)).with_verdict(Verdict("1.2", SKIP, "flaky index"))
    search = search.with_verdict(Verdict("1.2", BAD, "found"))
    assert search.verdicts == (Verdict("1.2", BAD, "found"),)


def test_cells_whose_intervals_agree_share_a_run_and_others_get_their_own() -> None:
    same = Search("core", versions(8))
    ahead = same.with_verdict(Verdict("1.3", GOOD))  # 1.3 .. 1.7: next 1.5
    other_package = Search("extra", versions(8))
    done = Search("core", ("1.0", "1.1"))
    wanted = next_round({"a": same, "b": same, "c": ahead, "d": other_package, "e": done})
    assert wanted == {("core", "1.3"): ["a", "b"], ("core", "1.5"): ["c"], ("extra", "1.3"): ["d"]}
