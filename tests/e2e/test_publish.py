"""`harness publish` in a real browser: headless Chromium (Debian's package, driven by
Playwright's Python package) on a site built from a history of real runs (one real tiny
run, `tiny_run` below, made into six nights per channel by tests/publish/simulate.py),
served over HTTP as GitHub Pages would. Every kind of page loads with no console error,
the filters change the rows and the URL, every internal link resolves, a record with
hostile names renders as text.
HARNESS_SITE_SCREENSHOTS=DIR also saves the screenshots the docs show.

The tiny run's own records are checked here too, before the site is made of them (one
record per cell, the measurements, the failing model's stage and artifacts, the manifest
and the report)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import playwright.sync_api as playwright
import pytest

from harness.store import rundir as store
from harness.store.manifest import Manifest
from tests.conftest import FIXTURES, run_cli
from tests.publish.simulate import failed_like, real_records, write_night

CHROMIUM = os.environ.get("HARNESS_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
HOSTILE = "<img src=x onerror=alert(1)>\"'&</td><script>alert(2)</script>"
NIGHTS = 6


# -- the tiny run the site is made of: its own records -----------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small real run (the tiny suite: 3 models, both exporters, 3 opsets, the dynamic
    cells), for tests that only read its outputs: never write into it. Its readers are in
    this module, an xdist scope of its own, so it is made once."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    result = run_cli(
        "run",
        "--suite",
        str(FIXTURES / "tiny_suite.toml"),
        "--zoo",
        str(FIXTURES / "tiny"),
        "--out",
        str(out),
        "--timeout",
        "300",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _by_cell(run_dir: Path) -> dict[tuple[str, str, int, bool], object]:
    return {(r.model, r.exporter, r.opset, r.dynamic): r for r in store.read_records(run_dir)}


def test_every_cell_has_exactly_one_record(tiny_run: Path) -> None:
    records = store.read_records(tiny_run)
    manifest = store.read_manifest(tiny_run)
    # 3 models x 2 exporters x 3 opsets, plus dynamic cells for the one dynamic model
    assert manifest.cells == 18 + 6
    assert len(records) == 24
    assert len({r.cell.key for r in records}) == 24


def test_ok_cells_have_measurements(tiny_run: Path) -> None:
    ok = [r for r in store.read_records(tiny_run) if r.status == "ok"]
    assert {(r.model, r.exporter) for r in ok} >= {
        ("tiny_mlp", "dynamo"),
        ("tiny_mlp", "torchscript"),
        ("tiny_conv", "dynamo"),
        ("tiny_conv", "torchscript"),
    }
    for r in ok:
        assert r.export.seconds is not None and r.export.seconds > 0
        assert r.export.peak_rss_mb is not None
        assert r.ort.latency is not None and r.ort.latency.n >= 5
        assert r.eager.latency is not None and r.speedup is not None and r.speedup > 0
        assert r.numerics.checks and all(c.ok for c in r.numerics.checks)
        assert r.export.onnx_nodes and r.export.onnx_bytes and r.export.onnx_ops
        assert r.worker is not None and r.worker.pid > 0
    dynamo = [r for r in ok if r.exporter == "dynamo"]
    assert all(
        set(r.export.phases or {}) >= {"capture", "translate", "optimize", "save"} for r in dynamo
    )


def test_opset_actual_is_read_from_the_saved_model(tiny_run: Path) -> None:
    cells = _by_cell(tiny_run)
    for opset in (17, 18, 20):
        assert cells[("tiny_mlp", "torchscript", opset, False)].export.opset_actual == opset
    assert cells[("tiny_mlp", "dynamo", 20, False)].export.opset_actual == 20


def test_dynamic_cells_verify_a_second_shape(tiny_run: Path) -> None:
    cell = _by_cell(tiny_run)[("tiny_mlp", "dynamo", 18, True)]
    assert cell.status == "ok"
    assert any(c.name.endswith("@second_shape") for c in cell.numerics.checks)


def test_failing_model_is_export_failed_with_stage_and_artifacts(tiny_run: Path) -> None:
    cells = _by_cell(tiny_run)
    dyn = cells[("tiny_cummax", "dynamo", 18, False)]
    ts = cells[("tiny_cummax", "torchscript", 17, False)]
    assert (dyn.status, dyn.stage) == ("export_failed", "translate")
    assert dyn.export.unsupported_ops == ["aten.cummax.default"]
    assert (ts.status, ts.stage) == ("export_failed", "translate")
    assert ts.export.unsupported_ops == ["aten.cummax"]
    assert (tiny_run / dyn.artifacts["error"]).is_file()
    assert any(k.startswith("report:") for k in dyn.artifacts), dyn.artifacts


def test_manifest_and_report(tiny_run: Path) -> None:
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    assert Manifest.from_dict(manifest).to_dict() == manifest  # the typed manifest loses nothing
    assert manifest["finished"] is not None
    assert manifest["versions"]["base"]["torch"].startswith("2.")
    assert manifest["hardware"]["cores"] >= 1
    report = (tiny_run / "report.md").read_text()
    assert "tiny_cummax" in report and "tiny_mlp" in report


# -- the site ----------------------------------------------------------------------------------


def _edit(channel: str, failure: dict[str, Any]) -> Any:
    """stable: tiny_mlp dynamo fails on night 4 only (a regression, then a fix); the newest
    night holds a failing record with hostile names and artifact paths. pre-release: tiny_mlp
    torchscript fails on the newest night (a cell the channels disagree on), tiny_conv
    dynamo exports another graph (its status the same)."""

    def edit(night: int, r: dict[str, Any]) -> dict[str, Any]:
        if (
            channel == "stable"
            and night == 4
            and (r["model"], r["exporter"]) == ("tiny_mlp", "dynamo")
        ):
            return failed_like(r, failure)
        if channel == "pre-release" and night == NIGHTS - 1 and r["model"] == "tiny_mlp":
            return failed_like(r, failure) if r["exporter"] == "torchscript" else r
        if channel == "pre-release" and (r["model"], r["exporter"]) == ("tiny_conv", "dynamo"):
            return {**r, "graph_fingerprint": "f" * 64}  # ok in both, another graph
        if channel == "stable" and r["model"].startswith("tiny_conv_"):
            hostile = failed_like(r, {**failure, "error_signature": HOSTILE})
            repro = {"repro": "../../../../etc/passwd", "report:x": "artifacts/../../x.md"}
            return {**hostile, "model": HOSTILE, "family": HOSTILE, "artifacts": repro}
        return r

    return edit


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, tiny_run: Path) -> Path:
    """The real tiny run (`tiny_run` above), its static cells at opset 18
    (the tiny zoo, both exporters), made into nights: read, never written."""
    root = tmp_path_factory.mktemp("publish")
    source = [(d, r) for d, r in real_records([tiny_run]) if r["opset"] == 18 and not r["dynamic"]]
    assert {(r["model"], r["exporter"]) for _, r in source} == {
        (m, e) for m in ("tiny_mlp", "tiny_conv", "tiny_cummax") for e in ("dynamo", "torchscript")
    }
    failure = next(
        r for _, r in source if r["exporter"] == "dynamo" and r["status"] == "export_failed"
    )
    for channel in ("stable", "pre-release"):
        dirs = []
        for night in range(NIGHTS):
            torch = "2.13.0+cpu" if night < NIGHTS - 1 else "2.13.1+cpu"
            if channel == "pre-release":
                torch = f"2.14.0.dev2026080{night + 1}+cpu"
            dirs.append(
                write_night(
                    source,
                    root / channel,
                    night=night,
                    suite="smoke",
                    cells=len(source) + (1 if night == NIGHTS - 1 else 0),
                    edit=_edit(channel, failure),
                    versions={"torch": torch},
                )
            )
        added = run_cli("history", "--db", str(root / f"{channel}.sqlite"), "add", *map(str, dirs))
        assert added.returncode == 0, added.stderr
    out = root / "site"
    done = run_cli(
        "publish", str(root / "stable.sqlite"), "--pre-release", str(root / "pre-release.sqlite"),
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"stable {NIGHTS} nights, pre-release {NIGHTS} nights" in done.stdout
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():  # a failure, not a skip: the site is never left unchecked
        pytest.fail(
            f"no browser at {CHROMIUM}: install Debian's chromium (the README's test command"
            " does) or set HARNESS_CHROMIUM to a Chromium or Chrome binary"
        )
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page that collects console errors, uncaught exceptions, failed requests and
    dialogs (an alert() from a hostile name) in `page.problems`."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    p = context.new_page()
    problems: list[str] = []
    p.on("console", lambda m: problems.append(f"console {m.text}") if m.type == "error" else None)
    p.on("pageerror", lambda exc: problems.append(f"pageerror {exc}"))
    p.on("requestfailed", lambda r: problems.append(f"failed {r.url}"))
    p.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    p.on("dialog", lambda d: (problems.append(f"dialog {d.message}"), d.dismiss()))
    p.problems = problems
    yield p
    context.close()


def _links(page: Any) -> list[str]:
    hrefs = page.eval_on_selector_all(
        "a[href], link[href], script[src]", "els => els.map(e => e.href || e.src)"
    )
    return [h for h in hrefs if not h.startswith("data:")]


def test_every_page_loads_clean_and_every_internal_link_resolves(page: Any, base_url: str) -> None:
    todo, seen, files = [base_url + "index.html"], set[str](), set[str]()
    ids: dict[str, set[str]] = {}  # page -> the ids on it
    anchors: set[tuple[str, str]] = set()  # (page, #fragment) that links point at
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        page.goto(url)
        assert page.problems == [], f"{url}: {page.problems}"
        ids[url] = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
        for link in _links(page):
            link, _, fragment = urljoin(url, link).partition("#")
            if fragment:
                anchors.add((link, fragment))
            assert link.startswith(base_url), f"{url} links out of the site: {link}"
            if urlsplit(link).path.endswith(".html"):
                todo.append(link)
            else:
                files.add(link)
    assert anchors, "the suite matrix links each cell to its timeline"
    for link, fragment in sorted(anchors):
        assert fragment in ids[link], f"{link}#{fragment}: no such id"
    for link in sorted(files):
        with urllib.request.urlopen(link) as response:
            assert response.status == 200, link
    paths = {urlsplit(u).path for u in seen}
    for kind in ("/index.html", "/channels.html", "/clusters.html", "/coverage.html"):
        assert kind in paths
    assert any(p.startswith("/suite/") for p in paths) and any(
        p.startswith("/model/") for p in paths
    )
    assert {urlsplit(u).path for u in files} >= {
        "/atom.xml",
        "/regressions.json",
        "/assets/site.js",
    }


def _visible(page: Any, attr: str) -> list[str]:
    """The shown sub-cells' `data-ATTR` (one sub-cell per cell of the matrix)."""
    return page.eval_on_selector_all(
        "#matrix .sub:not(.hidden)", f"subs => subs.map(s => s.dataset.{attr})"
    )


