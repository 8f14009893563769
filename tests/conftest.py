from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "zoo_fixtures"
E2E = Path(__file__).resolve().parent / "e2e"
RAY = Path(__file__).resolve().parent / "ray"


# Modules whose tests share a slow module-scoped fixture (real cells, minimizer processes or
# a CLI run, tens of seconds): each is one scope under xdist, so that the fixture is made
# once, on one worker, instead of once on each worker that gets one of its tests. Every
# module of tests/e2e/ is one too.
SHARED_FIXTURE = {
    "tests/repro/test_minimize.py",
    "tests/repro/test_modules.py",
    "tests/cell/test_generation.py",
    "tests/runtime/test_isolation.py",
    "tests/zoo/test_plugins.py",
}


NODE_OF_THIS_PROCESS = Path(
    tempfile.gettempdir(),
    f"harness-test-node-{os.getpid()}-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}",
)


def pytest_configure(config: pytest.Config) -> None:
    """Each test process is a node of its own for the harness's node lock
    (harness/cell/node.py): the cells of one xdist worker's tests never wait for the timing
    of another worker's (on a real machine every run shares the lock, and a test of the lock
    names its own folder). Set before any test runs, so every process a test starts
    (zygotes, cells, Ray workers) inherits it; set over what the process inherited, which
    for an xdist worker is its controller's folder (shared by every worker, the whole
    machine's cells waited for each timing: the cores idle a fifth of the suite's span)."""
    from harness.cell.node import FOLDER_ENV

    NODE_OF_THIS_PROCESS.mkdir(exist_ok=True)
    os.environ[FOLDER_ENV] = str(NODE_OF_THIS_PROCESS)
    _ray_temp_in_memory()


# Ray's temp folder in memory where the machine has room for it: each runtime_env of
# tests/ray/ is a clone of this virtualenv (about 1.8 GB), which takes about 30 s to write to
# this machine's disk and 4 s to memory. The clones go with each Ray instance, the rest (its
# logs) with the test process (pytest_unconfigure).
MEMORY_FOLDER, MEMORY_NEEDED = Path("/dev/shm"), 8 * 1024**3
RAY_TEMP_OF_THIS_PROCESS = MEMORY_FOLDER / f"harness-ray-{os.getpid()}"


def _ray_temp_in_memory() -> None:
    if "RAY_TMPDIR" in os.environ or not MEMORY_FOLDER.is_dir():
        return
    if shutil.disk_usage(MEMORY_FOLDER).free < MEMORY_NEEDED:
        return
    RAY_TEMP_OF_THIS_PROCESS.mkdir(exist_ok=True)
    os.environ["RAY_TMPDIR"] = str(RAY_TEMP_OF_THIS_PROCESS)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(RAY_TEMP_OF_THIS_PROCESS, ignore_errors=True)
    shutil.rmtree(NODE_OF_THIS_PROCESS, ignore_errors=True)


