"""A run directory handed over by someone else (CI downloads last night's): `harness report`
and `harness compare` never write through a symlink or outside the directory, and render
every value a record holds as text, never as markup or a link that leaves the report."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness.report import build_report
from harness.report.document import safe_link
from harness.report.html import render_html
from harness.report.markdown import render_markdown
from harness.store import files
from harness.store.manifest import Manifest
from harness.store.markdown import md_code, md_text
from harness.store.records import Cell, Measurements, Record
from tests.conftest import one_line_error
from tests.fixtures_compare import manifest, smoke_cells, typed_manifest, write_run


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in tmp_path so that the repository's expected/status.csv does not apply."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", manifest("run"), smoke_cells(1))


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the run directory that a link in it points at."""
    path = tmp_path / "elsewhere" / "precious.txt"
    path.parent.mkdir()
    path.write_text("keep me\n")
    return path


# -- never through a symlink ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "plots"),
    [("report.html", False), ("report.md", False), ("plots/matrix.png", True)],
)
def test_report_refuses_an_output_that_is_a_symlink(
    capsys: pytest.CaptureFixture[str], run: Path, victim: Path, link: str, plots: bool
) -> None:
    """`harness report` used to overwrite the file the link points at."""
    (run / link).parent.mkdir(exist_ok=True)
    (run / link).symlink_to(victim)
    message = one_line_error(capsys, "report", str(run), *([] if plots else ["--no-plots"]))
    assert f"{run / link} leads through the symlink {run / link} (to {victim})" in message
    assert victim.read_text() == "keep me\n"
    assert (run / link).is_symlink()


def test_report_refuses_a_plots_folder_that_leads_out(
    capsys: pytest.CaptureFixture[str], run: Path, victim: Path
) -> None:
    (run / "plots").symlink_to(victim.parent, target_is_directory=True)
    message = one_line_error(capsys, "report", str(run))
    assert f"leads through the symlink {run / 'plots'}" in message
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_compare_refuses_an_output_that_is_a_symlink(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, run: Path, victim: Path
) -> None:
    other = write_run(tmp_path / "other", manifest("other"), smoke_cells(2))
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.json").symlink_to(victim)
    message = one_line_error(capsys, "compare", str(run), str(other), "--out", str(out))
    assert f"{out / 'compare.json'} leads through the symlink" in message
    assert victim.read_text() == "keep me\n"


def test_a_report_replaces_its_files_in_place(
    capsys: pytest.CaptureFixture[str], run: Path
) -> None:
    from harness.cli import main

    (run / "report.md").write_text("an older report\n")
    hard = run / "hard-link.md"
    os.link(run / "report.md", hard)  # a hard link shares the file: replacing leaves it be
    assert main(["report", str(run), "--no-plots"]) == 0
    assert (run / "report.md").read_text().startswith("4 cells: 4 ok")
    assert hard.read_text() == "an older report\n"
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]
    plain = run / "plain"
    plain.write_text("")  # the mode `open` gives a new file, as the report's files get
    assert (run / "report.html").stat().st_mode == plain.stat().st_mode


@pytest.mark.parametrize("target", ["../outside.md", "/etc/x", "a/../../b"])
def test_a_path_leading_out_of_the_directory_is_refused(tmp_path: Path, target: str) -> None:
    with pytest.raises(files.UnsafePath, match="is outside"):
        files.write_inside(tmp_path / "root", target, "x")
    assert not (tmp_path / "outside.md").exists()


# -- every value from a record is text in markdown ------------------------------------------------

XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"
HOSTILE_TEXT = f"{XSS} | {SCRIPT} [click](https://evil.example) ![t](https://tracker.example/t.png)"


