"""What a run directory may hold: a run directory is untrusted input (CI downloads it), so
every record and manifest is checked here, in one place, before any stage uses it.

`check_record` and `check_manifest` raise `Malformed`, naming the field ('numerics[0].max_abs')
and what is wrong with its value; the readers (harness.store.rundir, harness.store.history)
add the file and line. The rules follow what the harness writes: strict JSON (no NaN or
infinity), measured amounts (seconds, milliseconds, MiB, bytes, speedups) within what a
clock or a counter can give, statuses and stages this harness knows. The keys a typed part
of the record knows (harness.store.details: `worker`, `samples`, ...) hold what it would
write there; any other key, and free-form objects (`metadata`, `cluster`, ...), only need
finite numbers: a newer harness may add a key to `worker` without raising the schema, and
the reader keeps it (`Open.extra`). A newer harness that changes a field raises the
schema, which readers refuse.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from harness.store.options import Shapes
from harness.store.status import Stage, Status

# A measured amount is 0 or within these bounds: no clock or counter of a cell gives less
# or more, and inside them a ratio of two amounts, its logarithm and its exponential stay
# finite (`harness compare` takes all three).
SMALLEST_AMOUNT = 1e-12
LARGEST_AMOUNT = 1e12


class SchemaError(ValueError):
    """A record or manifest that this version of the harness cannot read."""


class Malformed(SchemaError):
    """A record or manifest field whose value this harness never writes."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"field {where!r} {problem}" if where else problem)
        self.where = where


