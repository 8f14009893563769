"""The typed manifest: what the harness writes reads back identical, a manifest of the wrong
shape is one line naming the field, and manifests of older harnesses still read."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from harness.dispatch.cluster import ClusterInfo
from harness.dispatch.policy import DispatchStats, Slots
from harness.history import db as history
from harness.plan.build import RunOptions
from harness.plan.suites import Protocol
from harness.store import rundir
from harness.store.manifest import (
    Cluster,
    ColdStart,
    DispatchSummary,
    Hardware,
    Manifest,
    Settings,
    ZooProblem,
)
from harness.store.options import Shapes
from harness.store.runs import Run, comparability, variant_run
from harness.store.validate import Malformed
from tests.conftest import one_line_error
from tests.fixtures_compare import smoke_cells, write_run

# What Ray reports of a one-node local instance (harness.dispatch.session hands it over).
RAY_NODES = [
    {
        "NodeID": "a1b2",
        "NodeManagerHostname": "box",
        "NodeManagerAddress": "10.0.0.2",
        "Alive": True,
        "Resources": {"CPU": 2.0, "memory": 8.5e9, "node:10.0.0.2": 1.0},
    }
]

# A manifest as the first harness wrote it (3c2e450): no cluster, dispatch or cold start,
# settings without graph_store and max_memory_gb, and a dispatch figure since dropped.
OLD = {
    "schema": 1,
    "run_id": "20251101-020000-ab12",
    "started": "2025-11-01T02:00:00+00:00",
    "finished": "2025-11-01T02:30:00+00:00",
    "command": ["harness", "run", "--suite", "smoke"],
    "suite": "smoke",
    "harness": {"version": "0.1.0", "git_sha": None},
    "versions": {"base": {"python": "3.11.7", "torch": "2.9.0", "onnxruntime": None}},
    "hardware": {"cpu": "Test CPU", "cores": 2, "memory_gb": 23.4, "gpus": []},
    "settings": {"threads": 1, "timeout_s": 600.0, "keep_onnx": False, "protocol": {"min_iters": 20}},
    "matrix": "4 cells = 2 models x 2 exporters",
    "cells": 4,
    "options": {"suite": "smoke", "threads": 1, "timeout_s": 600.0, "keep_onnx": False},
    "zoo_problems": [],
    "dispatch": {"submitted": 4, "completed": 4, "clean_reruns": 0, "wall_s": 12.5},
}  # fmt: skip


def written_manifest() -> Manifest:
    """A finished run's manifest, built the way `harness run` builds it."""
    cluster = ClusterInfo.of_ray("local", RAY_NODES, {"CPU": 2.0, "node:10.0.0.2": 1.0})
    options = RunOptions(suite="smoke", models=("a", "b"), opsets=(17, 18), max_memory_gb=4.0)
    begun = Manifest.begin(
        run_id="r1",
        command=["harness", "run", "--suite", "smoke"],
        suite="smoke",
        settings=Settings(
            threads=1, timeout_s=600.0, keep_onnx=False, protocol=Protocol().numbers()
        ),
        matrix="4 cells = 2 models x 1 exporter x opsets 17, 18",
        cells=4,
        options=options.to_dict(),
        zoo_problems=(ZooProblem(source="zoo/bad.py", error="SyntaxError: x"),),
        cluster=Cluster.from_dict(
            {"address": cluster.address, "nodes": cluster.nodes, "resources": cluster.resources}
        ),
        versions={"base": {"python": "3.11.7", "torch": "2.13.0", "onnx-ir": None}},
    )
    stats = DispatchStats(submitted=4, completed=4, slots=Slots(2, 0), lost_nodes={"dead"})
    figures = {"submitted": 4, "completed": 4, **stats.figures(), "wall_s": 3.2}
    cold = {
        "exporter": "dynamo",
        "opset": 18,
        "seconds": 1.9,
        "cpu_seconds": 1.8,
        "peak_rss_mb": 140.0,
    }
    return begun.finished_with(
        DispatchSummary.from_dict(figures),
        (ColdStart.from_dict({**cold, "node": "a1b2", "pid": 7, "variant": "base"}),),
    )


def test_a_written_manifest_reads_back_identical(tmp_path: Path) -> None:
    rundir.write_manifest(tmp_path, written_manifest())
    on_disk = json.loads(rundir.manifest_path(tmp_path).read_text())
    assert Manifest.from_dict(on_disk).to_dict() == on_disk
    read = rundir.read_manifest(tmp_path)
    assert read.to_dict() == on_disk
    assert read.cluster is not None and read.cluster.nodes[0].resources == {
        "CPU": 2.0,
        "memory": 8.5e9,
    }
    assert read.dispatch is not None and read.dispatch.lost_nodes == ("dead",)
    assert read.hardware is not None and read.hardware.cores is not None
    assert read.max_memory_gb is None and read.cold_start[0].variant_name == "base"
    assert RunOptions.from_dict(dict(read.options)) == RunOptions.from_dict(
        written_manifest().to_dict()["options"]
    )


