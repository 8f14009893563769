"""The latency budget (harness.runtime.latency.Budget): the loops share `budget_s`, each
its part of what is left, and only the loops' own time is spent from it."""

from __future__ import annotations

import time

import pytest

from harness.runtime.latency import Budget
from harness.store.protocol import Protocol


def test_each_loop_gets_its_share_of_what_the_loops_before_it_left() -> None:
    budget = Budget(Protocol(max_time_s=10.0, budget_s=1.2), loops=2)

    def loop(seconds: float) -> float:
        def timed(protocol: Protocol) -> float:
            time.sleep(seconds)
            return protocol.max_time_s

        return budget.loop(timed)

    first = loop(0.3)
    time.sleep(0.5)  # a session opened between the loops: not the budget's
    second = loop(0.0)
    assert first == pytest.approx(1.2 / 2 / 2)  # half of the budget, half a side
    assert second == pytest.approx((1.2 - 0.3) / 2, abs=0.03)  # what the first left


def test_without_a_budget_each_loop_keeps_the_protocols_cap() -> None:
    budget = Budget(Protocol(max_time_s=7.0), loops=3)
    assert [budget.loop(lambda p: p.max_time_s) for _ in range(4)] == [7.0] * 4
