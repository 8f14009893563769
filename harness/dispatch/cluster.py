"""The Ray cluster a run uses and the environment a variant's workers get, as plain data:
no Ray here (`session` and `remote` hand it what Ray reports, the tests hand-made values)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from harness.dispatch.policy import DispatchStats, Options, RayNode, Slots
from harness.store.paired import PairResult, PairTask
from harness.store.records import CellTask, Record

# What a worker's version probe answers: package -> version (None: not installed); with
# distributions asked, "distributions" -> each one's {version, import_error}; or the
# probe's {"error"}.
VersionProbe = dict[str, str | dict[str, dict[str, str | None]] | None]

# A variant's pip environment as Ray's runtime_env takes it (`runtime_env`).
RuntimeEnv = dict[str, list[str] | dict[str, list[str]]]


class NodeInfo(TypedDict):
    """A node of the cluster, as the manifest records it."""

    node_id: str
    host: str | None
    address: str | None
    alive: bool | None
    resources: dict[str, float]


@dataclass(frozen=True)
class ClusterInfo:
    """The Ray cluster a run uses, as the manifest records it."""

    address: str
    nodes: list[NodeInfo]
    resources: dict[str, float]

    @classmethod
    def of_ray(
        cls, address: str, nodes: list[RayNode], resources: Mapping[str, float]
    ) -> ClusterInfo:
        """From `ray.nodes()` and `ray.cluster_resources()` (node-id resources left out)."""
        described: list[NodeInfo] = [
            {
                "node_id": n["NodeID"],
                "host": n.get("NodeManagerHostname"),
                "address": n.get("NodeManagerAddress"),
                "alive": n.get("Alive"),
                "resources": {
                    k: v for k, v in n.get("Resources", {}).items() if not k.startswith("node:")
                },
            }
            for n in nodes
        ]
        total = {k: v for k, v in resources.items() if not k.startswith("node:")}
        return cls(address, described, total)

    @property
    def has_gpus(self) -> bool:
        return self.resources.get("GPU", 0) > 0

    def slots(self, threads: int) -> Slots:
        """How many cells its alive nodes run at once, per resource."""
        return Slots.of_nodes((n["resources"] for n in self.nodes if n["alive"]), threads)


RunTasks = Callable[[Iterable[CellTask], Callable[[Record], None], Options], DispatchStats]


@dataclass(frozen=True)
class Runner:
    """Where a run's cells go: a Ray instance (`harness.dispatch.driver.runner`) or this
    machine without Ray (`harness.dispatch.local.runner`), as the pipeline uses either.
    `versions` gives the package versions of each variant's environment (with the
    distributions named, theirs too); `node_versions`, the base environment's per node."""

    cluster: ClusterInfo
    run_tasks: RunTasks
    versions: Callable[[dict[str, tuple[str, ...]], tuple[str, ...]], dict[str, VersionProbe]]
    node_versions: Callable[[list[str]], dict[str, VersionProbe]]
    # two graphs timed together, each pair's result as it comes (harness compare, and the
    # run's exporter pairs)
    time_pairs: Callable[[Iterable[PairTask], Callable[[PairResult], None]], None]


def auth_hint() -> str:
    if os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        "; if it runs and was started with `ray start` (Ray >= 2.59), it wants token"
        " authentication: set RAY_AUTH_MODE=token here too, with its token in RAY_AUTH_TOKEN"
        " or ~/.ray/auth_token"
    )


# Ray's own default options of the pip it runs, which `pip_install_options` replaces.
RAY_PIP_OPTIONS = ("--disable-pip-version-check", "--no-cache-dir")


def runtime_env(pip_specs: tuple[str, ...]) -> RuntimeEnv | None:
    """A variant's packages as Ray's pip runtime_env; entries starting with `-` are options
    of that pip (`--no-index`, `--find-links=DIR`, `--index-url=URL`, `--pre`)."""
    packages = [s for s in pip_specs if not s.startswith("-")]
    if not packages:
        return None
    options = [s for s in pip_specs if s.startswith("-")]
    if not options:
        return {"pip": packages}
    return {"pip": {"packages": packages, "pip_install_options": [*RAY_PIP_OPTIONS, *options]}}