Check = Callable[[Any, str], None]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _at(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


# -- the checks ---------------------------------------------------------------------------------


def string(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise Malformed(where, f"must be a string, not {_shown(value)}")


def boolean(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise Malformed(where, f"must be true or false, not {_shown(value)}")


def integer(minimum: int = 0) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise Malformed(where, f"must be an integer of at least {minimum}, not {_shown(value)}")

    return check


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def amount(value: Any, where: str) -> None:
    """Seconds, milliseconds, MiB, bytes, a speedup: what a cell measured."""
    ok = _number(value) and (value == 0 or SMALLEST_AMOUNT <= value <= LARGEST_AMOUNT)
    if not ok:
        raise Malformed(
            where,
            f"must be 0 or a number from {SMALLEST_AMOUNT:g} to {LARGEST_AMOUNT:g},"
            f" not {_shown(value)}",
        )


def size(value: Any, where: str) -> None:
    """An error size or a tolerance: any finite number of at least 0."""
    if not _number(value) or not math.isfinite(value) or value < 0:
        raise Malformed(where, f"must be a finite number of at least 0, not {_shown(value)}")


def number(value: Any, where: str) -> None:
    """A clock reading or a figure of where a cell ran: any finite number."""
    if not _number(value) or not math.isfinite(value):
        raise Malformed(where, f"must be a finite number, not {_shown(value)}")


def free(value: Any, where: str) -> None:
    """Anything JSON holds, as long as its numbers are finite."""
    if isinstance(value, float) and not math.isfinite(value):
        raise Malformed(where, f"must be a finite number, not {_shown(value)}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            free(item, _at(where, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            free(item, _at(where, i))


def one_of(names: Iterable[str], what: str) -> Check:
    known = tuple(names)

    def check(value: Any, where: str) -> None:
        if value not in known:
            raise Malformed(
                where, f"is an unknown {what} {_shown(value)} (known: {', '.join(known)})"
            )

    return check


def optional(check: Check) -> Check:
    def optional_check(value: Any, where: str) -> None:
        if value is not None:
            check(value, where)

    return optional_check


def list_of(item: Check) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise Malformed(where, f"must be a list, not {_shown(value)}")
        for i, entry in enumerate(value):
            item(entry, _at(where, i))

    return check


def mapping_of(item: Check) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Malformed(where, f"must be an object, not {_shown(value)}")
        for key, entry in value.items():
            item(entry, _at(where, key))

    return check


def obj(fields: Mapping[str, Check], *, required: Iterable[str] = ()) -> Check:
    """A JSON object whose known `fields` hold what their checks accept; other keys only
    need finite numbers."""
    needed = tuple(required)

    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Malformed(where, f"must be an object, not {_shown(value)}")
        for key in needed:
            if key not in value:
                raise Malformed(_at(where, key), "is missing")
        for key, entry in value.items():
            fields.get(key, free)(entry, _at(where, key))

    return check


# -- records ------------------------------------------------------------------------------------

_TEXT, _COUNT, _AMOUNT = optional(string), optional(integer()), optional(amount)

OUTPUT_CHECK = obj(
    {
        "name": string,
        "max_abs": optional(size),
        "max_rel": optional(size),
        "rmse": optional(size),
        "rtol": size,
        "atol": size,
        "ok": boolean,
        "note": _TEXT,
        "mismatches": _COUNT,
        "tolerance_source": _TEXT,
    },
    required=("name", "rtol", "atol", "ok"),
)
LATENCY = obj(
    {
        "samples": optional(list_of(amount)),
        **dict.fromkeys(("p50", "p90", "p99", "mean", "stdev"), amount),
        "n": integer(),
    },
    required=("p50", "p90", "p99", "mean", "stdev", "n"),
)
STATUS = one_of((s.value for s in Status), "status")
STAGE = one_of((s.value for s in Stage), "stage")
_SAMPLE_FAILURE = obj(
    {
        "index": integer(),
        "status": STATUS,
        "stage": optional(STAGE),
        **dict.fromkeys(("error_signature", "inputs"), _TEXT),
        "unsupported_ops": optional(list_of(string)),
        "tolerance": optional(mapping_of(free)),
    },
    required=("index", "status"),
)
SAMPLES = obj(
    {
        **dict.fromkeys(("total", "run", "exported", "matched", "wrong", "failed"), _COUNT),
        "skipped": _COUNT,
        "view_dependent": _COUNT,
        "indices": optional(list_of(integer())),
        "failures": optional(list_of(_SAMPLE_FAILURE)),
        "skips": optional(list_of(obj({"index": integer(), "reason": _TEXT}, required=("index",)))),
        "tolerances": optional(
            list_of(
                obj(
                    {
                        "rtol": size,
                        "atol": size,
                        "source": _TEXT,
                        "samples": optional(list_of(integer())),
                    },
                    required=("rtol", "atol"),
                )
            )
        ),
    }
)
_TEXTS = optional(list_of(string))
FIRST_DIVERGENCE = obj(
    {
        **dict.fromkeys(("node", "fx_node", "op_type", "aten_op", "source", "output"), _TEXT),
        "reason": _TEXT,
        "max_abs": optional(size),
        "compared": _COUNT,
        "sample": _COUNT,
    }
)
MISMATCH_STAGE = obj(
    {
        **dict.fromkeys(("stage", "note", "reason"), _TEXT),
        "checks": optional(
            list_of(
                obj(
                    {
                        "stage": _TEXT,
                        "compared": _TEXT,
                        "ok": optional(boolean),
                        "max_abs": optional(size),
                    }
                )
            )
        ),
        "optimizer_step": optional(mapping_of(free)),
    }
)
ORT_RUNTIME = obj(
    {"onnxruntime": _TEXT, "providers": _TEXTS, "session_options": optional(mapping_of(free))}
)
_NUMBER, _PID = optional(number), optional(integer())
WORKER = obj(
    {
        **dict.fromkeys(("node", "host"), _TEXT),
        **dict.fromkeys(("pid", "zygote_pid", "cell_pid"), _PID),
        **dict.fromkeys(("submitted_at", "started_at", "finished_at", "collected_at"), _NUMBER),
        **dict.fromkeys(("prepare_s", "fork_s", "exit_s"), _NUMBER),
        **dict.fromkeys(("zygote_rss_mb", "cell_pss_mb", "cell_uss_mb"), _NUMBER),
        "cold_start": optional(
            obj(
                {
                    **dict.fromkeys(("exporter", "error"), _TEXT),
                    "opset": _COUNT,
                    **dict.fromkeys(("seconds", "cpu_seconds", "peak_rss_mb"), _NUMBER),
                }
            )
        ),
    }
)
MINIMAL_REPRO = obj(
    {
        **dict.fromkeys(("kind", "method", "target", "reason"), _TEXT),
        **dict.fromkeys(("reproduces", "search_complete"), optional(boolean)),
        **dict.fromkeys(("nodes_before", "nodes_after", "tests"), _COUNT),
        **dict.fromkeys(("seconds", "bound_s", "wall_s"), _AMOUNT),
        "imports": _TEXTS,
        "verify": optional(mapping_of(free)),
    }
)
# The Record's fields without a default (tests/store/test_validate.py holds the two equal).
RECORD_REQUIRED = tuple(
    "schema run_id model family exporter opset device dynamic variant status".split()
)
RECORD = obj(
    {
        "schema": integer(1),
        **dict.fromkeys(("run_id", "model", "family", "exporter", "device", "variant"), string),
        "opset": integer(),
        "dynamic": boolean,
        "status": STATUS,
        "stage": optional(STAGE),
        **dict.fromkeys(("error_type", "error_message", "error_signature", "reason"), _TEXT),
        "opset_actual": _COUNT,
        **dict.fromkeys(("export_s", "export_peak_rss_mb", "export_peak_cuda_mb"), _AMOUNT),
        **dict.fromkeys(("ort_session_s", "speedup", "duration_s"), _AMOUNT),
        "export_phases": optional(mapping_of(_AMOUNT)),
        "onnx_bytes": _COUNT,
        "onnx_nodes": _COUNT,
        "onnx_ops": optional(mapping_of(integer())),
        "aten_ops": optional(mapping_of(integer())),
        "unsupported_ops": optional(list_of(string)),
        "numerics": optional(list_of(OUTPUT_CHECK)),
        "ort_latency_ms": optional(LATENCY),
        "eager_latency_ms": optional(LATENCY),
        "first_divergence": optional(FIRST_DIVERGENCE),
        "mismatch_stage": optional(MISMATCH_STAGE),
        "ort_runtime": optional(ORT_RUNTIME),
        "worker": optional(WORKER),
        "minimal_repro": optional(MINIMAL_REPRO),
        "metadata": optional(mapping_of(free)),
        "attempt": integer(1),
        "artifacts": optional(mapping_of(string)),
        "samples": optional(SAMPLES),
        "graph_fingerprint": _TEXT,
    },
    required=RECORD_REQUIRED,
)


def check_record(d: Any) -> None:
    """Raise `Malformed` unless `d` is a record this harness could have written."""
    RECORD(d, "")


# -- manifests ----------------------------------------------------------------------------------

_STRINGS = optional(list_of(string))


def SHAPES(value: Any, where: str) -> None:  # noqa: N802 (a check, named as the others)
    """`options.dynamic`: what `Shapes.json` writes (false, true, "only") or a name."""
    try:
        Shapes.of(value)
    except ValueError:
        known = "false, true, " + ", ".join(f"{s.value!r}" for s in Shapes)
        raise Malformed(where, f"must be one of {known}, not {_shown(value)}") from None


OPTIONS = obj(
    {
        **dict.fromkeys(("suite", "out", "keep_graphs", "address"), _TEXT),
        **dict.fromkeys(("models", "exporters", "devices", "zoo", "variants"), _STRINGS),
        "opsets": optional(list_of(integer())),
        "dynamic": optional(SHAPES),
        "timeout_s": amount,
        "threads": integer(1),
        "keep_onnx": boolean,
        "max_memory_gb": _AMOUNT,
    }
)
_NUMBERS = optional(mapping_of(size))  # Ray's resources, the measurement protocol
_NODE = obj(
    {
        **dict.fromkeys(("node_id", "host", "address"), _TEXT),
        "alive": optional(boolean),
        "resources": _NUMBERS,
    }
)
CLUSTER = obj({"address": _TEXT, "nodes": optional(list_of(_NODE)), "resources": _NUMBERS})
DISPATCH = obj(
    {
        **dict.fromkeys(
            "submitted completed retried max_in_flight peak_in_flight peak_in_flight_gpu"
            " not_attempted".split(),
            _COUNT,
        ),
        "slots": optional(obj({"cpu": _COUNT, "gpu": _COUNT})),
        "lost_nodes": _STRINGS,
        **dict.fromkeys(
            ("node_settle_s_max", "driver_peak_rss_mb", "wall_s", "cells_per_minute"), _AMOUNT
        ),
    }
)
COLD_START = obj(
    {
        "exporter": string,
        **dict.fromkeys(("variant", "error", "node"), _TEXT),
        **dict.fromkeys(("opset", "pid", "zygote_pid"), _COUNT),
        **dict.fromkeys(("seconds", "cpu_seconds", "peak_rss_mb"), _AMOUNT),
    },
    required=("exporter",),
)
HARDWARE = obj(
    {
        **dict.fromkeys(("cpu", "machine", "system"), _TEXT),
        "cores": _COUNT,
        "memory_gb": _AMOUNT,
        "gpus": _STRINGS,
    }
)
SETTINGS = obj(
    {
        "threads": optional(integer(1)),
        "timeout_s": _AMOUNT,
        "max_memory_gb": _AMOUNT,
        "keep_onnx": optional(boolean),
        "graph_store": _TEXT,
        "protocol": _NUMBERS,
    }
)
MANIFEST = obj(
    {
        "schema": integer(1),
        **dict.fromkeys(("run_id", "started", "finished", "suite", "matrix"), _TEXT),
        "command": _STRINGS,
        "cells": _COUNT,
        "harness": optional(obj({"version": _TEXT, "git_sha": _TEXT})),
        "versions": optional(mapping_of(mapping_of(_TEXT))),
        "hardware": optional(HARDWARE),
        "settings": optional(SETTINGS),
        "options": optional(OPTIONS),
        "zoo_problems": optional(list_of(obj({"source": _TEXT, "error": _TEXT}))),
        "cluster": optional(CLUSTER),
        "dispatch": optional(DISPATCH),
        "cold_start": optional(list_of(COLD_START)),
    },
    required=("schema",),
)


def check_manifest(d: Any) -> None:
    """Raise `Malformed` unless `d` is a manifest this harness could have written."""
    MANIFEST(d, "")
