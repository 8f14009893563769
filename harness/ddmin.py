"""Delta debugging and bisection over an abstract oracle ("does this candidate still fail
the same way?"), pure: no torch, no graphs. The callers decide what an item is (a node of
a program, a step of an optimizer) and what failing means.

`ddmin` is Zeller and Hildebrandt's minimizing delta debugging ("Simplifying and Isolating
Failure-Inducing Input", TSE 2002): split the failing set into n chunks, keep a chunk or a
complement that still fails, else split finer; it ends 1-minimal (removing any one item
makes the failure go away) or when the clock says stop, with the smallest failing set so
far. `first_failing` is a bisection for the first step of a sequence whose prefix fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Shrunk(Generic[T]):
    """The smallest failing set found, how many oracle calls it took, and whether the
    search ran to its end (1-minimal) or was stopped by the clock."""

    kept: tuple[T, ...]
    tests: int
    complete: bool


class _OutOfTime(Exception):
    pass


class _Oracle(Generic[T]):
    """The caller's oracle over `keep + subset`, in the items' own order, asked once per
    distinct subset."""

    def __init__(
        self,
        items: Sequence[T],
        keep: Sequence[T],
        fails: Callable[[tuple[T, ...]], bool],
        out_of_time: Callable[[], bool],
    ) -> None:
        self.position = {item: i for i, item in enumerate(items)}
        self.keep, self.fails, self.out_of_time = tuple(keep), fails, out_of_time
        self.known: dict[frozenset[T], bool] = {}
        self.tests = 0

    def ordered(self, subset: Sequence[T]) -> tuple[T, ...]:
        return tuple(sorted({*self.keep, *subset}, key=lambda item: self.position[item]))

    def __call__(self, subset: Sequence[T]) -> bool:
        key = frozenset(subset)
        if key not in self.known:
            if self.out_of_time():
                raise _OutOfTime
            self.tests += 1
            self.known[key] = self.fails(self.ordered(subset))
        return self.known[key]


def _chunks(items: list[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(items[start:end])
        start = end
    return [c for c in chunks if c]


def _reduce(current: list[T], n: int, test: _Oracle[T]) -> tuple[list[T], int] | None:
    """One round at granularity n: a chunk that fails alone, else a complement that
    fails; None where neither does."""
    chunks = _chunks(current, min(n, len(current)))
    for chunk in chunks:
        if len(chunk) < len(current) and test(chunk):
            return chunk, 2
    if len(chunks) != 2:  # with two chunks the complements are the chunks themselves
        for chunk in chunks:
            complement = [c for c in current if c not in chunk]
            if test(complement):
                return complement, max(len(chunks) - 1, 2)
    return None


def ddmin(
    items: Sequence[T],
    fails: Callable[[tuple[T, ...]], bool],
    *,
    keep: Sequence[T] = (),
    out_of_time: Callable[[], bool] = lambda: False,
) -> Shrunk[T]:
    """The smallest subset S of `items` found such that `fails(keep + S)` holds, given that
    `fails(keep + items)` does (items hashable and distinct; `keep` are always in)."""
    kept_apart = [k for k in keep if k not in set(items)]
    test = _Oracle([*items, *kept_apart], keep, fails, out_of_time)
    current = [i for i in items if i not in set(keep)]
    test.known[frozenset(current)] = True
    n = 2
    try:
        while current:
            reduced = _reduce(current, n, test)
            if reduced is not None:
                current, n = reduced
            elif n >= len(current):
                break  # every single item is needed: 1-minimal
            else:
                n = min(2 * n, len(current))
    except _OutOfTime:
        return Shrunk(test.ordered(current), test.tests, complete=False)
    return Shrunk(test.ordered(current), test.tests, complete=True)


@dataclass(frozen=True)
class Bisected:
    """The first step k (1-based) whose prefix steps[:k] fails, and the oracle calls made;
    `first` is None where even the whole sequence does not fail."""

    first: int | None
    tests: int


def first_failing(n: int, fails: Callable[[int], bool]) -> Bisected:
    """Bisect over prefixes 0..n of a sequence of steps, assuming a prefix that fails keeps
    failing as steps are added (the optimizer's passes: a wrong number, once introduced,
    stays). `fails(k)` applies the first k steps. The empty prefix is taken to pass."""
    tests = 1
    if not fails(n):
        return Bisected(None, tests)
    low, high = 0, n  # fails(low) is False (or low == 0), fails(high) is True
    while high - low > 1:
        middle = (low + high) // 2
        tests += 1
        if fails(middle):
            high = middle
        else:
            low = middle
    return Bisected(high, tests)