def ray_sessions() -> Path:
    """Where the Ray instances the tests start keep their sessions (as Ray picks it)."""
    return Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir(), "ray")


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers: every test under tests/e2e/ is `e2e` (real run directories through the
    real commands, in this process, without Ray) and every test under tests/ray/ is `ray`
    (what only Ray does: clusters, runtime environments, node loss, bisect's installs);
    both are `slow`, so that the fast tier (`make test`: -m "not slow") leaves them out.
    Under xdist the `ray` tests run one at a time on one worker (`--dist loadgroup`):
    each starts Ray instances, and some check what Ray leaves in its shared temp folder.
    They are handed out first (`Scopes.schedule`), so that their chain, the suite's longest
    (0-628 s of a 638-s span on 2 cores), starts as the suite does rather than after a
    minute of others; then the larger scopes, as xdist orders them."""
    scopes = {item.nodeid: _scope(item.nodeid) for item in items}
    sizes = Counter(scopes.values())
    items.sort(key=lambda item: (scopes[item.nodeid] != "ray", -sizes[scopes[item.nodeid]]))
    for item in items:
        if E2E in item.path.parents:
            item.add_marker(pytest.mark.e2e)
        if RAY in item.path.parents:
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.xdist_group("ray"))
        if item.get_closest_marker("e2e") or item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.slow)


# The nice value of a test process once it runs a test outside tests/ray/ (and of everything
# it starts). The Ray tier runs first, on one xdist worker, as a chain of Ray boots, runtime
# environments and node deaths: mostly short steps, each waiting for the one before. With
# every process at one priority, the other workers' cells (up to two per worker) took the
# cores from under it: a test of 17 s alone took 111 s in the suite, and the chain, 754 s,
# was the suite's span. Lowered, their work fills what the chain leaves idle instead.
BESIDE_THE_RAY_TIER_NICE = 10


def pytest_runtest_setup(item: pytest.Item) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") and RAY not in item.path.parents:
        _lower_priority_once()


@functools.cache
def _lower_priority_once() -> None:
    os.nice(BESIDE_THE_RAY_TIER_NICE)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores this process may use, whose tests use the
    cores while the others' wait out hangs, timeouts and Ray's boots (on 2 cores, 3 workers
    left them idle 2-5% of the span; `python -m benchmarks.suite_busy`, benchmarks/README.md)."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` with tests/ray/ in one group, by path (xdist 3.8 groups by the
    `xdist_group` mark through the node id, which pytest 9.2 no longer lets it rename, so
    the marks alone group nothing), and each module of tests/e2e/ and of SHARED_FIXTURE
    a scope of its own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Scopes(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

        def schedule(self) -> None:
            self.config.option.loadscopereorder = False  # the collection's order, as sorted
            super().schedule()

    return Scopes(config, log)


def _scope(nodeid: str) -> str:
    """The scope xdist hands a test out in: tests/ray/ one, each module of tests/e2e/ and
    of SHARED_FIXTURE one, every other test its own."""
    module = nodeid.split("::", 1)[0]
    if nodeid.startswith("tests/ray/"):
        return "ray"
    if nodeid.startswith("tests/e2e/") or module in SHARED_FIXTURE:
        return module
    return nodeid


def run_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 600,
    env: dict[str, str] | None = None,
    ray: bool = False,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """The real `harness` command line. By default in this process, a `harness run` on this
    machine without Ray (`--local`: the same driver loop, zygotes and cells as a Ray run);
    with `fresh`, the same in a fresh process (what reads the environment at start-up:
    PYTHONPATH, installed entry points); with `ray`, in a fresh process whose `harness run`
    starts its own Ray instance (what only Ray does: other nodes, runtime environments,
    node loss, the queue)."""
    if not (ray or fresh):
        return run_in_process(*args, cwd=cwd, env=env)
    argv = list(args) if ray else without_ray(args)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def run_in_process(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`harness.cli.main` in this process, its output captured, as a subprocess would
    give it back; `harness run` and `harness compare` get `--local` (no Ray)."""
    from harness.cli import main

    argv = without_ray(args)
    out, err = io.StringIO(), io.StringIO()
    with (
        _environment(env or {}),
        contextlib.chdir(cwd or REPO),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(argv)
        except SystemExit as exc:  # --help, --version
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["harness", *argv], code, out.getvalue(), err.getvalue())


def without_ray(args: tuple[str, ...]) -> list[str]:
    """`harness run` and `harness compare` on this machine without Ray (`--local`), unless
    they join a cluster."""
    local = args[:1] in (("run",), ("compare",)) and not {"--local", "--address"} & set(args)
    return [*args, "--local"] if local else list(args)


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def load_zoo_file_fresh(path: Path) -> tuple[int, float, bool, bool]:
    """A generated zoo's entry file loaded in a fresh process, as a worker and `harness
    list` load it: its entries, the seconds it took, and whether transformers and torch
    got imported (the file must only read its inventory)."""
    script = f"""
import sys, time
start = time.perf_counter()
from harness.zoo import discovery
specs = discovery.load_file(discovery.Path({str(path)!r}))
print(len(specs), round(time.perf_counter() - start, 3), "transformers" in sys.modules, "torch" in sys.modules)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    count, seconds, transformers_loaded, torch_loaded = result.stdout.split()
    return int(count), float(seconds), transformers_loaded == "True", torch_loaded == "True"


def run_cli_read_only(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command line with `folder` read-only: its mode where that binds (not
    root), else a read-only bind mount in a mount namespace of the command's own (root
    writes whatever the mode says). Skipped, with the reason, where neither can be had."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return run_cli(*args)
        finally:
            folder.chmod(0o755)
    remount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    probe = subprocess.run(["unshare", "-m", "sh", "-c", remount, str(folder), "true"],
                           capture_output=True, text=True)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"running as root, and no read-only bind mount here: {probe.stderr.strip()}")
    command = ["unshare", "-m", "sh", "-c", remount, str(folder), sys.executable, "-m"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([*command, "harness.cli", *without_ray(args)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=env)  # fmt: skip


def run_cli_on_a_small_disk(
    mount: Path, size_kib: int, keep: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """The real command line with a tmpfs of `size_kib` KiB mounted on `mount`, in a mount
    namespace of its own (a real full disk: ENOSPC from the kernel); what the command left
    on `mount` is copied to `keep` before the namespace goes. Skipped, with the reason,
    where no mount namespace can be had (unprivileged user namespaces turned off)."""
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    mount_it = f'mount -t tmpfs -o size={size_kib}k tmpfs "$0"'
    probe = subprocess.run([*unshare, "sh", "-c", mount_it, str(mount)], capture_output=True,
                           text=True)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"no tmpfs in a mount namespace here: {probe.stderr.strip()}")
    script = f'{mount_it} && "$@"; code=$?; cp -a "$0/." "{keep}/"; exit $code'
    command = [*unshare, "sh", "-c", script, str(mount), sys.executable, "-m", "harness.cli"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([*command, *without_ray(args)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=env)  # fmt: skip


def start_cli(*args: str) -> subprocess.Popen[str]:
    """The real `harness` command line in a fresh process, started in its own session (so
    that a test can kill it and everything it started), its stderr kept; without Ray
    unless it joins a cluster (`without_ray`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *without_ray(args)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(
    condition: Callable[[], bool], *, timeout: float, proc: subprocess.Popen[str] | None = None
) -> None:
    """Poll `condition` until it holds; fail if time runs out, or the run `proc` ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"the run ended early: {proc.stderr.read() if proc.stderr else ''}"
            )
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The in-process CLI on bad input: exit 2, one line `error: ...`, no traceback."""
    from harness.cli import main

    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# -- tests that need a package index -----------------------------------------------------------

PYPI = "https://pypi.org/simple"
INDEX_TIMEOUT_S = 5.0


def package_index_problem(requirement: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why pip cannot fetch `requirement` (`name` or `name==version`) here, if it cannot:
    a quick look (INDEX_TIMEOUT_S each) at the project's page on every index and
    find-links folder pip is configured with, so that a test needing one skips with the
    reason where there is none (an offline CI runner) instead of failing."""
    name, _, version = requirement.partition("==")
    project = re.sub(r"[-_.]+", "-", name).lower()
    # Distribution files spell the name with -, _ or . and any case: name-version[-.]...
    pattern = "[-_.]".join(map(re.escape, project.split("-")))
    wanted = re.compile(rf"{pattern}-{re.escape(version)}[-.+]" if version else pattern, re.I)
    sources = _pip_sources(env)
    for source in sources:
        page = _read_listing(
            source if source.endswith("/*") else f"{source.rstrip('/')}/{project}/"
        )
        if page is not None and wanted.search(page):
            return None
    tried = ", ".join(s.removesuffix("/*") for s in sources) or "none configured"
    return f"no package index reachable here offers {requirement} (tried {tried})"


def _pip_sources(env: Mapping[str, str] | None) -> list[str]:
    """pip's index URLs (PyPI unless configured otherwise) and find-links folders (as
    `folder/*`), from `pip config list`: its files and PIP_* variables alike."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    ).stdout  # fmt: skip
    config: dict[str, list[str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        config.setdefault(key.rsplit(".", 1)[-1], []).extend(value.strip("'\"").split())
    no_index = any(v.lower() in ("1", "true", "yes") for v in config.get("no-index", []))
    indexes = [] if no_index else (config.get("index-url") or [PYPI])
    folders = [
        f.removeprefix("file://")
        for f in config.get("find-links", [])
        if "://" not in f or f.startswith("file://")
    ]
    return [*indexes, *config.get("extra-index-url", []), *(f"{f}/*" for f in folders)]


def _read_listing(url: str) -> str | None:
    """A project page of an index (http(s) or file://), or a find-links folder's file
    names; None where it cannot be read in time."""
    if url.endswith("/*"):
        folder = Path(url.removesuffix("/*"))
        return " ".join(p.name for p in folder.iterdir()) if folder.is_dir() else None
    if url.startswith("file://"):
        folder = Path(url.removeprefix("file://"))
        page = folder / "index.html"
        return page.read_text(errors="replace") if page.is_file() else None
    try:
        with urllib.request.urlopen(url, timeout=INDEX_TIMEOUT_S) as response:
            return response.read(4_000_000).decode(errors="replace")
    except (OSError, ValueError):
        return None


# Bytecode is written (each folder's __pycache__, which git ignores) although the machine's
# environment says not to (PYTHONDONTWRITEBYTECODE, as this one sets): the suite starts
# hundreds of interpreters (zygotes, command lines, plain scripts), and each compiled every
# module of the harness and of the zoo it imported afresh.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# A `harness run` with failures minimizes one cell per failure cluster afterwards (issue 27:
# a fresh process to shrink it and another to verify the script, about 20 s a cluster here).
# Tests of other things turn that off; tests/repro/ turns it on where it checks it.
os.environ.setdefault("HARNESS_REPRO_BOUND", "0")
# Each zygote warms every exporter up at every opset before its first cell of them (an export
# each), so that timings do not charge one-time initialisation to a cell. The tests' runs
# check verdicts and records, not timings: they skip it; tests that compare the timings of
# two runs (tests/e2e/test_compare.py) and the warm-up's own tests turn it back on.
os.environ.setdefault("HARNESS_SKIP_WARM_UP", "1")
# Each cell's latency loops run as the suite's [protocol] asks (at least 0.3 s a loop and up
# to 2 s of warm-up, for eager and ORT, at every thread count and shape): the tests' runs
# check verdicts and records, so their loops are short (`--protocol`'s default). Tests of the
# protocol or of timings give their own (`harness run --protocol`, or without this variable).
os.environ.setdefault(
    "HARNESS_PROTOCOL", "warmup_min_iters=1,warmup_max_s=0,min_iters=5,min_time_s=0,max_time_s=0.05"
)
# A local run's cells run one at a time (one set of zygotes a run rather than one per core,
# also in the runs with the warm-up on) and, with the warm-up skipped, an in-process local
# run's zygotes are kept for the next local run of the test process under the same
# environment (harness/runtime/kept.py: KEEP_ENV), not spawned afresh by every run;
# tests/dispatch/test_local.py turns it off where it checks the runner's concurrency.
os.environ.setdefault("HARNESS_KEEP_ZYGOTES", "1")
# Offline, as this machine is (no Hub): what building a transformers model sets in its
# process (model_zoo/transformers/_build.py: `offline`), set from the start, so that the
# first in-process build does not change the environment kept zygotes are keyed by.
for _variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(_variable, "1")


def process_table() -> dict[int, list[str]]:
    """Each process's fields of /proc/PID/stat after its name: state, ppid, pgrp, ..."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # it ended meanwhile
            table[int(stat.parent.name)] = stat.read_text().rsplit(")", 1)[1].split()
    return table


def _hold_alone(folder: Path, seconds: float, held: Any, released: Any) -> None:
    from harness.cell import node

    with node.holding(folder) as lock, lock.alone():
        held.set()
        time.sleep(seconds)
        released.put(time.monotonic())


@contextlib.contextmanager
def node_held_alone(
    monkeypatch: pytest.MonkeyPatch, folder: Path, seconds: float
) -> Iterator[Callable[[], float]]:
    """Another cell (a real forked process on `folder`'s node locks, this process's too)
    holds the node alone for `seconds` from the block's start; yields what tells when it
    let go (monotonic)."""
    import multiprocessing

    from harness.cell import node

    monkeypatch.setenv(node.FOLDER_ENV, str(folder))
    fork = multiprocessing.get_context("fork")
    held, released = fork.Event(), fork.Queue()
    holder = fork.Process(target=_hold_alone, args=(folder, seconds, held, released))
    holder.start()
    try:
        assert held.wait(30), "the holder never held the node"
        yield lambda: float(released.get(timeout=60))
    finally:
        holder.join(timeout=60)
        assert holder.exitcode == 0, holder.exitcode


@dataclass(frozen=True)
class Opening:
    """A session's opening: when it was done (monotonic), and how many of the sessions
    opened before it were still alive as it began."""

    at: float
    alive_before: int


def session_openings(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Opening]:
    """`module`'s OrtRunner replaced by the real runner noting each session's opening into
    the list returned."""
    from harness.cell.ort import OrtRunner

    opened: list[Opening] = []
    earlier: list[weakref.ref[OrtRunner]] = []

    class Noted(OrtRunner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            alive = sum(ref() is not None for ref in earlier)
            super().__init__(*args, **kwargs)
            opened.append(Opening(time.monotonic(), alive))
            earlier.append(weakref.ref(self))

    monkeypatch.setattr(module, "OrtRunner", Noted)
    return opened
