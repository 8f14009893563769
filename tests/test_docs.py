"""The docs live in the repository and stay true: the site builds with mkdocs --strict (no
broken link or anchor), the generated reference equals what the code gives now, and every
repository path and every `harness VERB --flag` the README and docs/ name exists."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.commands import VERBS

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", REPO / "benchmarks" / "README.md", *sorted(REPO.glob("docs/**/*.md"))]
# A code span or line that starts with one of these names a path in the repository.
TOP_LEVEL = ("harness/", "model_zoo/", "tests/", "scripts/", "benchmarks/", "suites/",
             "expected/", "docs/", ".github/", ".ci/")  # fmt: skip
TOP_FILES = {"pyproject.toml", "Makefile", "mkdocs.yml", "README.md"}
OUTPUTS = ("benchmarks/results/",)  # written by `make bench`, ignored by git


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_of(text: str) -> Iterator[str]:
    """The code a markdown page holds: each inline code span, and each line of a fenced
    block (backslash continuations joined)."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    for block in blocks:
        yield from block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    yield from re.findall(r"`([^`\n]+)`", prose)


def braces(path: str) -> list[str]:
    """`harness/{plan,store}/ruff.toml` -> both paths (one level of braces)."""
    found = re.search(r"\{([^{}]*)\}", path)
    if not found:
        return [path]
    return [path[: found.start()] + part + path[found.end() :] for part in found[1].split(",")]


def paths_in(code: str) -> Iterator[str]:
    for token in re.split(r"[\s();:=\"'`]+", code):
        for word in braces(token) if "{" in token else token.split(","):
            word = word.rstrip(".").removeprefix("./")
            placeholder = any(c in word for c in "<>*$[]") or "..." in word
            if placeholder or word.startswith(OUTPUTS):
                continue
            if word.startswith(TOP_LEVEL) or word in TOP_FILES:
                yield word


def modules_in(code: str) -> Iterator[str]:
    """`python -m model_zoo.transformers._refresh` -> the module, where it is this repo's."""
    for module in re.findall(r"python -m ([\w.]+)", code):
        if module.split(".")[0] in {"harness", "model_zoo", "scripts", "benchmarks"}:
            yield module


def harness_commands(code: str) -> Iterator[list[str]]:
    """Each `harness ...` command in a line of code, up to a comment or another command."""
    for found in re.finditer(r"(?:^|[\s&;|(])harness ([^#&;|`]*)", code):
        try:
            words = shlex.split(found[1], comments=False)
        except ValueError:
            words = found[1].split()
        if words and (words[0] in VERBS or words[0].startswith("-")):
            yield words


def options(parser: argparse.ArgumentParser) -> set[str]:
    names = {name for action in parser._actions for name in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                names |= options(sub)
    return names


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **sub.choices}


def named_in_docs() -> Iterator[tuple[str, str]]:
    for page in PAGES:
        for code in code_of(page.read_text()):
            yield page.relative_to(REPO).as_posix(), code


def test_the_pages_exist():
    assert (REPO / "mkdocs.yml").is_file()
    assert (REPO / "docs" / "index.md").is_file()
    assert (REPO / "docs" / "design.md").is_file()


def test_every_path_the_docs_name_exists():
    missing = [
        f"{page}: {path}"
        for page, code in named_in_docs()
        for path in paths_in(code)
        if not (REPO / path).exists()
    ]
    assert not missing, "\n".join(missing)


def test_every_link_of_the_readmes_leads_to_a_file():
    """mkdocs checks the links inside docs/; the two READMEs are outside it."""
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page in PAGES[:2]
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not broken, "\n".join(broken)


def test_every_module_the_docs_run_exists():
    missing = [
        f"{page}: python -m {module}"
        for page, code in named_in_docs()
        for module in modules_in(code)
        if importlib.util.find_spec(module) is None
    ]
    assert not missing, "\n".join(missing)


def test_every_make_target_the_docs_name_exists():
    targets = set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), flags=re.M))
    named = [
        (page, target)
        for page, code in named_in_docs()
        for target in re.findall(r"(?:^|[\s&;|(])make ([\w-]+)", code)
    ]
    assert {"test", "test-all"} <= {target for _, target in named}  # the checker found them
    assert not [f"{page}: make {t}" for page, t in named if t not in targets]


def test_every_harness_command_the_docs_name_exists():
    parsers = verb_parsers()
    wrong, seen = [], 0
    for page, code in named_in_docs():
        for words in harness_commands(code):
            verb = "" if words[0].startswith("-") else words[0]
            known = options(parsers[verb])
            flags = {w.split("=")[0] for w in words if re.fullmatch(r"--?[a-z][\w-]*(=.*)?", w)}
            seen += 1
            wrong += [f"{page}: harness {verb} {flag}" for flag in sorted(flags - known)]
    assert seen > 20  # the checker found the commands: the README alone names dozens
    assert not wrong, "\n".join(wrong)


def test_the_checker_catches_a_wrong_flag_and_a_wrong_path():
    codes = ["harness run --suite smoke --no-such-flag", "see `harness/no_such_module.py`"]
    (words,) = harness_commands(codes[0])
    assert "--no-such-flag" not in options(verb_parsers()["run"])
    assert words[:3] == ["run", "--suite", "smoke"]
    assert list(paths_in(codes[1])) == ["harness/no_such_module.py"]
    assert braces("harness/{plan,store}/ruff.toml") == [
        "harness/plan/ruff.toml",
        "harness/store/ruff.toml",
    ]


def test_the_generated_reference_is_up_to_date():
    generator = load_generator()
    assert set(generator.PAGES) == {"cli.md", "statuses.md", "record.md", "manifest.md"}
    assert generator.stale_pages() == [], "run: python scripts/gen_docs.py"


def test_the_cli_reference_names_every_verb_and_flag():
    text = (REPO / "docs" / "reference" / "cli.md").read_text()
    for verb, parser in verb_parsers().items():
        if verb:
            assert f"## harness {verb}\n" in text
        for flag in options(parser) - {"-h", "--help"}:
            assert f"`{flag}" in text or f", {flag}" in text, (verb, flag)


def test_the_site_builds_strictly(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "design" / "index.html").is_file()
    assert (tmp_path / "reference" / "cli" / "index.html").is_file()


@pytest.mark.parametrize("name", ["README.md", "docs/index.md"])
def test_the_readme_stays_about_a_page(name):
    assert len((REPO / name).read_text().splitlines()) <= 120


def test_the_record_reference_lists_every_key_of_a_records_line():
    from harness.store.records import Cell, Record

    text = (REPO / "docs" / "reference" / "record.md").read_text()
    line = Record(Cell("m", "dynamo", 18), "r", "ok").to_dict()
    assert len(line) > 40  # the contract's fields and the later ones
    missing = [key for key in line if f"| `{key}` |" not in text]
    assert not missing, missing