def _models(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#matrix tbody tr:not(.hidden)", "rows => rows.map(r => r.dataset.model)"
    )


def _suite_url(page: Any, base_url: str) -> str:
    page.goto(base_url + "index.html")
    return urljoin(
        base_url, page.locator("section.channel a[href^='suite/']").first.get_attribute("href")
    )


def test_the_matrix_is_a_row_per_model_and_a_column_per_exporter(page: Any, base_url: str) -> None:
    page.goto(_suite_url(page, base_url))
    head = page.locator("#matrix thead th").all_inner_texts()
    assert head == ["model", "family", "dynamo", "torchscript"]
    models = _models(page)
    assert len(models) == len(set(models)) and "tiny_mlp" in models
    row = page.locator("#matrix tbody tr[data-model='tiny_mlp']")
    dynamo = row.locator("td").nth(1)
    # stable: tiny_mlp dynamo failed on night 4 (2026-08-05) and passes again since night 5
    assert dynamo.locator(".sub").get_attribute("data-status") == "ok"
    assert "since 2026-08-06" in dynamo.inner_text()
    assert "ok" in row.locator("td").nth(2).inner_text()
    assert page.problems == []


def test_the_filters_change_the_rows_and_the_url(page: Any, base_url: str) -> None:
    url = _suite_url(page, base_url)
    page.goto(url)
    total, models = len(_visible(page, "status")), len(_models(page))
    page.select_option("select[name=status]", "export_failed")
    failed = _visible(page, "status")
    assert set(failed) == {"export_failed"} and 0 < len(failed) < total
    assert 0 < len(_models(page)) < models
    assert page.url.endswith("?status=export_failed")
    shown = f"{len(failed)} of {total} cells, {len(_models(page))} of {models} models"
    assert page.locator("#shown").text_content() == shown
    page.select_option("select[name=status]", "")
    page.fill("input[name=q]", "cummax")
    assert set(_visible(page, "q")) == {
        "tiny_cummax dynamo@18 cpu",
        "tiny_cummax torchscript@18 cpu",
    }
    assert _models(page) == ["tiny_cummax"]
    assert "q=cummax" in page.url
    page.goto(url + "?exporter=torchscript")  # a linked view
    assert page.locator("select[name=exporter]").input_value() == "torchscript"
    assert set(_visible(page, "exporter")) == {"torchscript"}
    assert page.problems == []


