"""The plugin API (docs/guide/zoo.md): zoo files given with `--zoo`, and
packages whose models join the zoo through the `harness.zoo` entry-point group.

The plugin package is tests/zoo_fixtures/plugin_pkg. Instead of pip-installing it into a
fresh venv (a minute), the tests lay down what an install leaves for importlib.metadata:
a `.dist-info` folder whose `entry_points.txt` is the package's own declaration."""

from __future__ import annotations

import json
import os
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.store import rundir as store
from harness.store.manifest import ZooProblem
from harness.zoo import discovery
from tests.conftest import FIXTURES, run_cli

PLUGIN_PKG = FIXTURES / "plugin_pkg"
PLUGIN_MODULE = "harness_demo_zoo"


def fake_install(site: Path) -> Path:
    """Write `<name>-<version>.dist-info` (METADATA, entry_points.txt) from the plugin's
    pyproject.toml into `site`; with `site` and the package on sys.path, importlib.metadata
    sees the package as installed."""
    project = tomllib.loads((PLUGIN_PKG / "pyproject.toml").read_text())["project"]
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    sections = [
        "\n".join([f"[{group}]", *(f"{name} = {target}" for name, target in eps.items())])
        for group, eps in project["entry-points"].items()
    ]
    (dist / "entry_points.txt").write_text("\n\n".join(sections) + "\n")
    return site


def plugin_env(site: Path) -> dict[str, str]:
    """The environment of a CLI process (and its Ray workers) that has the plugin installed."""
    paths = [str(site), str(PLUGIN_PKG), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(PLUGIN_PKG))
    monkeypatch.syspath_prepend(str(fake_install(tmp_path / "site")))
    yield
    sys.modules.pop(PLUGIN_MODULE, None)


def test_the_fixture_declares_the_documented_entry_point() -> None:
    project = tomllib.loads((PLUGIN_PKG / "pyproject.toml").read_text())["project"]
    assert project["entry-points"][discovery.ENTRY_POINT_GROUP] == {"demo": PLUGIN_MODULE}


def test_entry_point_models_join_the_zoo(installed_plugin: None) -> None:
    found = discovery.discover(builtin=False)
    assert found.problems == ()
    spec = found.get("demo_gate")
    assert (spec.source, spec.family) == ("entry-point:demo", "demo")
    # A worker finds the model again from its source alone.
    assert [s.name for s in discovery.load_source(spec.source)] == ["demo_gate"]


def test_without_the_entry_point_the_model_is_absent() -> None:
    assert "demo_gate" not in discovery.discover(builtin=False).models


def test_a_zoo_path_inside_the_builtin_zoo_adds_nothing_twice() -> None:
    # `harness run --zoo model_zoo/hf` must not meet its models twice (once as built-in).
    folder = discovery.BUILTIN_ZOO / "exportable"
    found = discovery.discover([folder])
    assert found.get("exportable_mlp").source == str((folder / "exportable_mlp.py").resolve())


# -- the real CLI -------------------------------------------------------------------------


@pytest.mark.e2e
def test_harness_list_shows_the_entry_point_model(
    installed_plugin: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a fresh process, which finds the plugin from its PYTHONPATH at start-up; the text
    listing in this one, where the plugin is on sys.path (`installed_plugin`)."""
    for key, value in plugin_env(tmp_path / "site").items():
        monkeypatch.setenv(key, value)
    result = run_cli("list", "--json", timeout=120, fresh=True)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {m["name"]: m for m in json.loads(result.stdout)["models"]}
    assert rows["demo_gate"]["source"] == "entry-point:demo"
    assert rows["demo_gate"]["description"] == "Plugin demo: a sigmoid-gated Linear layer"

    text = run_cli("list")
    line = next(ln for ln in text.stdout.splitlines() if "demo_gate" in ln)
    assert line.split()[-1] == "entry-point:demo"


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One run, one exporter, one opset: the models of a --zoo folder holding a broken file,
    and the entry-point plugin's model (a suite selects both)."""
    root = tmp_path_factory.mktemp("plugins")
    suite = root / "plugins.toml"
    suite.write_text(
        'models = ["plugin_ok", "demo_gate"]\nexporters = ["torchscript"]\nopsets = [17]\n'
        "[protocol]\nmin_iters = 5\nmin_time_s = 0.05\nwarmup_max_s = 0.2\n"
    )
    out = root / "run"
    with pytest.MonkeyPatch.context() as mp:
        for key, value in plugin_env(fake_install(root / "site")).items():
            mp.setenv(key, value)
        result = run_cli(
            "run", "--suite", str(suite), "--zoo", str(FIXTURES / "broken"),
            "--out", str(out), "--timeout", "300", "--no-report", fresh=True,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result.stderr


@pytest.mark.e2e
def test_a_broken_zoo_file_is_reported_and_the_others_run(plugin_run: tuple[Path, str]) -> None:
    out, stderr = plugin_run
    broken = FIXTURES / "broken" / "raises_on_import.py"
    warning = next(ln for ln in stderr.splitlines() if "raises_on_import.py" in ln)
    assert str(broken.resolve()) in warning
    assert "RuntimeError: this plugin is broken on purpose" in warning

    problems = store.read_manifest(out).zoo_problems
    assert problems == (
        ZooProblem(str(broken.resolve()), "RuntimeError: this plugin is broken on purpose"),
    )
    records = {r.model: r for r in store.read_records(out)}
    assert records["plugin_ok"].status == "ok"
    assert records["plugin_ok"].numerics.checks and all(
        c.ok for c in records["plugin_ok"].numerics.checks
    )


@pytest.mark.e2e
def test_the_entry_point_model_runs_in_the_workers(plugin_run: tuple[Path, str]) -> None:
    out, _ = plugin_run
    records = {r.model: r for r in store.read_records(out)}
    assert set(records) == {"plugin_ok", "demo_gate"}
    demo = records["demo_gate"]
    assert demo.status == "ok" and demo.family == "demo"
    assert (demo.exporter, demo.opset, demo.export.opset_actual) == ("torchscript", 17, 17)
