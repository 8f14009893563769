"""Ray for one command: join a cluster or start a local instance, say what it is, stop it."""

from __future__ import annotations

import os
import shutil
from typing import Any

import ray
from ray import exceptions as ray_errors

from harness.dispatch import remote
from harness.dispatch.cluster import ClusterInfo, auth_hint
from harness.errors import UsageError
from harness.store.error_text import message_line

# Keep the object store small: records are a few KiB, and the default (30% of RAM)
# reserves shared memory the cells need.
OBJECT_STORE_BYTES = 256 * 1024 * 1024


def start(address: str | None, *, env_vars: dict[str, str] | None = None) -> ClusterInfo:
    """Join `address` (auto, HOST:PORT, ray://HOST:PORT) or start a local Ray instance."""
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": "ERROR",
        "runtime_env": {"env_vars": env_vars} if env_vars else None,
        "configure_logging": True,
    }
    if address:
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, ray_errors.RayError, ValueError) as exc:
            raise UsageError(
                f"--address {address}: cannot join the Ray cluster ({message_line(exc)}){auth_hint()}"
            ) from None
    else:
        # "local": a new instance even where `ray start` left a cluster running on this
        # machine (ray.init() would join that one, and refuse num_cpus).
        ray.init(
            address="local",
            num_cpus=os.cpu_count() or 1,
            object_store_memory=OBJECT_STORE_BYTES,
            **kwargs,
        )
    return cluster_info(address or "local")


def cluster_info(address: str) -> ClusterInfo:
    nodes = remote.nodes()
    resources = ray.cluster_resources()  # type: ignore[no-untyped-call]
    return ClusterInfo.of_ray(address, nodes, resources)


def stop() -> None:
    """Shut Ray down; a local instance started here also loses its runtime_env folder (a
    variant's pip environment clones this virtualenv, ~2 GB each). Its logs stay."""
    node = getattr(ray._private.worker, "_global_node", None)  # a head only when started here
    owned = node.get_runtime_env_dir_path() if node is not None and node.is_head() else None
    if ray.is_initialized():
        ray.shutdown()
    if owned:
        shutil.rmtree(owned, ignore_errors=True)
