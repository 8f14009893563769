"""The channels side by side: which versions each ran, the cells whose status differs and
those whose graph does, and a channel whose job published no history (no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.history import db as history
from harness.publish import pages
from harness.publish.model import build_site_model
from tests.conftest import run_cli
from tests.fixtures_compare import manifest, smoke_cells, write_run
from tests.publish.test_data import result, run


def _site() -> pages.Site:
    stable = run(2, [result("a", graph="g1"), result("b", graph="g2"), result("c")], torch="2.13.0")
    pre = run(
        2,
        [result("a", graph="g1"), result("b", graph="g9"), result("c", status="export_failed")],
        torch="2.14.1",
    )
    return build_site_model({"stable": [stable], "pre-release": [pre]})


def test_a_graph_that_changed_is_a_difference_though_its_status_did_not() -> None:
    site = _site()
    found = {d.cell: (d.status_differs, d.graph_differs) for d in site.differences}
    assert found == {"b dynamo@18 cpu": (False, True), "c dynamo@18 cpu": (True, False)}
    assert site.versions()["stable"]["torch"] == "2.13.0"
    assert site.versions()["pre-release"]["torch"] == "2.14.1"


def test_the_channels_page_and_the_overview_name_versions_and_both_kinds_of_difference() -> None:
    site = _site()
    page = pages.channels_page(site)
    assert "<p>1 cells differ in status.</p>" in page
    assert "<p>1 cells exported a different graph (fingerprint).</p>" in page
    assert "<tr><th>torch</th><td>2.13.0</td><td>2.14.1</td></tr>" in page
    overview = pages.overview(site)
    assert "1 cells differ in status (c dynamo@18 cpu); 1 exported a different graph" in overview
    assert "torch 2.13.0, onnxscript 0.5.0, onnx 1.17.0, onnxruntime 1.20.0" in overview


def test_a_channel_without_a_history_is_said_and_the_other_publishes(tmp_path: Path) -> None:
    db = tmp_path / "stable.sqlite"
    history.add_runs(db, [write_run(tmp_path / "r0", manifest("r0"), smoke_cells(0))])
    done = run_cli(
        "publish", str(db), "--pre-release", str(tmp_path / "none.sqlite"),
        "--out", str(tmp_path / "site"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pre-release: no history tonight" in done.stdout
    for name in ("index.html", "channels.html"):
        text = (tmp_path / "site" / name).read_text()
        assert "pre-release: no history tonight" in text and "install of its packages" in text


@pytest.mark.parametrize("graphs", [("g1", None), (None, None), ("g1", "g1")])
def test_no_graph_on_one_side_or_the_same_graph_is_no_graph_difference(graphs) -> None:
    a, b = (run(2, [result("a", graph=g)]) for g in graphs)
    site = build_site_model({"stable": [a], "pre-release": [b]})
    assert site.differences == []


def test_a_real_size_cell_shows_its_memory_over_weights_and_its_speed_against_the_fastest(
    tmp_path: Path,
) -> None:
    """Through the history: a record's weights and exporter speed are summary columns, the
    model page charts export peak over weights and ORT p50 over the fastest exporter's; a
    toy cell without them shows neither."""
    from dataclasses import replace

    from harness.publish.read import load_nights
    from harness.store.details import ExporterSpeed
    from tests.fixtures_compare import record

    def night(i: int) -> list:
        big = record("big", "torchscript", ort=[2.0, 2.1, 2.2], rss_mb=3000.0 + i, export_s=9.0)
        big = big.with_changes(
            export=replace(big.export, weights_mb=1000.0),
            exporter_speed=ExporterSpeed(fastest="dynamo", ratio=1.5 + i / 10, ci_low=1.4,
                                         ci_high=1.7, pairs=9, verdict="slower"),
        )  # fmt: skip
        return [big, record("toy", ort=[1.0, 1.1], rss_mb=300.0, export_s=1.0)]

    db = tmp_path / "h.sqlite"
    history.add_runs(
        db, [write_run(tmp_path / f"r{i}", manifest(f"r{i}"), night(i)) for i in (0, 1)]
    )
    newest = {r.cell.model: r for r in load_nights(db)[-1].results}
    assert newest["big"].memory_over_weights == pytest.approx(3001.0 / 1000.0)
    assert newest["big"].vs_fastest == pytest.approx(1.6)
    assert (newest["toy"].memory_over_weights, newest["toy"].vs_fastest) == (None, None)

    site = build_site_model({"stable": load_nights(db)})
    big_page = pages.model_page(site, "big", {})
    assert "<th>export peak RSS / weights</th>" in big_page and "newest 3" in big_page
    assert "<th>ORT p50 / fastest exporter&#x27;s</th>" in big_page and "newest 1.6" in big_page
    toy_page = pages.model_page(site, "toy", {})
    assert "export peak RSS / weights" not in toy_page and "<th>ORT p50 ms</th>" in toy_page
