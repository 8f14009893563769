"""Same graph, same speed: a cell whose fingerprint and runtime did not change never alerts
on ORT latency, whatever its samples (a property over noise); unchanged cells measure the
machine's drift, and a common shift of the changed cells is a finding of its own."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.compare import BLOCKING, WARNING, compare_history, compare_runs
from harness.store.records import Record
from tests.fixtures_compare import changed, record, run, samples

RUNTIME = {"onnxruntime": "1.32.0", "providers": ["CPUExecutionProvider"], "session_options": {}}
OTHER_RUNTIME = {**RUNTIME, "onnxruntime": "1.33.0"}


def _cell(model: str, ort: list[float], fingerprint: str = "f" * 64, runtime=RUNTIME) -> Record:
    return changed(record(model, ort=ort), graph_fingerprint=fingerprint, ort_runtime=runtime)


latency = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
sample_lists = st.lists(latency, min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(base=sample_lists, cand=sample_lists, others=st.integers(0, 8))
def test_a_graph_identical_pair_never_alerts_whatever_the_noise(
    base: list[float], cand: list[float], others: int
) -> None:
    rng = random.Random(len(base) * 1000 + len(cand))
    extra_b = [_cell(f"o{i}", samples(rng, 1.0, 0.3), f"{i:064d}") for i in range(others)]
    extra_c = [_cell(f"o{i}", samples(rng, 3.0, 0.3), f"{i:064d}") for i in range(others)]
    c = compare_runs(run("A", [_cell("m", base), *extra_b]), run("B", [_cell("m", cand), *extra_c]))
    assert not [f for f in c.findings if f.metric == "ort_latency"]
    assert c.not_compared.get("ort_latency: same graph and runtime (noise only, never an alert)")


@settings(max_examples=60, deadline=None)
@given(history=st.lists(sample_lists, min_size=1, max_size=6), cand=sample_lists)
def test_a_graph_identical_series_never_alerts_against_history(
    history: list[list[float]], cand: list[float]
) -> None:
    runs = [run(f"H{i}", [_cell("m", s)]) for i, s in enumerate(history)]
    c = compare_history(runs, run("C", [_cell("m", cand)]))
    assert not [f for f in c.findings if f.metric == "ort_latency"]


def test_another_fingerprint_or_runtime_is_judged() -> None:
    rng = random.Random(1)
    base = samples(rng, 1.0, 0.02)
    slow = samples(rng, 2.0, 0.02)
    for other in (_cell("m", slow, "e" * 64), _cell("m", slow, runtime=OTHER_RUNTIME)):
        c = compare_runs(run("A", [_cell("m", base)]), run("B", [other]))
        (f,) = [f for f in c.findings if f.metric == "ort_latency"]
        assert f.severity == BLOCKING


def _suite(rng: random.Random, scale: float, changed: int, n: int = 12) -> list[Record]:
    """n cells; the first `changed` have a new graph and run `scale` times slower."""
    return [
        _cell(
            f"c{i}",
            samples(rng, scale if i < changed else 1.0, 0.02),
            f"{i + 100 * (i < changed):064d}",
        )
        for i in range(n)
    ]


def test_a_shift_of_the_changed_cells_is_its_own_finding_and_each_cell_is_judged() -> None:
    rng = random.Random(2)
    base = [_cell(f"c{i}", samples(rng, 1.0, 0.02), f"{i:064d}") for i in range(12)]
    c = compare_runs(run("A", base), run("B", _suite(rng, 1.3, changed=6)))
    (shift,) = [f for f in c.findings if f.kind == "run_shift" and f.metric == "ort_latency"]
    assert shift.severity == WARNING and 1.25 < (shift.ratio or 0) < 1.35
    assert "6 cells whose graph did not change" in shift.message
    blocking = {f.cell.model for f in c.blocking if f.cell}
    assert blocking == {f"c{i}" for i in range(6)}  # the shift is not divided out of them


def test_a_shift_of_every_cell_with_no_reference_is_reported() -> None:
    """An onnxruntime upgrade that slows everything: every runtime changed."""
    rng = random.Random(3)
    base = [_cell(f"c{i}", samples(rng, 1.0, 0.02)) for i in range(10)]
    cand = [_cell(f"c{i}", samples(rng, 1.4, 0.02), runtime=OTHER_RUNTIME) for i in range(10)]
    c = compare_runs(run("A", base), run("B", cand))
    (shift,) = [f for f in c.findings if f.kind == "run_shift" and f.metric == "ort_latency"]
    assert shift.severity == WARNING and "no unchanged cells" in shift.message


def test_machine_drift_of_unchanged_cells_is_not_a_finding() -> None:
    rng = random.Random(4)
    base = [_cell(f"c{i}", samples(rng, 1.0, 0.02), f"{i:064d}") for i in range(10)]
    cand = [_cell(f"c{i}", samples(rng, 1.5, 0.02), f"{i:064d}") for i in range(10)]
    c = compare_runs(run("A", base), run("B", cand))
    assert not [f for f in c.findings if f.metric == "ort_latency"]


def test_a_shift_of_one_sample_metrics_against_one_run_is_info() -> None:
    """Export time has one sample per cell: against one run its shift is reported as info,
    like its cells' own findings (a loaded machine moves it between two runs of one build)."""
    base = [record(f"c{i}", export_s=1.0 + i / 100) for i in range(8)]
    cand = [record(f"c{i}", export_s=1.5 + i / 100) for i in range(8)]
    c = compare_runs(run("A", base), run("B", cand))
    (shift,) = [f for f in c.findings if f.kind == "run_shift"]
    assert shift.metric == "export_time" and shift.severity == "info"
