"""The site's pure core with hand-made nights: pass rates, resampling, the environment's
diff, regressions and fixes, the noise band, clusters, channel differences; its data files;
and its escaping of hostile names. Hand-computed numbers, no torch, no browser."""

from __future__ import annotations

import json
import math
import sqlite3
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from harness.compare.thresholds import Thresholds
from harness.history import db as history
from harness.history.db import HistoryError
from harness.publish import cells, feeds, pages
from harness.publish.html import slug
from harness.publish.matrix import suite_matrix
from harness.publish.model import build_site_model
from harness.publish.nights import (
    Point,
    SeriesKey,
    environment,
    environment_diff,
    nights_of,
    pass_rates,
    resample,
)
from harness.publish.read import CellResult, NightRun, load_nights
from harness.store.records import Cell
from harness.store.status import Status
from tests.conftest import one_line_error
from tests.fixtures_compare import manifest, smoke_cells, typed_manifest, write_run

HOSTILE = '<img src=x onerror="alert(1)">\'"</td>../../x\n'


def result(model: str, exporter: str = "dynamo", status: str = "ok", **kw: Any) -> CellResult:
    family = kw.pop("family", "f")
    return CellResult(
        Cell(model, exporter, 18, family=family), "r", Status(status), suite="s", **kw
    )


def run(day: int, results: list[CellResult], *, suite: str = "s", **versions: str) -> NightRun:
    man = typed_manifest(f"r{day}", started=f"2026-08-{day:02d}T03:00:00+00:00")
    man = man.__class__.from_dict({**man.to_dict(), "suite": suite})
    if versions:
        merged = {**man.to_dict()["versions"]["base"], **versions}
        man = man.__class__.from_dict({**man.to_dict(), "versions": {"base": merged}})
    return NightRun(f"r{day}", man.started or "", man, None, tuple(results))


def test_pass_rate_per_suite_exporter_and_dtype_leaves_skipped_cells_out() -> None:
    night = nights_of(
        [
            run(
                1,
                [
                    result("a"),
                    result("b", status="export_failed"),
                    result("c", status="skipped"),
                    result("a", "torchscript"),
                    result("b", "torchscript", status="ort_run_failed"),
                    result("add", opinfo="add", dtype="float16"),
                ],
            )
        ]
    )[0]
    rates = pass_rates(night)
    assert {k.label(): r.text() for k, r in rates.items()} == {
        "s · dynamo": "50%, 1/2",
        "s · dynamo · float16": "100%, 1/1",
        "s · torchscript": "50%, 1/2",
    }


def test_a_later_run_of_the_same_day_replaces_a_cells_record() -> None:
    early = run(1, [result("a", status="export_failed")])
    late = NightRun("r1b", "2026-08-01T09:00:00+00:00", early.manifest, None, (result("a"),))
    (night,) = nights_of([late, early])
    assert [str(r.status) for r in night.records] == ["ok"]


def test_resampling_keeps_at_most_max_points_each_a_bucket_mean_dated_by_its_last() -> None:
    points = [Point(f"d{i}", float(i)) for i in range(10)]
    # buckets [0:2] [2:5] [5:7] [7:10]
    assert resample(points, 4) == [
        Point("d1", 0.5),
        Point("d4", 3.0),
        Point("d6", 5.5),
        Point("d9", 8.0),
    ]
    assert resample(points, 10) == points
    assert len(resample([Point(str(i), 1.0) for i in range(900)])) == 300


def test_the_environment_diff_names_each_moved_package_and_none_on_the_first_night() -> None:
    one, two = nights_of(
        [
            run(1, [result("a")], torch="2.13.0"),
            run(2, [result("a")], torch="2.14.0.dev20260802", **{"onnx-ir": "1.1.0"}),
        ]
    )
    moves = environment_diff(one, two)
    assert [m.text() for m in moves if m.package in ("torch", "onnx-ir")] == [
        "variant base: onnx-ir (none) → 1.1.0",
        "variant base: torch 2.13.0 → 2.14.0.dev20260802",
    ]
    assert len(moves) == 2
    assert environment_diff(None, one) == []