def test_the_json_keeps_the_contracts_keys() -> None:
    d = written_manifest().to_dict()
    assert list(d)[:3] == ["schema", "run_id", "started"]
    assert {"harness", "versions", "hardware", "settings", "cluster", "dispatch"} <= set(d)
    assert d["hardware"] and set(d["hardware"]) >= {"cpu", "cores", "memory_gb", "gpus"}
    assert d["cold_start"] == [
        {
            "exporter": "dynamo",
            "opset": 18,
            "seconds": 1.9,
            "cpu_seconds": 1.8,
            "peak_rss_mb": 140.0,
            "error": None,
            "node": "a1b2",
            "pid": 7,
            "zygote_pid": None,
            "variant": "base",
        }
    ]


HOSTILE = [
    ({"hardware": {"cores": "8"}}, "hardware.cores", "must be an integer"),
    ({"versions": ["torch", "2.9"]}, "versions", "must be an object"),
    ({"versions": {"base": {"torch": 2.9}}}, "versions.base.torch", "must be a string"),
    ({"settings": {"protocol": {"min_iters": "many"}}}, "settings.protocol.min_iters", "number"),
    ({"cluster": {"nodes": [{"resources": {"CPU": "two"}}]}}, "cluster.nodes[0].resources.CPU", ""),
    ({"dispatch": {"lost_nodes": "node-1"}}, "dispatch.lost_nodes", "must be a list"),
    ({"dispatch": {"slots": [2, 0]}}, "dispatch.slots", "must be an object"),
    ({"cold_start": [{"seconds": 1.0}]}, "cold_start[0].exporter", "is missing"),
    ({"hardware": {"gpus": [{"name": "A100"}]}}, "hardware.gpus[0]", "must be a string"),
    ({"harness": "0.1.0"}, "harness", "must be an object"),
    ({"cluster": {"nodes": [{"versions": {"torch": 2}}]}}, "cluster.nodes[0].versions.torch", ""),
]


@pytest.mark.parametrize(("change", "where", "problem"), HOSTILE)
def test_a_manifest_of_the_wrong_shape_is_refused_naming_the_field(
    change: dict[str, Any], where: str, problem: str
) -> None:
    with pytest.raises(Malformed) as info:
        Manifest.from_dict({**OLD, **change})
    assert info.value.where == where and problem in str(info.value)


@pytest.mark.parametrize(("change", "where", "problem"), HOSTILE[:3])
def test_the_commands_refuse_it_in_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    change: dict[str, Any],
    where: str,
    problem: str,
) -> None:
    run = write_run(tmp_path / "run", {**OLD, **change}, smoke_cells(1))
    db = tmp_path / "h.sqlite"
    for argv in (("report", str(run), "--no-plots"), ("history", "add", str(run), "--db", str(db))):
        message = one_line_error(capsys, *argv)
        assert f"{rundir.manifest_path(run)}: field {where!r}" in message
    assert not (run / "report.md").exists() and not db.exists()


def test_an_old_manifest_reads_and_keeps_what_it_held(tmp_path: Path) -> None:
    old = Manifest.from_dict(OLD)
    assert (old.cluster, old.cold_start, old.settings and old.settings.graph_store) == (
        None,
        (),
        None,
    )
    assert old.dispatch is not None and old.dispatch.completed == 4
    assert old.dispatch.extra == {"clean_reruns": 0}  # a figure since dropped: kept
    again = old.to_dict()  # as a resumed run rewrites it: the newer parts as null
    assert Manifest.from_dict(again) == old
    assert again["dispatch"]["clean_reruns"] == 0
    assert (again["cluster"], again["cold_start"], again["settings"]["max_memory_gb"]) == (
        None,
        [],
        None,
    )
    assert {k: again[k] for k in ("run_id", "versions", "options")} == {
        k: OLD[k] for k in ("run_id", "versions", "options")
    }


def test_a_nodes_package_versions_read_back_and_a_node_without_them_reads_empty() -> None:
    node = {"node_id": "a1", "host": "box", "versions": {"torch": "2.13.0", "onnx": None}}
    read = Manifest.from_dict({**OLD, "cluster": {"nodes": [node, {"node_id": "b2"}]}})
    assert read.cluster is not None
    assert [n.versions for n in read.cluster.nodes] == [{"torch": "2.13.0", "onnx": None}, {}]
    assert read.to_dict()["cluster"]["nodes"][0]["versions"] == node["versions"]


