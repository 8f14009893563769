"""The generated transformers zoos' generator (`harness zoo refresh transformers`,
`transformers-decode`, `transformers-tasks`): probe every model type of the installed
transformers' registry (or every causal-LM and seq2seq-LM head, with a KV cache; or every
task head), each in a worker process with a memory ceiling and a time limit, so one that
hangs, crashes or eats the machine becomes a reason and the others still get probed; then
rewrite the inventory the zoo's entry file reads (`model_zoo/transformers/_inventory.json`,
`_decode_inventory.json`, `_tasks_inventory.json`).

The probing itself imports transformers and lives beside the zoo's contents
(model_zoo/transformers/_probe.py, _decode_probe.py, _task_probe.py, served by
`_refresh.py --serve`); this module only drives the processes and writes the file. About
800 model types take 15-20 minutes on 2 cores: run it when transformers is upgraded,
commit the file, and rewrite the expected failures from a run of the suite (`harness zoo
expected RUN_DIR`).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from harness.zoo import expected_file
from harness.zoo.expected import ZooExpected

PROBE_TIMEOUT_S = 240.0
PROBE_MEMORY_GB = 6.0
JOBS = 2


def expected_files() -> tuple[ZooExpected, ...]:
    """The transformers zoos' expected failures (rows pin the error's type)."""
    from model_zoo.transformers._decode_inventory import DECODE_EXPECTED, DECODE_FAMILY
    from model_zoo.transformers._inventory import EXPECTED, FAMILY
    from model_zoo.transformers._tasks import TASKS_EXPECTED, TASKS_FAMILY

    zoos = (
        (EXPECTED, FAMILY, "architectures.py"),
        (DECODE_EXPECTED, DECODE_FAMILY, "decoders.py"),
        (TASKS_EXPECTED, TASKS_FAMILY, "tasks.py"),
    )
    return tuple(
        ZooExpected(path, family, _header(family, reader), pin_error_type=True)
        for path, family, reader in zoos
    )


def _header(suite: str, reader: str) -> str:
    return expected_file.HEADER.replace(
        "# Regenerate from a run with: harness compare --update-expected RUN_DIR",
        f"# The {suite} suite's known failures, read by model_zoo/transformers/{reader}.\n"
        "# Rewrite from a run of the suite with: harness zoo expected RUN_DIR",
    )


# A probe's verdict on one item, as model_zoo/transformers/_refresh.py writes it: its
# stage and reason where it failed, what it built otherwise.
Probed = dict[str, object]


@dataclass(frozen=True)
class Probing:
    """How the probes run: in `jobs` processes, each item within `timeout_s` and
    `memory_gb`."""

    jobs: int = JOBS
    timeout_s: float = PROBE_TIMEOUT_S
    memory_gb: float = PROBE_MEMORY_GB


def refresh(
    types: Sequence[str] | None,
    *,
    zoo: str = "transformers",
    out: Path | None = None,
    merge: bool = False,
    probing: Probing = Probing(),
    say: Callable[[str], None] = print,
) -> str:
    """Probe `types` (default: the zoo's whole registry: model types, `TYPE:HEAD` decode
    heads or `TYPE:Class` task heads) and write the inventory to `out` (default: the zoo's
    own); with `merge`, the other entries of `out` stay. The summary line."""
    from model_zoo.transformers._inventory import (
        inventory_document,
        read_inventory,
        write_inventory,
    )
    from model_zoo.transformers._refresh import ZOOS

    probed = ZOOS[zoo]
    out = out or probed.inventory
    known = probed.registry()
    start = time.perf_counter()
    entries = probe_all(list(types or known), probing=probing, say=say, zoo=zoo)
    seconds = time.perf_counter() - start
    if merge and out.is_file():
        old = read_inventory(out)
        entries, seconds = (
            {**probed.items(old["models"]), **entries},
            old["probe_s"],
        )  # the full probe's
    unknown = sorted(set(entries) - set(known))
    if unknown:
        say(f"not in this transformers' registry, dropped: {', '.join(unknown)}")
    entries = {t: e for t, e in entries.items() if t not in unknown}
    built = sum("reason" not in e for e in entries.values())
    document = inventory_document(
        probed.named(entries),
        registry_size=len(known),
        seconds=seconds,
        command=f"harness zoo refresh {zoo}",
    )
    write_inventory(document, out)
    return f"{built} of {len(entries)} {probed.built}; wrote {out}"


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class _Worker:
    process: subprocess.Popen[str]
    zoo: str
    current: str | None = None
    started: float = 0.0
    buffer: str = field(default="")


def _spawn(memory_gb: float, zoo: str) -> _Worker:
    """A probing process (model_zoo/transformers/_refresh.py --serve)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "model_zoo.transformers._refresh",
            "--serve",
            "--memory-gb",
            str(memory_gb),
            "--zoo",
            zoo,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        },
    )
    return _Worker(process, zoo)


def probe_all(
    model_types: list[str],
    *,
    probing: Probing = Probing(),
    say: Callable[[str], None] = print,
    zoo: str = "transformers",
) -> dict[str, Probed]:
    """Probe every item of `zoo` across `jobs` processes; one entry per item, always."""
    pending = list(reversed(model_types))
    results: dict[str, Probed] = {}
    jobs, timeout_s, memory_gb = probing.jobs, probing.timeout_s, probing.memory_gb
    workers = [_spawn(memory_gb, zoo) for _ in range(min(jobs, len(model_types)) or 1)]
    selector = selectors.DefaultSelector()
    for w in workers:
        selector.register(_stdout(w), selectors.EVENT_READ, w)
    while len(results) < len(model_types):
        for w in workers:
            if w.current is None and pending:
                _send(w, pending.pop())
        for key, _ in selector.select(timeout=1.0):
            _read(key.data, results, say, len(model_types))
        for i, w in enumerate(workers):
            replacement = _reap(w, results, timeout_s, memory_gb)
            if replacement is not None:
                selector.unregister(_stdout(w))
                workers[i] = replacement
                selector.register(_stdout(replacement), selectors.EVENT_READ, replacement)
    for w in workers:
        w.process.kill()
    return {t: results[t] for t in sorted(results)}


def _stdout(w: _Worker) -> IO[str]:
    assert w.process.stdout is not None
    return w.process.stdout


def _send(w: _Worker, model_type: str) -> None:
    assert w.process.stdin is not None
    w.current, w.started = model_type, time.monotonic()
    w.process.stdin.write(model_type + "\n")
    w.process.stdin.flush()


def _read(w: _Worker, results: dict[str, Probed], say: Callable[[str], None], total: int) -> None:
    line = _stdout(w).readline()
    if not line:
        return  # the process died: _reap notices
    entry = json.loads(line)
    model_type = entry.pop("model_type")
    results[model_type] = entry
    w.current = None
    verdict = "ok" if "reason" not in entry else f"{entry['stage']}: {entry['reason'][:90]}"
    say(f"[{len(results)}/{total}] {model_type}: {verdict}")


def _reap(
    w: _Worker, results: dict[str, Probed], timeout_s: float, memory_gb: float
) -> _Worker | None:
    """A worker that died or ran past the limit: its type gets the reason, and a new
    process takes its place."""
    died = w.process.poll() is not None
    late = w.current is not None and time.monotonic() - w.started > timeout_s
    if not (died or late):
        return None
    if w.current is not None:
        if late:
            reason = f"probe took longer than {timeout_s:.0f} s"
        else:
            reason = f"probe process died (exit {w.process.returncode})"
        results[w.current] = {"stage": "build", "reason": reason}
    w.process.kill()
    w.process.wait()
    return _spawn(memory_gb, w.zoo)
