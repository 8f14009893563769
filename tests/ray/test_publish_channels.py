"""The site's two channels with real package sets, offline: the probe packages of the
bisect tests (tests/bisect/probe_packages.py, real wheels served from a folder) installed
into a Ray runtime environment by `harness run --variant`, one version per channel (both
channels' variants in one run), as the nightly installs the newest pre-releases on top of
the pinned packages. harness-probe-core STATUS_BAD makes `probe_widen` unexportable with
the TorchScript exporter; the version before it does not. The site must show exactly that
cell as the one the channels disagree on.

It is also the suite's test of `--variant` itself (a runtime_env costs a Ray worker's
virtualenv and pip's install, about a minute each on 2 cores): records say which variant,
the manifest which versions each saw, compare names them, and the variants' clones of the
virtualenv go with the Ray instance. `--local` refuses `--variant`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.store import rundir as store
from harness.store.status import Status
from tests.bisect.probe_packages import (
    BEFORE_STATUS_BAD,
    CORE,
    STATUS_BAD,
    build_probe_wheels,
    write_probe_zoo,
)
from tests.conftest import ray_sessions, run_cli
from tests.publish.simulate import real_records, write_night

STABLE = BEFORE_STATUS_BAD
CHANNELS = {"stable": STABLE, "pre-release": STATUS_BAD}
NIGHTS = 2


def _run(zoo: Path, wheels: Path, out: Path) -> Path:
    """One run, a variant per channel: each in its own runtime_env with its version."""
    specs = []
    for channel, version in CHANNELS.items():
        (wheel,) = wheels.glob(f"{CORE.replace('-', '_')}-{version}-*.whl")
        specs += ["--variant", f"{_variant(channel)}={wheel}"]
    result = run_cli(
        "run", "--zoo", str(zoo), "--exporters", "torchscript", "--opsets", "18",
        "--static-only", "--repro-bound", "0", "--timeout", "300", "--no-report",
        *specs, "--out", str(out),
        timeout=1200, ray=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _variant(channel: str) -> str:
    return channel.replace("-", "")


def _as_base(night: int, record: dict[str, Any]) -> dict[str, Any]:
    """The channel's package set is the night's environment (the nightly installs it on top),
    so its cells are the base variant's."""
    return {**record, "variant": "base"}


def test_the_site_shows_the_cell_a_newer_package_breaks_as_the_channels_difference(
    tmp_path: Path,
) -> None:
    wheels, zoo = build_probe_wheels(tmp_path), write_probe_zoo(tmp_path)
    clones_before = set(_variant_clones())
    run, dbs = _run(zoo, wheels, tmp_path / "run"), {}
    _check_variants(run)
    # The variants' clones of the virtualenv (~2 GB each) went with the local Ray instance.
    assert set(_variant_clones()) <= clones_before
    for channel in CHANNELS:
        source = [(d, r) for d, r in real_records([run]) if r["variant"] == _variant(channel)]
        assert {r["model"] for _, r in source} == {"probe_widen", "probe_chain"}
        nights = [
            write_night(source, tmp_path / channel, night=n, suite="probe", edit=_as_base)
            for n in range(NIGHTS)
        ]
        dbs[channel] = tmp_path / f"{channel}.sqlite"
        added = run_cli("history", "--db", str(dbs[channel]), "add", *map(str, nights))
        assert added.returncode == 0, added.stderr
    site = tmp_path / "site"
    done = run_cli(
        "publish", str(dbs["stable"]), "--pre-release", str(dbs["pre-release"]), "--out", str(site)
    )
    assert done.returncode == 0, done.stderr
    data = json.loads((site / "regressions.json").read_text())
    assert data["differences"] == [
        {
            "cell": "probe_widen torchscript@18 cpu",
            "model": "probe_widen",
            "statuses": {"stable": "ok", "pre-release": "export_failed"},
        }
    ]
    channels = (site / "channels.html").read_text()
    assert "probe_widen torchscript@18 cpu" in channels and "probe_chain" not in channels
    index = json.loads((site / "data" / "index.json").read_text())
    rates = {
        name: [(s["passing"], s["total"]) for s in c["series"]]
        for name, c in index["channels"].items()
    }
    assert rates == {"stable": [(2, 2)], "pre-release": [(1, 2)]}


def _check_variants(run: Path) -> None:
    """Each variant's cells, under the versions it asked for, and compare naming them."""
    records = {(r.model, r.variant): r for r in store.read_records(run)}
    variants = ("base", *map(_variant, CHANNELS))
    assert set(records) == {(m, v) for m in ("probe_widen", "probe_chain") for v in variants}
    outcome = {k: (str(r.status), r.error_signature) for k, r in records.items()}
    assert records[("probe_widen", "stable")].status is Status.OK, outcome
    assert records[("probe_widen", "prerelease")].status is Status.EXPORT_FAILED, outcome
    versions = store.read_manifest(run).versions
    for channel, version in CHANNELS.items():
        assert _probe_version(versions[_variant(channel)]) == version
    assert _probe_version(versions["base"]) is None  # not installed in the base environment
    compared = run_cli("compare", str(run), "--variants", "stable,prerelease", "--no-expected")
    assert compared.returncode in (0, 1), compared.stderr[-2000:]
    header = compared.stdout.split("cells,", 1)[0]  # each side's run and the versions it moved
    assert re.search(rf"@prerelease`? \([^)]*harness.probe.core {STATUS_BAD}\)", header), header
    assert re.search(rf"@stable`? \([^)]*harness.probe.core {STABLE}\)", header), header


def _probe_version(versions: dict[str, str | None]) -> str | None:
    """harness-probe-core's version in a variant's manifest entry, whatever the spelling."""
    found = [v for k, v in versions.items() if re.sub(r"[-_.]+", "-", k) == CORE]
    return found[0] if found else None


def _variant_clones() -> list[Path]:
    """The pip environments Ray's local sessions hold (Ray's temp folder)."""
    return list(ray_sessions().glob("session_*/runtime_resources/pip/*"))
