"""The graph store's layout: entries by fingerprint, seeding from an earlier store,
pruning to what a night's runs reference, and where a record's stored model is."""

from __future__ import annotations

from pathlib import Path

from harness.store.graphs import (
    INPUTS,
    MODEL,
    artifact_path,
    entry_dir,
    prune,
    referenced,
    seed,
    store_size,
    stored_model,
)
from tests.fixtures_compare import changed, record


def _entry(store: Path, fp: str) -> Path:
    entry = entry_dir(store, fp)
    entry.mkdir(parents=True)
    (entry / MODEL).write_bytes(b"m" * 10)
    (entry / (MODEL + ".data")).write_bytes(b"w" * 100)
    (entry / INPUTS).write_bytes(b"i")
    return entry


def test_seed_links_entries_and_prune_keeps_what_is_referenced(tmp_path: Path) -> None:
    previous, store = tmp_path / "previous", tmp_path / "graphs"
    for fp in ("a" * 64, "b" * 64):
        _entry(previous, fp)
    assert seed(store, previous) == 2 and seed(store, previous) == 0
    assert store_size(store) == (2, 2 * 111)
    kept = changed(record("m"), graph_fingerprint="a" * 64, artifacts={"graph": "x"})
    assert referenced([kept, record("n")]) == {"a" * 64}
    assert prune(store, referenced([kept])) == 1
    assert store_size(store) == (1, 111)
    assert store_size(previous) == (2, 2 * 111)  # links: the previous store is untouched


def test_a_records_model_resolves_relative_to_its_run(tmp_path: Path) -> None:
    run_dir, store = tmp_path / "runs" / "vision", tmp_path / "graphs"
    run_dir.mkdir(parents=True)
    entry = _entry(store, "c" * 64)
    name = artifact_path(run_dir, entry / MODEL)
    assert name == f"../../graphs/cc/{'c' * 64}/{MODEL}"
    r = changed(record("m"), graph_fingerprint="c" * 64, artifacts={"graph": name})
    assert stored_model(run_dir, r) == run_dir / name
    assert stored_model(run_dir, changed(r, graph_fingerprint=None)) is None
    (entry / INPUTS).unlink()
    assert stored_model(run_dir, r) is None  # without its inputs it cannot be timed
