"""What a runtime_env's worker reports about the packages `harness bisect` asked for: their
installed version and whether they import (real packages of this environment, and a
package made here that raises at import), and what the manifest says of the CPU."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from harness.store.environment import (
    cpu_id,
    distribution_status,
    hardware,
    requested_distributions,
    versions,
    with_requested,
)


def test_an_installed_package_reports_its_version_and_imports() -> None:
    status = distribution_status(("onnxscript", "Onnx_IR"))
    assert status["onnxscript"] == {
        "version": importlib.metadata.version("onnxscript"),
        "import_error": None,
    }
    assert status["Onnx_IR"]["version"] == importlib.metadata.version("onnx-ir")


def test_a_missing_package_says_so() -> None:
    assert distribution_status(("harness-no-such-dist",)) == {
        "harness-no-such-dist": {
            "version": None,
            "import_error": "harness-no-such-dist is not installed",
        }
    }


def test_a_package_that_raises_at_import_reports_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "harness_probe_broken").mkdir(parents=True)
    (site / "harness_probe_broken" / "__init__.py").write_text(
        'raise ImportError("broken on purpose")\n'
    )
    info = site / "harness_probe_broken-1.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: harness-probe-broken\nVersion: 1.3\n"
    )
    (info / "top_level.txt").write_text("harness_probe_broken\n")
    (info / "RECORD").write_text("harness_probe_broken/__init__.py,,\n")
    monkeypatch.syspath_prepend(str(site))
    status = distribution_status(("harness-probe-broken",))["harness-probe-broken"]
    assert status["version"] == "1.3"
    assert status["import_error"] == ("import harness_probe_broken: ImportError: broken on purpose")
    assert "harness_probe_broken" not in sys.modules


def test_the_manifest_lists_onnx_ir_beside_onnxscript() -> None:
    assert versions()["onnx-ir"] == importlib.metadata.version("onnx-ir")


def test_the_manifest_lists_what_each_variant_asked_for_under_the_name_it_has() -> None:
    variants = {
        "old": ("onnx_ir==0.1.12", "--no-index", "--find-links=/w"),
        "x": ("probe[cpu]>=1",),
        "wheel": ("/w/harness_probe_core-1.3-py3-none-any.whl", "/w/sd-ist-2.0.tar.gz"),
    }
    assert requested_distributions(variants) == ("harness_probe_core", "onnx_ir", "probe", "sd-ist")
    found = {
        "python": "3.11.7",
        "onnx-ir": "0.1.12",
        "distributions": {
            "onnx_ir": {"version": "0.1.12", "import_error": None},
            "probe": {"version": "1.5", "import_error": None},
        },
    }
    assert with_requested(found) == {"python": "3.11.7", "onnx-ir": "0.1.12", "probe": "1.5"}
    assert with_requested({"error": "runtime_env failed"}) == {"error": "runtime_env failed"}


ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse avx avx2 fma avx512f avx512dq avx512_vnni avx512_bf16 sha_ni
processor\t: 1
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
"""


def test_two_cpus_of_one_brand_string_are_told_apart() -> None:
    zen4 = cpu_id(ZEN4)
    assert zen4 == "family 25 model 17 stepping 1 avx2 avx512f avx512_vnni avx512_bf16"
    zen5 = ZEN4.replace(": 25", ": 26").replace(": 17", ": 2").replace("sha_ni", "avx_vnni")
    assert (
        cpu_id(zen5) == "family 26 model 2 stepping 1 avx2 avx512f avx512_vnni avx512_bf16 avx_vnni"
    )
    arm = "processor\t: 0\nFeatures\t: fp asimd sve sve2 i8mm bf16\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
    assert cpu_id(arm) == "implementer 0x41 part 0xd4f sve sve2 i8mm bf16"
    assert cpu_id("") is None  # no /proc/cpuinfo: the manifest says nothing


def test_this_machines_manifest_names_its_cpu_identity() -> None:
    found = hardware()["cpu_id"]
    if sys.platform != "linux":
        assert found is None
    else:
        assert found.startswith(("family ", "implementer ")), found