def test_an_old_manifest_keeps_its_comparability_key() -> None:
    """The history database keys runs by this hash: it must not move with the types."""
    hardware, settings = OLD["hardware"], OLD["settings"]
    as_dicts = {
        "cpu": hardware["cpu"],
        "cores": hardware["cores"],
        "gpus": hardware["gpus"],
        "threads": settings["threads"],
        "protocol": settings["protocol"],
    }
    canonical = json.dumps(as_dicts, sort_keys=True, separators=(",", ":"))
    old = Manifest.from_dict(OLD)
    assert comparability(old) == as_dicts
    assert history.comparability_key(old) == hashlib.sha256(canonical.encode()).hexdigest()[:16]
    bare = Manifest.from_dict({"schema": 1})
    assert comparability(bare) == {
        "cpu": None,
        "cores": None,
        "gpus": [],
        "threads": None,
        "protocol": {},
    }


def test_keys_a_newer_writer_added_are_kept_at_every_level(tmp_path: Path) -> None:
    newer = {
        **OLD,
        "energy_j": 12.5,
        "hardware": {**OLD["hardware"], "numa_nodes": 2},
        "cold_start": [{"exporter": "dynamo", "seconds": 2.0, "jit": "on"}],
    }
    manifest = Manifest.from_dict(newer)
    assert manifest.extra == {"energy_j": 12.5}
    assert manifest.hardware == Hardware(
        cpu="Test CPU", cores=2, memory_gb=23.4, extra={"numa_nodes": 2}
    )
    written = manifest.to_dict()
    assert written["energy_j"] == 12.5 and written["hardware"]["numa_nodes"] == 2
    assert written["cold_start"][0]["jit"] == "on"


def test_the_history_database_holds_and_gives_back_the_manifest(tmp_path: Path) -> None:
    run = write_run(tmp_path / "old", OLD, smoke_cells(1))
    db = tmp_path / "h.sqlite"
    (added,) = history.add_runs(db, [run])
    (loaded,) = history.load_runs(db)
    assert loaded.manifest == added.manifest == Manifest.from_dict(OLD)
    assert loaded.as_run().versions()["torch"] == "2.9.0"


def test_a_variant_of_a_run_keeps_its_own_versions_and_cold_starts() -> None:
    manifest = Manifest.from_dict(
        {
            **OLD,
            "versions": {"base": {"torch": "2.9.0"}, "new": {"torch": "2.10.0"}},
            "cold_start": [
                {"exporter": "dynamo", "seconds": 2.0},
                {"exporter": "dynamo", "seconds": 3.0, "variant": "new"},
            ],
        }
    )
    records = tuple(r.with_cell(variant="new") for r in smoke_cells(1))
    new = variant_run(Run(manifest, records), "new", label="new")
    assert new.manifest.run_id == f"{OLD['run_id']}@new"
    assert new.versions("base") == new.versions("new") == {"torch": "2.10.0"}
    assert [(c.seconds, c.variant) for c in new.manifest.cold_start] == [(3.0, "new")]


def test_a_manifest_changed_inside_the_history_database_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The database is an index anyone may hand over: its manifests are checked too."""
    db = tmp_path / "h.sqlite"
    history.add_runs(db, [write_run(tmp_path / "old", OLD, smoke_cells(1))])
    tampered = json.dumps({**OLD, "hardware": {"cores": "many"}})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET manifest = ?", (tampered,))
    conn.close()
    message = one_line_error(capsys, "report", "--history", "--db", str(db), "--no-plots")
    assert f"run {OLD['run_id']} in the history: field 'hardware.cores'" in message


@pytest.mark.parametrize(
    ("dynamic", "written", "read"),
    [
        (None, None, None),
        (False, False, Shapes.STATIC),
        (True, True, Shapes.BOTH),
        ("only", "only", Shapes.ONLY),
        (Shapes.ONLY, "only", Shapes.ONLY),
        (Shapes.BOTH, True, Shapes.BOTH),
    ],
)
def test_every_shapes_option_is_written_and_read_back(
    tmp_path: Path, dynamic: object, written: object, read: Shapes | None
) -> None:
    """`--dynamic-only` once wrote a manifest its own reader refused (issue 34); the option
    is an enum, written as every harness wrote it (false, true, "only")."""
    options = RunOptions(suite="smoke", dynamic=dynamic)  # type: ignore[arg-type]
    manifest = Manifest(run_id="r", options=options.to_dict())
    rundir.write_manifest(tmp_path, manifest)
    assert json.loads(rundir.manifest_path(tmp_path).read_text())["options"]["dynamic"] == written
    again = RunOptions.from_dict(dict(rundir.read_manifest(tmp_path).options))
    assert again.dynamic is read
    assert again == options


def test_an_unknown_shapes_option_names_its_field(tmp_path: Path) -> None:
    rundir.manifest_path(tmp_path).write_text(json.dumps({"schema": 4, "options": {"dynamic": 2}}))
    with pytest.raises(rundir.RunDirError, match=r"field 'options.dynamic' must be one of false"):
        rundir.read_manifest(tmp_path)
