"""The scripts the GitHub workflows call (scripts/*.py), exercised here without GitHub.

Run directories are synthetic (tests/fixtures_compare), never a real `harness run`. `gh` and
`harness` are faked: small scripts put first on PATH that record their argv and answer with
canned output, because there is no GitHub (and no time for real runs) here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.history import db as history
from tests.fixtures_compare import HARDWARE, manifest, smoke_cells, write_run

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"
EXPECTED_HEADER = "model,exporter,opset,device,expected_status,reason,expires\n"
GITHUB_ENV = {
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/harness",
    "GITHUB_RUN_ID": "4242",
}


def load(name: str) -> ModuleType:
    """A script as a module (registered first: dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


nightly_compare = load("nightly_compare")
nightly_run = load("nightly_run")
fetch_baseline = load("fetch_baseline")
tracking_issue = load("tracking_issue")


# -- synthetic nightlies ---------------------------------------------------------------------------


def nightly_runs(root: Path, run_id: str, seed: int, **kwargs: Any) -> Path:
    """ROOT/runs/smoke: one suite's run directory, laid out as nightly_run.py writes it."""
    hardware, started = kwargs.pop("hardware", None), kwargs.pop("started", None)
    man = manifest(run_id, hardware=hardware, **({"started": started} if started else {}))
    write_run(root / "runs" / "smoke", man, smoke_cells(seed, **kwargs))
    return root / "runs"


def history_of(tmp_path: Path, nights: int, **kwargs: Any) -> Path:
    """A history database of `nights` earlier A/A nights, as `harness history add` keeps it."""
    runs = [
        nightly_runs(
            tmp_path / f"night{n}", f"night{n}", seed=10 + n, started=f"2025-01-0{n}", **kwargs
        )
        for n in range(1, nights + 1)
    ]
    db = tmp_path / "history.sqlite"
    history.add_runs(db, [r / "smoke" for r in runs])
    return db


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GitHub's variables, and a step-summary file that starts empty."""
    summary = tmp_path / "step_summary.md"
    summary.write_text("")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for k, v in GITHUB_ENV.items():
        monkeypatch.setenv(k, v)
    return summary


@pytest.fixture
def expected(tmp_path: Path) -> Path:
    """An expected-status file with no rows: every cell must pass."""
    path = tmp_path / "status.csv"
    path.write_text("# no known failures\n" + EXPECTED_HEADER)
    return path


def compare(baseline: Path | str, candidate: Path, expected: Path, out: Path) -> int:
    argv = ["--baseline", str(baseline), "--candidate", str(candidate)]
    return nightly_compare.main(
        [*argv, "--expected", str(expected), "--out", str(out), "--label", "cpu"]
    )


# -- nightly_compare.py ----------------------------------------------------------------------------


def test_blocking_regression_writes_the_summary_and_the_issue_and_exits_1(tmp_path, env, expected):
    baseline = nightly_runs(tmp_path / "previous", "night1", seed=1)
    candidate = nightly_runs(tmp_path / "nightly", "night2", seed=4, broken=True)
    out = tmp_path / "nightly"

    assert compare(baseline, candidate, expected, out) == 1

    summary = (out / "summary.md").read_text()
    assert summary.splitlines()[0] == "# ❌ Nightly `cpu`: 1 blocking finding"
    assert "https://github.com/acme/harness/actions/runs/4242" in summary
    assert "### ❌ harness compare: 1 blocking regression" in summary  # demoted under the run
    assert env.read_text().strip() == summary.strip()  # the job summary is the same text
    issue = (out / "issue.md").read_text()
    assert issue.startswith("### Nightly `cpu`: 1 blocking finding")
    assert "| cell | finding | baseline | candidate |" in issue
    assert "expected ok, got export_failed at translate" in issue
    assert "harness compare --update-expected RUN_DIR" in issue
    verdict = json.loads((out / "compare" / "smoke" / "compare.json").read_text())["verdict"]
    assert verdict == "fail"
    assert (out / "compare" / "smoke" / "junit.xml").is_file()


def test_a_a_nights_block_nothing_exit_0_and_drop_a_stale_issue_body(tmp_path, env, expected):
    baseline = nightly_runs(tmp_path / "previous", "night1", seed=1)
    candidate = nightly_runs(tmp_path / "nightly", "night2", seed=2)
    out = tmp_path / "nightly"
    (out / "issue.md").write_text("yesterday's findings")

    assert compare(baseline, candidate, expected, out) == 0

    assert (out / "summary.md").read_text().startswith("# ✅ Nightly `cpu`: nothing blocking")
    assert not (out / "issue.md").exists()


def test_first_night_none_judges_by_expected_statuses_only(tmp_path, env, expected):
    candidate = nightly_runs(tmp_path / "nightly", "night1", seed=4, broken=True)

    assert compare("none", candidate, expected, tmp_path / "out") == 1
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "first night: no previous nightly to compare with" in summary
    assert "against `(no previous nightly)`" in summary
    assert "expected ok, got export_failed" in (tmp_path / "out" / "issue.md").read_text()

    expected.write_text(EXPECTED_HEADER + "m3,dynamo,18,cpu,export_failed,cummax,\n")
    assert compare("none", candidate, expected, tmp_path / "out2") == 0


def test_a_missing_baseline_directory_is_an_error_not_a_first_night(tmp_path, env, expected):
    candidate = nightly_runs(tmp_path / "nightly", "night1", seed=1)

    assert compare(tmp_path / "previous" / "runs", candidate, expected, tmp_path / "out") == 2

    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.startswith("# ⚠️ Nightly `cpu`: not compared")
    assert "no such directory" in summary and "none" in summary
    assert "not compared" in env.read_text()


def test_a_suite_that_wrote_nothing_is_an_error_and_the_others_are_still_compared(
    tmp_path, env, expected
):
    baseline = nightly_runs(tmp_path / "previous", "night1", seed=1)
    candidate = nightly_runs(tmp_path / "nightly", "night2", seed=4, broken=True)
    (candidate / "vision").mkdir()  # nightly_run.py made it; harness run failed before writing

    assert compare(baseline, candidate, expected, tmp_path / "out") == 2

    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.splitlines()[0] == "# ⚠️ Nightly `cpu`: 1 run not compared, 1 blocking finding"
    assert "## Run `vision`" in summary and "**Error**" in summary
    assert (tmp_path / "out" / "issue.md").is_file()  # what blocks is still reported


def test_another_runner_cpu_compares_statuses_only(tmp_path, env, expected):
    other = {**HARDWARE, "cpu": "Other CPU @ 2.0GHz"}
    baseline = nightly_runs(tmp_path / "previous", "night1", seed=1, hardware=other)
    candidate = nightly_runs(tmp_path / "nightly", "night2", seed=3, slow=1.5)

    assert compare(baseline, candidate, expected, tmp_path / "out") == 0

    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "different machine from the previous nightly: cpu" in summary
    assert "latency, export time and memory not compared" in summary


def compare_with_history(tmp_path: Path, expected: Path, db: Path | None, **baseline: Any) -> int:
    """A night 1.5x slower in ORT latency than the previous one (and than the history)."""
    previous = nightly_runs(
        tmp_path / "previous", "night9", seed=1, started="2025-01-09", **baseline
    )
    candidate = nightly_runs(
        tmp_path / "nightly", "night10", seed=3, slow=1.5, started="2025-01-10"
    )
    argv = ["--baseline", str(previous), "--candidate", str(candidate), "--expected", str(expected)]
    argv += ["--out", str(tmp_path / "out")] + (["--history-db", str(db)] if db else [])
    return nightly_compare.main(argv)


def test_a_slower_night_only_warns_until_the_history_knows_the_noise(tmp_path, env, expected):
    assert compare_with_history(tmp_path, expected, None) == 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "against the previous night: regressions only warn (no history database yet)" in summary
    assert "ORT latency worse" in summary and "only a warning" in summary

    db = history_of(tmp_path, 4)
    assert compare_with_history(tmp_path, expected, db) == 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "4 earlier nights on this machine in the history, 5 needed" in summary


def test_a_slower_night_blocks_against_a_long_enough_history(tmp_path, env, expected):
    db = history_of(tmp_path, 5)

    assert compare_with_history(tmp_path, expected, db) == 1

    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "against the last 5 nights on this machine in the history" in summary
    assert "ORT latency worse" in (tmp_path / "out" / "issue.md").read_text()


def test_the_history_judges_latency_when_last_night_ran_on_another_machine(tmp_path, env, expected):
    """GitHub's hosted runners: last night's CPU differed; this machine's earlier nights count."""
    db = history_of(tmp_path, 5)
    other = {**HARDWARE, "cpu": "Other CPU @ 2.0GHz"}

    assert compare_with_history(tmp_path, expected, db, hardware=other) == 1

    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "different machine from the previous nightly: cpu" in summary
    assert "against the last 5 nights on this machine in the history" in summary


def test_the_script_runs_from_the_command_line(tmp_path, expected):
    candidate = nightly_runs(tmp_path / "nightly", "night1", seed=1)
    command = [sys.executable, str(SCRIPTS / "nightly_compare.py"), "--baseline", "none"]
    command += [
        "--candidate",
        str(candidate),
        "--expected",
        str(expected),
        "--out",
        str(tmp_path / "out"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "nothing blocking" in done.stdout


# -- fakes of gh and harness --------------------------------------------------------------------------

FAKE = '''#!{python}
"""A stand-in for `{name}`: there is no GitHub here (nor time for real runs). It records its
argv (and the text of a --body-file), answers from canned JSON, and writes canned files
into its --out."""
import json, os, shutil, sys

args = sys.argv[1:]
config = json.load(open(os.environ["FAKE_CONFIG"]))
entry = {{"tool": "{name}", "argv": args}}
if "--body-file" in args:
    entry["body"] = open(args[args.index("--body-file") + 1]).read()
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(entry) + "\\n")
command = " ".join(args[:2])
if command in config.get("fail", []):
    print("HTTP 502: canned failure", file=sys.stderr)
    sys.exit(1)
if command == "run download":
    source = config.get("artifacts", {{}}).get(args[2])
    if source is None:
        print("no valid artifacts found to download", file=sys.stderr)
        sys.exit(1)
    shutil.copytree(source, args[args.index("--dir") + 1])
for name, text in config.get("writes", {{}}).get(command, {{}}).items():
    out = args[args.index("--out") + 1]
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, name), "w").write(text)
print(config.get("stdout", {{}}).get(command, ""))
'''


class Fakes:
    """Fake `gh` and `harness` first on PATH; `configure` sets their answers, `calls` reads
    back what they were asked."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.config, self.log = root / "fake.json", root / "fake.log"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        for name in ("gh", "harness"):
            path = bin_dir / name
            path.write_text(FAKE.format(python=sys.executable, name=name))
            path.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_CONFIG", str(self.config))
        monkeypatch.setenv("FAKE_LOG", str(self.log))
        self.configure()

    def configure(self, **config: Any) -> None:
        self.config.write_text(json.dumps(config))

    def calls(self, tool: str = "gh") -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [e for e in entries if e["tool"] == tool]

    def commands(self, tool: str = "gh") -> list[str]:
        return [" ".join(c["argv"][:2]) for c in self.calls(tool)]


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fakes:
    return Fakes(tmp_path, monkeypatch)


# -- nightly_run.py ------------------------------------------------------------------------------------


def test_nightly_run_runs_every_suite_into_its_own_directory(tmp_path, fakes):
    fakes.configure(fail=["run --suite"])  # every `harness run` fails: the loop goes on

    out = tmp_path / "nightly" / "runs"
    code = nightly_run.main(
        ["--suites", "smoke, vision", "--opsets", "18,20", "--devices", "cpu", "--out", str(out)]
    )

    assert code == 1
    argvs = [c["argv"] for c in fakes.calls("harness")]
    assert argvs == [
        ["run", "--suite", s, "--out", str(out / s), "--opsets", "18,20", "--devices", "cpu"]
        for s in ("smoke", "vision")
    ]
    assert (out / "smoke").is_dir() and (out / "vision").is_dir()


def test_nightly_run_without_suites_runs_the_nightlys_own(tmp_path, fakes):
    out = tmp_path / "runs"
    assert nightly_run.main(["--out", str(out)]) == 0
    suites = (
        "smoke",
        "vision",
        "transformers",
        "transformers-decode",
        "transformers-decode-fused",
        "transformers-tasks",
    )
    assert [c["argv"] for c in fakes.calls("harness")] == [
        ["run", "--suite", s, "--out", str(out / s)] for s in suites
    ]


def test_nightly_run_leaves_the_suites_own_opsets_and_devices(tmp_path, fakes):
    out = tmp_path / "runs"
    assert (
        nightly_run.main(["--suites", "suites/smoke.toml", "--opsets", "", "--out", str(out)]) == 0
    )
    assert [c["argv"] for c in fakes.calls("harness")] == [
        ["run", "--suite", "suites/smoke.toml", "--out", str(out / "smoke")]
    ]


# -- fetch_baseline.py ------------------------------------------------------------------------------


def fetch(tmp_path: Path, *more: str) -> int:
    argv = ["--artifact", "nightly-cpu", "--dest", str(tmp_path / "previous"), *more]
    return fetch_baseline.main(argv)


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_first_night_has_no_baseline(tmp_path, fakes, monkeypatch):
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    fakes.configure(stdout={"repo view": "main", "run list": "[]"})

    assert fetch(tmp_path) == 0

    assert outputs(tmp_path / "output") == {"baseline": "none", "run_url": ""}
    listing = fakes.calls()[1]["argv"]
    for flag, value in (
        ("--workflow", "nightly.yml"),
        ("--branch", "main"),
        ("--event", "schedule"),
    ):
        assert listing[listing.index(flag) + 1] == value


def test_the_newest_scheduled_night_that_still_has_the_artifact_is_the_baseline(
    tmp_path, fakes, monkeypatch
):
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    artifact = tmp_path / "artifact-29"
    nightly_runs(artifact, "night29", seed=1)
    (artifact / "history.sqlite").write_text("the history database")
    runs = [
        {"databaseId": 31, "conclusion": "cancelled", "url": "u31"},
        {"databaseId": 30, "conclusion": "success", "url": "u30"},  # its artifact expired
        {"databaseId": 29, "conclusion": "failure", "url": "u29"},  # a failed night measured too
    ]
    fakes.configure(stdout={"run list": json.dumps(runs)}, artifacts={"29": str(artifact)})
    history = tmp_path / "nightly" / "history.sqlite"

    assert fetch(tmp_path, "--branch", "trunk", "--history-out", str(history)) == 0

    previous = tmp_path / "previous"
    assert outputs(tmp_path / "output") == {"baseline": str(previous / "runs"), "run_url": "u29"}
    assert (previous / "runs" / "smoke" / "manifest.json").is_file()
    assert history.read_text() == "the history database"
    assert fakes.commands() == ["run list", "run download", "run download"]  # 31 skipped
    assert [c["argv"][2] for c in fakes.calls()[1:]] == ["30", "29"]


def test_a_history_the_cache_restored_is_kept_over_the_artifacts(tmp_path, fakes, monkeypatch):
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    artifact = tmp_path / "artifact-29"
    nightly_runs(artifact, "night29", seed=1)
    (artifact / "history.sqlite").write_text("the artifact's history")
    runs = [{"databaseId": 29, "conclusion": "success", "url": "u29"}]
    fakes.configure(stdout={"run list": json.dumps(runs)}, artifacts={"29": str(artifact)})
    history = tmp_path / "nightly" / "history.sqlite"
    history.parent.mkdir()
    history.write_text("the cache's history")

    assert fetch(tmp_path, "--branch", "main", "--history-out", str(history)) == 0

    assert history.read_text() == "the cache's history"


def test_fetch_fails_with_2_when_gh_cannot_list(tmp_path, fakes):
    fakes.configure(fail=["run list"])
    assert fetch(tmp_path, "--branch", "main") == 2


# -- tracking_issue.py ------------------------------------------------------------------------------


@pytest.fixture
def findings(tmp_path: Path) -> Path:
    """What the tracking-issue job downloads: one issue.md per nightly job that blocked."""
    root = tmp_path / "findings"
    for device in ("cpu", "cuda"):
        (root / f"findings-{device}").mkdir(parents=True)
        body = f"### Nightly `{device}`: 1 blocking finding\n\n| cell | finding |\n|---|---|\n| m3 | ok -> export_failed |\n"
        (root / f"findings-{device}" / "issue.md").write_text(body)
    return root


def test_creates_the_issue_when_none_is_open(findings, fakes):
    fakes.configure(
        stdout={"issue list": "[]", "issue create": "https://github.com/acme/harness/issues/9"}
    )

    assert tracking_issue.main(["--body", str(findings)]) == 0

    assert fakes.commands() == ["label create", "issue list", "issue create"]
    create = fakes.calls()[-1]
    argv = create["argv"]
    assert argv[argv.index("--title") + 1] == "Nightly: blocking regressions"
    assert argv[argv.index("--label") + 1] == "nightly-regression"
    assert "Nightly `cpu`" in create["body"] and "Nightly `cuda`" in create["body"]
    assert "| m3 | ok -> export_failed |" in create["body"]


def test_updates_and_comments_on_the_open_issue_with_that_title(findings, fakes):
    open_issues = [
        {"number": 3, "title": "Something else"},
        {"number": 7, "title": "Nightly: blocking regressions"},
    ]
    fakes.configure(stdout={"issue list": json.dumps(open_issues)})

    assert tracking_issue.main(["--body", str(findings)]) == 0

    assert fakes.commands() == ["label create", "issue list", "issue edit", "issue comment"]
    assert [c["argv"][2] for c in fakes.calls()[2:]] == ["7", "7"]
    assert all("| m3 | ok -> export_failed |" in c["body"] for c in fakes.calls()[2:])


def test_dry_run_looks_up_and_changes_nothing(findings, fakes, capsys):
    fakes.configure(stdout={"issue list": "[]"})

    assert tracking_issue.main(["--body", str(findings), "--dry-run"]) == 0

    assert fakes.commands() == ["issue list"]
    assert "gh issue create --title Nightly: blocking regressions" in capsys.readouterr().out


def test_nothing_blocking_leaves_the_issue_alone(tmp_path, fakes):
    (tmp_path / "findings").mkdir()  # the download found no findings-* artifact
    assert tracking_issue.main(["--body", str(tmp_path / "findings")]) == 0
    assert fakes.calls() == []


def test_a_gh_failure_exits_2(findings, fakes):
    fakes.configure(fail=["issue list"])
    assert tracking_issue.main(["--body", str(findings)]) == 2


# -- nightly_compare.py --bisect ---------------------------------------------------------------------

BISECT_MD = (
    "## harness bisect (onnxscript 0.5.0 -> 0.6.0): first bad onnxscript 0.5.3 (last good 0.5.2)\n"
)


def moved_nights(tmp_path: Path, *, tonight: str = "0.6.0") -> tuple[Path, Path]:
    """Last night with onnxscript 0.5.0; tonight with `tonight` and m3 failing to export."""
    baseline = nightly_runs(tmp_path / "previous", "night1", seed=1)
    candidate = nightly_runs(tmp_path / "nightly", "night2", seed=4, broken=True)
    manifest_path = candidate / "smoke" / "manifest.json"
    man = json.loads(manifest_path.read_text())
    man["versions"]["base"].update(onnxscript=tonight, onnx="1.17.0")
    manifest_path.write_text(json.dumps(man))
    return baseline, candidate


def compare_bisecting(
    baseline: Path, candidate: Path, expected: Path, out: Path, *more: str
) -> int:
    argv = ["--baseline", str(baseline), "--candidate", str(candidate), "--expected", str(expected)]
    return nightly_compare.main([*argv, "--out", str(out), "--bisect", *more])


def test_bisect_runs_harness_bisect_on_the_blocking_cells_and_puts_the_answer_in_the_issue(
    tmp_path, env, expected, fakes
):
    fakes.configure(writes={"bisect --package": {"bisect.md": BISECT_MD}})
    baseline, candidate = moved_nights(tmp_path)
    out = tmp_path / "nightly"

    assert compare_bisecting(baseline, candidate, expected, out) == 1  # the verdict is compare's

    (call,) = fakes.calls("harness")
    assert call["argv"] == [
        "bisect", "--package", "onnxscript", "--good", "0.5.0", "--bad", "0.6.0",
        "--suite", "synthetic", "--models", "m3", "--exporters", "dynamo", "--opsets", "18",
        "--devices", "cpu", "--static-only", "--threads", "2", "--out", str(out / "bisect" / "smoke"),
    ]  # fmt: skip
    issue = (out / "issue.md").read_text()
    assert "#### Bisection of run `smoke`" in issue
    assert "### harness bisect (onnxscript 0.5.0 -> 0.6.0): first bad onnxscript 0.5.3" in issue
    assert issue.index("| m3 dynamo@18 cpu |") < issue.index("#### Bisection")  # after the findings
    assert "first bad onnxscript 0.5.3" in (out / "summary.md").read_text()


def test_a_failed_bisection_is_reported_and_changes_no_exit_code(tmp_path, env, expected, fakes):
    fakes.configure(fail=["bisect --package"])
    baseline, candidate = moved_nights(tmp_path)

    assert compare_bisecting(baseline, candidate, expected, tmp_path / "out") == 1
    issue = (tmp_path / "out" / "issue.md").read_text()
    assert "**Bisection failed**: HTTP 502: canned failure" in issue


def test_nothing_moved_nothing_bisected(tmp_path, env, expected, fakes):
    baseline, candidate = moved_nights(tmp_path, tonight="0.5.0")

    assert (
        compare_bisecting(
            baseline, candidate, expected, tmp_path / "out", "--bisect-packages", "onnxscript,onnx"
        )
        == 1
    )
    assert fakes.calls("harness") == []
    issue = (tmp_path / "out" / "issue.md").read_text()
    assert "Not bisected: none of onnxscript, onnx moved since the previous night." in issue


def test_without_bisect_or_without_a_block_harness_bisect_never_runs(
    tmp_path, env, expected, fakes
):
    baseline, candidate = moved_nights(tmp_path)
    assert compare(baseline, candidate, expected, tmp_path / "out") == 1
    quiet = nightly_runs(tmp_path / "quiet", "night3", seed=2)
    assert compare_bisecting(baseline, quiet, expected, tmp_path / "out2") == 0
    assert fakes.calls("harness") == []
    assert "Bisection" not in (tmp_path / "out" / "issue.md").read_text()
