"""The cluster and a variant's environment as plain data (harness/dispatch/cluster.py)."""

from __future__ import annotations

from harness.dispatch.cluster import ClusterInfo, runtime_env
from harness.dispatch.policy import Slots


def test_the_cluster_counts_only_alive_nodes() -> None:
    nodes = [
        {"node_id": "a", "alive": True, "resources": {"CPU": 2.0, "GPU": 1.0}},
        {"node_id": "b", "alive": False, "resources": {"CPU": 8.0, "GPU": 4.0}},
    ]
    cluster = ClusterInfo("local", nodes, {"CPU": 2.0, "GPU": 1.0})
    assert cluster.slots(1) == Slots(cpu=2, gpu=1)
    assert cluster.has_gpus


# -- a variant's runtime_env -----------------------------------------------------------------


def test_a_variants_packages_become_rays_pip_list() -> None:
    assert runtime_env(()) is None
    assert runtime_env(("onnxscript==0.6.2", "onnx==1.19")) == {
        "pip": ["onnxscript==0.6.2", "onnx==1.19"]
    }


def test_pip_options_of_a_variant_go_to_pip_install_options_after_rays_defaults() -> None:
    env = runtime_env(("probe==1.3", "--no-index", "--find-links=/wheels"))
    assert env == {
        "pip": {
            "packages": ["probe==1.3"],
            "pip_install_options": [
                "--disable-pip-version-check",
                "--no-cache-dir",
                "--no-index",
                "--find-links=/wheels",
            ],
        }
    }
    assert runtime_env(("--no-index",)) is None  # options without packages install nothing