def on_nodes(night: NightRun, **nodes: dict[str, str]) -> NightRun:
    """`night` with a cluster of these nodes (host -> the versions its probe saw)."""
    found = [{"node_id": f"id-{h}", "host": h, "versions": v} for h, v in nodes.items()]
    man = night.manifest.from_dict({**night.manifest.to_dict(), "cluster": {"nodes": found}})
    return NightRun(night.run_id, night.started, man, None, night.results)


def test_the_environment_diff_is_per_node_where_the_manifests_recorded_each_nodes() -> None:
    first = run(1, [result("a")], torch="2.13.0")  # no per-node versions: a base variant
    base = {k: v for k, v in first.manifest.versions["base"].items() if v is not None}
    one, two, three = nights_of(
        [
            first,
            on_nodes(run(2, [result("a")], torch="2.13.0"), box=base, gpu1=base),
            on_nodes(
                run(3, [result("a")], torch="2.13.0"),
                box={**base, "torch": "2.13.1"},
                gpu1=base,
                gpu2={**base, "numpy": "9.0"},  # joined: against the night before's base
            ),
        ]
    )
    assert [m.text() for m in environment_diff(two, three)] == [
        "node box: torch 2.13.0 → 2.13.1",
        f"node gpu2: numpy {base.get('numpy') or '(none)'} → 9.0",
    ]
    # The first night with per-node versions: each node against the night before's base
    # variant, which held the same versions (None: not installed, not a move).
    assert environment_diff(one, two) == []
    assert set(environment(two).nodes) == {"box", "gpu1"}


def test_regressions_fixes_and_the_night_each_cell_last_changed() -> None:
    nights = nights_of(
        [
            run(1, [result("a"), result("b", status="export_failed", error_signature="E")]),
            run(2, [result("a"), result("b")]),
            run(3, [result("a", status="export_failed", error_signature="E2"), result("b")]),
        ]
    )
    regressions, fixes = cells.changes(nights[1], nights[2])
    assert [(c.model, str(c.before), str(c.after), c.signature) for c in regressions] == [
        ("a", "ok", "export_failed", "E2")
    ]
    assert fixes == []
    assert [c.model for c in cells.changes(nights[0], nights[1])[1]] == ["b"]
    assert cells.last_changed(nights) == {
        "a dynamo@18 cpu": "2026-08-03",
        "b dynamo@18 cpu": "2026-08-02",
    }


def test_the_noise_band_is_the_compares_threshold_around_the_median() -> None:
    t = Thresholds()
    steady = cells.noise_band([10.0] * 5, floor=0.1, t=t)
    assert steady is not None
    assert (steady.low, steady.high) == pytest.approx((10 / 1.1, 11.0))
    # log ratios +-log(1.1): MAD log(1.1), sigma 1.4826 log(1.1), 4 sigma
    noisy = cells.noise_band([10.0, 11.0, 10.0, 11.0, 10.0], floor=0.1, t=t)
    width = 4 * 1.4826 * math.log(1.1)
    assert noisy is not None
    assert (noisy.low, noisy.high) == pytest.approx((10 / math.exp(width), 10 * math.exp(width)))
    assert cells.noise_band([], floor=0.1, t=t) is None


def test_a_cluster_counts_its_cells_per_night_from_the_night_it_first_appeared() -> None:
    failed = {"status": "export_failed", "error_signature": "S"}
    nights = nights_of(
        [
            run(1, [result("a", **failed), result("b")]),  # type: ignore[arg-type]
            run(2, [result("a"), result("b")]),
            run(3, [result("a", **failed), result("b", **failed)]),  # type: ignore[arg-type]
        ]
    )
    (cluster,) = cells.clusters(nights)
    assert (cluster.signature, cluster.first_seen) == ("S", "2026-08-01")
    assert [p.value for p in cluster.counts] == [1.0, 0.0, 2.0]
    assert cluster.cells == ["a dynamo@18 cpu", "b dynamo@18 cpu"]