class _Rendered(HTMLParser):
    """The tags and links of markdown rendered as CommonMark with GitHub's tables (raw HTML
    passes through, as on GitHub before its sanitiser), and its text."""

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.links: list[str] = []
        self.text: list[str] = []
        self.feed(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.links += [v or "" for k, v in attrs if k in ("href", "src")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


SAFE_TAGS = {"p", "h1", "h2", "h3", "h4", "table", "thead", "tbody", "tr", "th", "td", "code",
             "pre", "ul", "li", "strong", "a", "details", "summary", "blockquote"}  # fmt: skip


def _hostile_records() -> list[Record]:
    hostile = Cell(f"m{XSS}", f"dynamo{SCRIPT}", 18, family="test")
    error = RuntimeError(f"{HOSTILE_TEXT} ``` ~~~ `` ` end")
    return [
        Record.finished(hostile, "r", Measurements(), status="export_failed", stage="translate",
                        error=error),
        Record.without_run(Cell("m2", "dynamo", 18), "r", status="skipped", reason=HOSTILE_TEXT),
        Record.without_run(Cell("m3", "dynamo", 18), "r", status="xfail", reason=HOSTILE_TEXT),
    ]  # fmt: skip


def test_a_report_renders_hostile_record_values_as_text() -> None:
    """They used to land in report.md raw: GitHub and the job summary render it."""
    records = _hostile_records()
    doc = build_report(
        Manifest.from_dict({**manifest("r"), "run_id": SCRIPT, "suite": XSS}), records
    )
    page = _Rendered(render_markdown(doc))
    assert page.tags <= SAFE_TAGS, page.tags - SAFE_TAGS
    assert page.links == [], page.links
    text = "".join(page.text)
    assert XSS in text and SCRIPT in text and "[click](https://evil.example)" in text


def test_compare_markdown_renders_hostile_record_values_as_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from harness.cli import main

    records = _hostile_records()
    ok_before = [r.with_changes(status="ok", stage=None, error_message=None,
                                error_signature=None, error_type=None) for r in records]  # fmt: skip
    base = write_run(tmp_path / "base", {**manifest("base"), "run_id": XSS}, ok_before)
    cand = write_run(tmp_path / "cand", {**manifest("cand"), "run_id": SCRIPT}, records)
    assert main(["compare", str(base), str(cand), "--no-remeasure"]) == 1
    page = _Rendered(capsys.readouterr().out)
    assert page.tags <= SAFE_TAGS, page.tags - SAFE_TAGS
    assert page.links == [], page.links
    assert SCRIPT in "".join(page.text) and XSS in "".join(page.text)


@pytest.mark.parametrize(
    "value",
    [XSS, "a|b", "`x`", "``` fence", "*bold* _it_ ~~s~~", "[l](http://e.x)", "a\nb", "tiny_mlp"],
)
def test_a_value_reads_back_as_itself(value: str) -> None:
    """As text and as code, in a table cell: the value, on one line, nothing else."""
    flat = value.replace("\n", " ")
    for rendered in (md_text(value), md_code(value)):
        page = _Rendered(f"| h |\n|---|\n| {rendered} |\n")
        assert page.tags <= {"table", "thead", "tbody", "tr", "th", "td", "code"}
        assert "".join(page.text).strip().endswith(flat), rendered
    assert md_text("tiny_mlp export_failed") == "tiny_mlp export_failed"  # raw md stays legible


# -- links: judged as a browser reads them ----------------------------------------------------------

ENCODED_ESCAPES = [
    "%2e%2e/%2e%2e/etc/passwd",
    "%2E%2E/x.md",
    ".%2e/x.md",
    "a/%2e%2e/%2e%2e/b",
    "..%2f..%2fetc/passwd",
    "..%5c..%5cwindows",
    "%252e%252e/x.md",  # encoded twice
    "%2fetc/passwd",
    "javascript%3Aalert(1)",
    "a%0ab",
]


@pytest.mark.parametrize("target", ENCODED_ESCAPES)
def test_a_percent_encoded_way_out_is_no_link(target: str) -> None:
    """`%2e%2e/` used to pass the '..' check; browsers resolve it upwards."""
    assert safe_link(target) is None


def test_percent_encoding_inside_the_folder_stays_a_link() -> None:
    assert safe_link("artifacts/a%20b/report.md") == "artifacts/a%20b/report.md"
    assert safe_link("artifacts/a%2e%2e/x") == "artifacts/a%2e%2e/x"  # 'a..' is a name


def test_an_encoded_escape_in_a_record_is_no_link_in_the_report(tmp_path: Path) -> None:
    folder = "%2e%2e/%2e%2e/etc/"
    record = Record.without_run(Cell("m", "dynamo", 18), "r", status="timeout", reason="slow")
    record = record.with_changes(artifacts={"error": f"{folder}passwd"})
    doc = build_report(typed_manifest("r"), [record])
    assert _Rendered(render_markdown(doc)).links == []
    assert 'href="' not in render_html(doc, root=tmp_path)