def test_a_record_with_hostile_names_renders_as_text(page: Any, base_url: str, site: Path) -> None:
    page.goto(_suite_url(page, base_url))
    assert HOSTILE in page.inner_text("#matrix")
    model = page.locator("#matrix a", has_text="<img").first.get_attribute("href")
    for url in (urljoin(page.url, model), base_url + "clusters.html", base_url + "channels.html"):
        page.goto(url)
        assert page.locator("main img, main script, main iframe").count() == 0
        assert HOSTILE in page.inner_text("main"), url
    assert page.problems == []  # no alert() dialog, no error
    copied = [p for p in (site / "repro").rglob("*") if p.is_file()]
    assert copied and not any("root:" in p.read_text() for p in copied)


def test_the_two_channels_side_by_side_with_the_cells_that_differ(page: Any, base_url: str) -> None:
    page.goto(base_url + "channels.html")
    rows = page.eval_on_selector_all(
        "#differences tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.innerText))"
    )
    assert ["tiny_mlp torchscript@18 cpu", "ok", "export_failed"] in rows
    assert not any(r[0] == "tiny_conv dynamo@18 cpu" for r in rows)
    graphs = page.eval_on_selector_all(
        "#graphs tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.innerText))"
    )
    assert [r[0] for r in graphs] == ["tiny_conv dynamo@18 cpu"] and graphs[0][2] == "f" * 12
    versions = page.eval_on_selector_all(
        "#versions tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.innerText))"
    )
    assert versions[0] == ["torch", "2.13.1+cpu", f"2.14.0.dev2026080{NIGHTS}+cpu"]
    page.goto(base_url + "index.html")
    headings = page.locator("section.channel p.versions").all_inner_texts()
    assert headings[0].startswith("torch 2.13.1+cpu, onnxscript ")
    assert headings[1].startswith(f"torch 2.14.0.dev2026080{NIGHTS}+cpu")
    summary = page.inner_text("main")
    assert "1 exported a different graph (tiny_conv dynamo@18 cpu)" in summary
    assert page.locator("table.rates thead th").all_inner_texts()[1:] == ["stable", "pre-release"]
    env = page.locator("section.channel").first.inner_text()
    # the real run's manifest records each node's versions: the move is per node
    moves = [line for line in env.splitlines() if "torch" in line and line.startswith("node ")]
    assert len(moves) == 1 and moves[0].startswith("node "), env
    assert moves[0].endswith(": torch 2.13.0+cpu → 2.13.1+cpu"), moves
    if folder := os.environ.get("HARNESS_SITE_SCREENSHOTS"):
        page.screenshot(path=str(Path(folder) / "site-overview.png"), full_page=True)
        page.goto(_suite_url(page, base_url) + "?status=export_failed")
        page.screenshot(path=str(Path(folder) / "site-suite.png"), full_page=True)
    assert page.problems == []
