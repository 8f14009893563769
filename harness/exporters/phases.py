"""Phases observed around a real exporter call, never instead of it.

For the duration of one `torch.onnx.export(...)` call, the exporter's own functions
(capture strategies, decomposition, translation, optimisation, saving) are wrapped by
timers that call the original with the same arguments and return its result unchanged.
What is exported is exactly what the user's call exports; the wrappers only add up the
seconds spent in each phase and remember the last phase entered, which is where a
failure happened. A torch without one of these functions leaves that phase `None`, and
the export is still the real call.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Hook:
    """Time calls of `owner.attribute` (owner: a dotted module, or module:Class) as `phase`;
    `keep_arg` remembers the call's first argument (e.g. the program being translated)."""

    phase: str
    owner: str
    attribute: str
    keep_arg: bool = False  # kept in PhaseClock.kept under the attribute's name
    keep_result: bool = False  # each call's return value, in PhaseClock.returned


@dataclass
class PhaseClock:
    phases: tuple[str, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    observed: set[str] = field(default_factory=set)  # phases whose hook could be installed
    entered: list[str] = field(default_factory=list)
    raised: str | None = None  # the phase whose function raised, if one did
    kept: dict[str, object] = field(default_factory=dict)
    returned: dict[str, list[object]] = field(default_factory=dict)
    _depth: int = 0

    def timings(self) -> dict[str, float | None]:
        """Seconds per phase; None where this torch offered no hook to observe it."""
        return {
            p: round(self.seconds.get(p, 0.0), 6) if p in self.observed else None
            for p in self.phases
        }

    def failed_in(self, default: str) -> str:
        """The phase a failure of the call belongs to: the one whose function raised, else
        `default` (the exporter knows what runs unobserved after its hooks)."""
        return self.raised or default

    @property
    def last_entered(self) -> str | None:
        return self.entered[-1] if self.entered else None


def _resolve(owner: str) -> object:
    module_name, _, class_name = owner.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name) if class_name else module


def _timed(clock: PhaseClock, hook: Hook, fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if clock._depth:  # nested inside another observed phase: counted there
            return fn(*args, **kwargs)
        clock.entered.append(hook.phase)
        if hook.keep_arg and args:
            clock.kept[hook.attribute] = args[0]
        clock._depth += 1
        start = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            clock.raised = clock.raised or hook.phase
            raise
        finally:
            clock._depth -= 1
            clock.seconds[hook.phase] = clock.seconds.get(hook.phase, 0.0) + (
                time.perf_counter() - start
            )
        if hook.keep_result:
            clock.returned.setdefault(hook.attribute, []).append(result)
        return result

    return wrapper


def _wrapped(raw: object, clock: PhaseClock, hook: Hook) -> object:
    """The replacement attribute, keeping the descriptor kind of the original."""
    if isinstance(raw, classmethod):
        return classmethod(_timed(clock, hook, raw.__func__))
    if isinstance(raw, staticmethod):
        return staticmethod(_timed(clock, hook, raw.__func__))
    return _timed(clock, hook, cast(Callable[..., object], raw))


@contextlib.contextmanager
def observe(hooks: Sequence[Hook], phases: Sequence[str]) -> Iterator[PhaseClock]:
    """Install the hooks that this torch has, yield the clock, restore every original."""
    clock = PhaseClock(tuple(phases))
    restore: list[tuple[object, str, object]] = []
    try:
        for hook in hooks:
            try:
                owner = _resolve(hook.owner)
                raw = vars(owner)[hook.attribute]
            except (ImportError, AttributeError, KeyError):
                continue  # this torch lacks the hook: the phase stays None
            restore.append((owner, hook.attribute, raw))
            setattr(owner, hook.attribute, _wrapped(raw, clock, hook))
            clock.observed.add(hook.phase)
        yield clock
    finally:
        for owner, attribute, raw in reversed(restore):
            setattr(owner, attribute, raw)
