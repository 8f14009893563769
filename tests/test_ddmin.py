"""Delta debugging and bisection over hand-made oracles (no torch)."""

from __future__ import annotations

import itertools

from harness.ddmin import ddmin, first_failing


def _needs(*required: int):  # type: ignore[no-untyped-def]
    calls: list[tuple[int, ...]] = []

    def fails(candidate: tuple[int, ...]) -> bool:
        calls.append(candidate)
        return set(required) <= set(candidate)

    return fails, calls


def test_a_failure_that_needs_one_item_of_a_hundred_shrinks_to_it() -> None:
    fails, calls = _needs(37)
    found = ddmin(list(range(100)), fails)
    assert found.kept == (37,)
    assert found.complete
    assert found.tests == len(calls)
    assert found.tests < 30  # about 2 log2(100) for one item


def test_a_failure_that_needs_two_far_apart_items_keeps_both_in_order() -> None:
    fails, _ = _needs(90, 3)
    found = ddmin(list(range(100)), fails)
    assert found.kept == (3, 90)


def test_the_result_is_one_minimal() -> None:
    """Removing any single kept item makes the failure go away."""
    required = {4, 5, 11, 12, 30}
    found = ddmin(list(range(40)), lambda c: required <= set(c))
    assert set(found.kept) == required
    for item in found.kept:
        assert not required <= set(found.kept) - {item}


def test_kept_items_are_always_passed_and_never_removed() -> None:
    seen: list[tuple[str, ...]] = []

    def fails(candidate: tuple[str, ...]) -> bool:
        seen.append(candidate)
        return "b" in candidate and "end" in candidate

    found = ddmin(["a", "b", "c", "d"], fails, keep=["end"])
    assert found.kept == ("b", "end")
    assert all("end" in c for c in seen)


def test_an_item_needed_only_with_the_kept_one_can_shrink_to_nothing() -> None:
    found = ddmin(["a", "b"], lambda c: "x" in c, keep=["x"])
    assert found.kept == ("x",)


def test_each_distinct_candidate_is_asked_once() -> None:
    fails, calls = _needs(1, 6)
    ddmin(list(range(8)), fails)
    assert len(calls) == len(set(calls))


def test_the_clock_stops_the_search_with_the_smallest_failing_set_so_far() -> None:
    fails, calls = _needs(50)
    budget = itertools.count()
    found = ddmin(list(range(100)), fails, out_of_time=lambda: next(budget) >= 3)
    assert not found.complete
    assert found.tests == 3 == len(calls)
    assert 50 in found.kept
    assert fails(found.kept)
    assert len(found.kept) <= 50  # it kept what the three tests reduced it to


def test_first_failing_finds_the_step_that_breaks_a_prefix() -> None:
    asked: list[int] = []

    def fails(k: int) -> bool:
        asked.append(k)
        return k >= 13

    found = first_failing(40, fails)
    assert found.first == 13
    assert found.tests == len(asked) <= 7  # 1 + ceil(log2(40))
    assert 12 in asked and 13 in asked


def test_first_failing_says_none_where_the_whole_sequence_passes() -> None:
    found = first_failing(10, lambda k: False)
    assert (found.first, found.tests) == (None, 1)


def test_first_failing_with_the_first_step_at_fault() -> None:
    assert first_failing(9, lambda k: k >= 1).first == 1
