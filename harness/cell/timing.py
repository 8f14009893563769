"""Measurement: the latency loop of the protocol and the process's peak memory.

Latency: warm up until the timings settle (or `warmup_max_s`), then time at least
`min_iters` calls and `min_time_s` seconds, keeping every raw sample.
Memory: reset the kernel's peak-RSS mark (`/proc/self/clear_refs` with 5), and read
VmHWM after the measured region; report peak minus the RSS at reset, less the file-backed
pages mapped meanwhile (`PeakRss`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.cell import node
from harness.stats import interval_width, is_stable
from harness.store.protocol import Protocol

STABLE_WINDOW = 6


def time_calls(fn: Callable[[], object], protocol: Protocol) -> list[float]:
    """Raw latencies of `fn` in milliseconds, after warm-up, with the garbage collector
    paused (a collection inside a timed call is the collector's time, not the model's).
    Between calls, a loop on cores of its own lets a cell waiting to time alone go first
    (harness.cell.node.give_way); its caps count its own calls."""
    with gc_paused():
        _warm_up(fn, protocol)
        samples: list[float] = []
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1000.0)
            start += node.give_way()  # a cell waiting to time alone goes first
            if enough_samples(len(samples), time.perf_counter() - start, protocol, (samples,)):
                return samples


# A loop stopped by its time cap still takes this many calls (fewer than `min_iters` asks for
# none): a median of one or two calls is one call's time (Gemma-3-1B's p50 came from one).
MIN_CAPPED = 3

# Interleaving alternates blocks of calls, not single calls: a call right after the other
# side's ran with cold caches (seen here: vision models' ORT p50 1.3-2.4x a plain loop's
# when ORT and eager alternated call by call). Each block starts with one untimed call.
INTERLEAVE_BLOCK_S = 0.025


def time_interleaved(
    first: Callable[[], object], second: Callable[[], object], protocol: Protocol
) -> tuple[list[float], list[float]]:
    """Raw latencies (ms) of two calls timed in alternating blocks in one loop (A B, B A,
    ...; each block about INTERLEAVE_BLOCK_S): the machine's drift within the loop hits
    both alike, so their ratio cancels it, while each call runs warm. Each is warmed up
    first; the loop ends when each side has what `time_calls` would take, its time read
    as the sides' mean: a cap of `max_time_s` is one of 2 x `max_time_s` for the loop,
    however unequal its sides (an eager side 2.6 times ORT's took a loop to 3.6 times its
    cap when the faster side's time counted)."""
    with gc_paused():
        warm_ms = (_warm_up(first, protocol), _warm_up(second, protocol))
        a: list[float] = []
        b: list[float] = []
        spent = [0.0, 0.0]
        blocks = 0
        while True:
            pair = ((first, a, 0), (second, b, 1))
            for fn, samples, side in pair if blocks % 2 == 0 else pair[::-1]:
                spent[side] += _block(fn, samples, warm_ms[side], protocol.max_iters)
            blocks += 1
            node.give_way()  # the blocks' own seconds are the loop's: none is lost
            n, elapsed = min(len(a), len(b)), sum(spent) / 2
            if enough_samples(n, elapsed, protocol, (a, b)):
                return a, b


def _block(fn: Callable[[], object], samples: list[float], warm_ms: float, cap: int) -> float:
    """One untimed call, then timed calls for INTERLEAVE_BLOCK_S (at least one), none past
    `cap` samples (a 4 us graph made 6 000 calls a block: records of 11 000 samples where
    `max_iters` said 2 000); returns the seconds the block took. A call that outlasts a
    block by itself (a real-size model: hundreds of ms; its last call, or its last warm-up
    call `warm_ms` before the first block) is not warmed again: its caches are its own
    after the first few ms, and the untimed call would double the loop's time."""
    start = time.perf_counter()
    if (samples[-1] if samples else warm_ms) < INTERLEAVE_BLOCK_S * 1000:
        fn()
    while True:
        t0 = time.perf_counter()
        fn()
        now = time.perf_counter()
        samples.append((now - t0) * 1000.0)
        if now - start >= INTERLEAVE_BLOCK_S or len(samples) >= cap:
            return now - start


def enough_samples(
    n: int, elapsed: float, protocol: Protocol, sides: tuple[list[float], ...] = ()
) -> bool:
    """At least `min_iters` calls and `min_time_s`, and, with a `target_interval`, each
    side's median known that well (its 95% interval that narrow); or a cap (`max_iters`, or
    `max_time_s` once a quarter of `min_iters` is in, and MIN_CAPPED calls)."""
    enough = n >= protocol.min_iters and elapsed >= protocol.min_time_s
    if enough and protocol.target_interval > 0:
        widths = [interval_width(side) for side in sides]
        enough = all(w is not None and w <= protocol.target_interval for w in widths)
    floor = min(max(MIN_CAPPED, protocol.min_iters // 4), protocol.min_iters)
    capped = n >= protocol.max_iters or (elapsed >= protocol.max_time_s and n >= floor)
    return enough or capped


def freeze_survivors() -> None:
    """Collect, then move every object still alive out of the cyclic collector's sight
    (`gc.freeze`). Between cells what is alive is the process's own: modules, caches, the
    exporters' registries. The collections a cell makes (before its export's memory
    baseline, before its timed loop) then scan only the cell's own objects: a worker with
    torch, onnxscript and transformers loaded tracks ~500 000 objects, and each full
    collection took 0.3-1 s here, three per cell. The price: an object alive between cells
    that later becomes cyclic garbage is not collected."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect once, then keep the cyclic garbage collector off for the timed region."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _warm_up(fn: Callable[[], object], protocol: Protocol) -> float:
    """Call `fn` until at least `warmup_min_iters` calls are done and the last
    STABLE_WINDOW timings agree (or `warmup_max_s` has passed); returns the last call's ms.
    The iterations are counted apart from the window: a window capped at STABLE_WINDOW
    never reached a `warmup_min_iters` of 7 or more, and the loop never ended."""
    window: list[float] = []
    iters = 0
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        iters += 1
        window = [*window[-(STABLE_WINDOW - 1) :], time.perf_counter() - t0]
        if iters >= protocol.warmup_min_iters and (
            is_stable(window, protocol.warmup_tolerance)
            or time.perf_counter() - start >= protocol.warmup_max_s
        ):
            return window[-1] * 1000.0


# -- memory ---------------------------------------------------------------------------------

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(*fields: str) -> dict[str, int]:
    """The named fields of /proc/self/status (KiB), from one read: one moment's figures.
    Those the kernel does not give are left out."""
    try:
        text = _STATUS.read_text()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in fields:
            found[name] = int(value.split()[0])
    return found


def rss_mb() -> float | None:
    kib = _status_kib("VmRSS").get("VmRSS")
    return None if kib is None else kib / 1024.0


_SMAPS_ROLLUP = Path("/proc/self/smaps_rollup")


def private_memory_mb() -> dict[str, float]:
    """This process's proportional (`pss_mb`) and unique (`uss_mb`: private clean + dirty)
    memory, from the kernel's smaps rollup; empty where the kernel has none. A forked child
    shares the pages of its parent it never wrote: its USS is what the child alone costs."""
    try:
        fields = dict(line.split(":", 1) for line in _SMAPS_ROLLUP.read_text().splitlines()[1:])
    except (OSError, ValueError):
        return {}
    kib = {name: int(value.split()[0]) for name, value in fields.items()}
    private = kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0)
    return {"pss_mb": round(kib.get("Pss", 0) / 1024, 1), "uss_mb": round(private / 1024, 1)}


def _release_free_memory() -> None:
    """Collect garbage and hand the allocator's free pages back to the kernel before the
    baseline is read. A reused worker otherwise keeps freed memory resident, the next
    export reuses it without raising RSS, and its peak reads far too low (measured: 0-1
    MiB for vision exports that peak at 8-22 MiB in a fresh process)."""
    gc.collect()
    # not glibc: the peak may read low in reused workers
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakRss:
    """Peak resident memory over a region, relative to the RSS at its start (MiB), less
    the file-backed pages mapped meanwhile (RssFile: shared libraries' code and data, page
    cache the region did not allocate). A forked cell maps again the pages its zygote had
    mapped as it first runs them: during BERT-base's dynamo export 28.6 MB of them, against
    2.3 in a fresh process, whose anonymous growth was the same (18.5 and 18.9 MB).

    `None` where the kernel offers no resettable peak (not Linux, or no permission)."""

    def __init__(self) -> None:
        self.baseline_kib: int | None = None
        self.file_kib: int | None = None
        self.peak_mb: float | None = None

    def __enter__(self) -> PeakRss:
        _release_free_memory()
        try:
            _CLEAR_REFS.write_text("5")
        except OSError:
            return self  # no resettable peak: nothing to measure from
        start = _status_kib("VmRSS", "RssFile")
        self.baseline_kib, self.file_kib = start.get("VmRSS"), start.get("RssFile")
        return self

    def __exit__(self, *exc: object) -> None:
        end = _status_kib("VmHWM", "RssFile")
        hwm, file_kib = end.get("VmHWM"), end.get("RssFile")
        mapped = 0
        if file_kib is not None and self.file_kib is not None:
            mapped = max(0, file_kib - self.file_kib)
        if self.baseline_kib is not None and hwm is not None:
            self.peak_mb = max(0, hwm - self.baseline_kib - mapped) / 1024.0


class PeakCuda:
    """Peak CUDA memory allocated by torch over a region, above its start (MiB); None on CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.peak_mb: float | None = None
        self._start = 0

    def __enter__(self) -> PeakCuda:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._start = torch.cuda.memory_allocated()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            self.peak_mb = max(0, torch.cuda.max_memory_allocated() - self._start) / 1024**2
