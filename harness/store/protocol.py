"""How latency is measured: the `[protocol]` table of a suite file, carried by every cell
task to the worker (harness.cell.timing) and recorded in the manifest."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass
from math import inf
from typing import Any

from harness.errors import UsageError


@dataclass(frozen=True)
class Protocol:
    """How latency is measured (docs/design.md, measurement protocol); recorded in the manifest."""

    warmup_min_iters: int = 3
    warmup_max_s: float = 2.0
    warmup_tolerance: float = 0.1
    min_iters: int = 20
    min_time_s: float = 0.3
    max_iters: int = 2000
    max_time_s: float = 5.0
    # Stop a loop once the median's 95% interval is this narrow on both sides (its
    # half-width over the median: 0.02 is +-2%), past the minimums; 0: the minimums alone.
    target_interval: float = 0.0
    # The seconds a cell's latency loops but the record's own (its first shape at its
    # threads) may take together: other shapes and thread counts (0: each its max_time_s).
    budget_s: float = 0.0
    # Thread counts ORT and eager are also timed at, beside the cell's own (0: every core
    # of the node); () : the cell's alone.
    latency_threads: tuple[int, ...] = ()
    # Time each model's graphs of every exporter together, in pairs, as the run goes on
    # (harness.pipeline.pairing): each record's speed against the fastest exporter's.
    pair_exporters: bool = False
    # With pair_exporters, each paired CPU cell's ORT latency at its threads is its graph's
    # calls in the pair (one of a model whose other exporters failed: timed alone after
    # them), not a loop of its own: the record's figure and the pair's ratio are then one
    # measurement, and the graph is timed once, not twice.
    ort_from_pairs: bool = False
    # Time eager once per model, shape and thread count (harness.runtime.latency.EagerShare):
    # another exporter's cell of the model that comes after, on the same node, times ORT
    # alone and takes those eager samples, its record naming the cell that timed them.
    share_eager: bool = False
    # Build dynamo's ONNX function registry once per process and inputs, not on every export
    # call of the dynamo and transformers exporters (harness.exporters.registry_memo):
    # export time is then the model's own, less the 0.5-1.6 s every user's call pays;
    # false: the call as a user makes it (the real-size suite, whose export times are held
    # to a plain script's).
    registry_memo: bool = True

    def numbers(self) -> dict[str, float]:
        """Every setting that is one number (the manifest's `settings.protocol`)."""
        return {
            k: v
            for k, v in vars(self).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }

    @classmethod
    def from_table(cls, table: dict[str, Any], source: str) -> Protocol:
        protocol = cls(**cls._checked(table, source))
        if problem := protocol.problem():
            raise UsageError(f"{source}: [protocol] {problem}")
        return protocol

    @classmethod
    def _checked(cls, table: dict[str, Any], source: str) -> dict[str, Any]:
        """The table's settings as the fields take them, each checked alone."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise UsageError(
                f"{source}: unknown [protocol] key {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        values = dict(table)
        flags = {
            key: values.pop(key) for key in list(values) if isinstance(getattr(cls, key), bool)
        }
        for key, value in flags.items():
            if not isinstance(value, bool):
                raise UsageError(f"{source}: [protocol] {key} must be true or false")
        threads = values.pop("latency_threads", [])
        if not isinstance(threads, list) or not all(_count(t) for t in threads):
            raise UsageError(
                f"{source}: [protocol] latency_threads must be a list of thread counts"
                " (0: every core of the node)"
            )
        for key, value in values.items():
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not 0 <= value < inf
            ):
                raise UsageError(f"{source}: [protocol] {key} must be a finite non-negative number")
            if isinstance(getattr(cls, key), int) and not isinstance(value, int):
                raise UsageError(f"{source}: [protocol] {key} must be a whole number")
        return {**values, **flags, "latency_threads": tuple(threads)}

    @classmethod
    def given_table(cls, given: str, source: str) -> dict[str, Any]:
        """The keys `given` names ("min_iters=5,max_time_s=1": a TOML inline table's body,
        as `--protocol` takes it), each checked alone: whether they agree with the rest of
        a run's protocol is the plan's to say (`overridden`), where the suite is known."""
        try:
            table: dict[str, Any] = tomllib.loads(f"given = {{{given}}}")["given"]
        except tomllib.TOMLDecodeError:
            raise UsageError(
                f"{source} {given!r}: {_unreadable_pair(given)}give KEY=VALUE pairs separated"
                " by commas, e.g. min_time_s=0.05,max_time_s=1,latency_threads=[1,2]"
            ) from None
        cls._checked(table, source)
        return table

    def overridden(self, given: str | None, source: str = "--protocol") -> Protocol:
        """These settings with the keys `given` names (`given_table`) in their place; these
        where None."""
        if given is None:
            return self
        own = {**vars(self), "latency_threads": list(self.latency_threads)}
        return Protocol.from_table(own | Protocol.given_table(given, source), source)

    def problem(self) -> str | None:
        """What makes the settings contradict themselves (a loop of no call, a minimum above
        its maximum, an interval wider than the median), or None."""
        if self.max_iters < 1:
            return "max_iters must be at least 1: a loop times one call at least"
        if self.min_iters > self.max_iters:
            return f"min_iters {self.min_iters} is above max_iters {self.max_iters}"
        if self.min_time_s > self.max_time_s:
            return f"min_time_s {self.min_time_s} is above max_time_s {self.max_time_s}"
        if self.target_interval >= 1:
            return "target_interval is a fraction of the median below 1 (0.03: +-3%)"
        if self.ort_from_pairs and not self.pair_exporters:
            return "ort_from_pairs needs pair_exporters = true: the pairs time the graphs"
        return None


# A try that needs a cell's verdict, not its figures (the debt search's): one timed call.
VERDICT_ONLY = Protocol(
    warmup_min_iters=1, warmup_max_s=0.0, min_iters=1, min_time_s=0.0, max_iters=1, max_time_s=0.0
)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _unreadable_pair(given: str) -> str:
    """The first KEY=VALUE of `given` (split at the commas outside brackets) whose value is
    no TOML value, said as the start of a sentence; "" where each one reads alone."""
    pieces = re.split(r",(?![^\[]*\])", given)  # a comma not inside a list
    for piece in filter(str.strip, pieces):
        key, _, value = (part.strip() for part in piece.partition("="))
        try:
            tomllib.loads(f"value = {value}")
        except tomllib.TOMLDecodeError:
            if not value:
                return f"{key!r} has no value; "
            return f"{key}'s value {value!r} is not a number, true, false or a list; "
    return ""