def test_the_channels_differ_on_a_status_and_on_a_cell_only_one_has() -> None:
    stable = [run(1, [result("a"), result("b")])]
    pre = [run(1, [result("a", status="export_failed"), result("b"), result("c")])]
    site = build_site_model({"stable": stable, "pre-release": pre})
    assert [(d.cell, d.model, d.statuses) for d in site.differences] == [
        ("a dynamo@18 cpu", "a", {"stable": "ok", "pre-release": "export_failed"}),
        ("c dynamo@18 cpu", "c", {"stable": None, "pre-release": "ok"}),
    ]


def test_the_suite_matrix_is_a_row_per_model_a_column_per_exporter_named_by_varying_axes() -> None:
    def dyn(model: str, exporter: str, status: str = "ok") -> CellResult:
        return CellResult(
            Cell(model, exporter, 18, dynamic=True, family="f"), "r", Status(status), suite="s"
        )

    runs = [
        run(1, [result("a"), dyn("a", "dynamo"), result("a", "torchscript"), result("b")]),
        run(2, [result("a"), dyn("a", "dynamo", "export_failed"), result("a", "torchscript"),
                result("b")]),
    ]  # fmt: skip
    nights = nights_of(runs)
    other = {r.cell.label(): r for r in [result("a", status="export_failed"), result("b")]}
    m = suite_matrix(nights[-1].records, cells.last_changed(nights), other)
    assert m.exporters == ["dynamo", "torchscript"]
    assert m.common == {"opset": "@18", "device": "cpu"}
    assert [row.model for row in m.rows] == ["a", "b"] and m.cells == 4
    a = m.rows[0].by_exporter
    assert [(s.name, str(s.result.status), s.since, s.other) for s in a["dynamo"]] == [
        ("static", "ok", "2026-08-01", "export_failed"),
        ("dynamic", "export_failed", "2026-08-02", None),
    ]
    assert [s.name for s in a["torchscript"]] == ["static"]
    assert set(m.rows[1].by_exporter) == {"dynamo"}
    html = pages.suite_page(build_site_model({"stable": runs}).channels[0], "s", {})
    subs = [a for t, a in _parsed(html).tags if t == "a" and "data-status" in a]
    assert [(x["data-exporter"], x["data-status"]) for x in subs] == [
        ("dynamo", "ok"),
        ("dynamo", "export_failed"),
        ("torchscript", "ok"),
        ("dynamo", "ok"),
    ]
    anchor = pages.cell_anchor("stable", "a dynamo@18 cpu dynamic")
    assert subs[1]["href"] == f"../model/{slug('a')}.html#{anchor}"
    model = pages.model_page(build_site_model({"stable": runs}), "a", {})
    assert f'<h3 id="{anchor}">' in model
    assert "every cell here: opset @18, device cpu" in html


# -- escaping ----------------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parsed(html: str) -> _Tags:
    parser = _Tags()
    parser.feed(html)
    return parser


def test_a_hostile_model_name_is_text_on_every_page_and_a_safe_file_name() -> None:
    hostile = [result(HOSTILE, family=HOSTILE, status="export_failed", error_signature=HOSTILE)]
    site = build_site_model({"stable": [run(1, hostile)]})
    channel = site.channels[0]
    html = {
        "suite": pages.suite_page(channel, "s", {}),
        "model": pages.model_page(site, HOSTILE, {}),
        "clusters": pages.clusters_page(site, {}),
        "overview": pages.overview(site),
    }
    for name, text in html.items():
        parsed = _parsed(text)
        assert not [t for t, _ in parsed.tags if t in ("img", "td") and "onerror" in _], name
        assert {t for t, _ in parsed.tags} & {"img", "iframe", "object"} == set(), name
        scripts = [a.get("src") for t, a in parsed.tags if t == "script"]
        assert scripts in ([], ["../assets/site.js"]), name
    assert HOSTILE.strip() in "".join(_parsed(html["model"]).text)
    subs = [a for t, a in _parsed(html["suite"]).tags if t == "a" and "data-family" in a]
    assert subs[0]["data-family"] == HOSTILE
    assert HOSTILE.strip() in "".join(_parsed(html["suite"]).text)
    name = slug(HOSTILE)
    assert "/" not in name and "\n" not in name and "<" not in name and name != slug(HOSTILE[:-1])


def test_the_feeds_parse_and_carry_a_hostile_name_as_text() -> None:
    nights = [
        run(1, [result(HOSTILE)]),
        run(2, [result(HOSTILE, status="export_failed", error_signature="</content>")]),
    ]
    site = build_site_model({"stable": nights})
    feed = ET.fromstring(
        feeds.atom(site, base_url="https://x.invalid/", updated="2026-08-02T00:00:00Z")
    )
    ns = {"a": "http://www.w3.org/2005/Atom"}
    (entry,) = feed.findall("a:entry", ns)
    assert HOSTILE.strip() in (entry.findtext("a:content", namespaces=ns) or "")
    data = json.loads(feeds.regressions_json(site))
    assert data["channels"]["stable"]["regressions"][0]["model"] == HOSTILE
    index = json.loads(feeds.index_json(site))
    assert index["channels"]["stable"]["series"][0]["passing"] == 0
    series = json.loads(feeds.series_json(SeriesKey("s", "dynamo"), [Point("2026-08-01", 50.0)]))
    assert series["points"] == [["2026-08-01", 50.0]]


# -- reading the database ---------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "h.sqlite"
    runs = [
        write_run(tmp_path / f"r{i}", manifest(f"r{i}"), smoke_cells(i, broken=i == 1))
        for i in (0, 1)
    ]
    history.add_runs(path, runs)
    return path


def test_the_reader_takes_only_the_fields_the_site_shows(db: Path) -> None:
    loaded = load_nights(db)
    assert [r.run_id for r in loaded] == ["r0", "r1"]
    broken = [x for x in loaded[1].results if not x.status.passing]
    assert [(x.cell.model, str(x.stage)) for x in broken] == [("m3", "translate")]
    ok = loaded[0].results[0]
    assert ok.ort_p50_ms is not None and ok.ort_p50_ms > 0


def test_a_database_with_a_status_no_harness_knows_is_refused(
    db: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE records SET status = '<b>bad</b>' WHERE model = 'm0'")
    with pytest.raises(HistoryError, match="bad"):
        load_nights(db)
    line = one_line_error(capsys, "publish", str(db), "--out", str(tmp_path / "site"))
    assert "bad" in line
    assert "no history database" in one_line_error(
        capsys, "publish", str(tmp_path / "none.sqlite"), "--out", str(tmp_path / "site")
    )


def test_op_coverage_is_the_newest_nights_op_by_dtype_matrix_and_a_rate_per_dtype() -> None:
    def op(name: str, dtype: str, status: str = "ok") -> CellResult:
        return result(f"opinfo.{name}.{dtype}", status=status, opinfo=name, dtype=dtype)

    nights = nights_of(
        [
            run(1, [op("add", "float32"), op("mul", "float32", "export_failed")]),
            run(2, [op("add", "float32"), op("mul", "float32"), op("add", "float16", "xfail")]),
            run(3, [op("add", "float32"), op("mul", "float32"), op("add", "float16")]),
        ]
    )
    cov = cells.coverage(nights)
    assert (cov.ops, cov.dtypes) == (["add", "mul"], ["float16", "float32"])
    assert cov.status == {
        ("add", "float32"): "ok",
        ("mul", "float32"): "ok",
        ("add", "float16"): "ok",
    }
    assert {d: [p.value for p in pts] for d, pts in cov.trend.items()} == {
        "float16": [0.0, 100.0],
        "float32": [50.0, 100.0, 100.0],
    }


def test_a_model_page_states_the_newest_value_and_its_noise_band() -> None:
    nights = [run(day, [result("a", export_s=1.0 + (day == 6))]) for day in range(1, 7)]
    page = pages.model_page(build_site_model({"stable": nights}), "a", {})
    # export time floor 20%, five steady nights before the newest: 1/1.2 .. 1.2; newest 2
    assert "newest 2 (band 0.833–1.2)" in page
    assert "never" not in page and "not measured" in page  # no memory, no latency
