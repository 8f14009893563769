"""`--threads` more than any node has: cells that would wait for ever are exit 2, in the
words of where the run would go (this machine for `--local`, else the Ray cluster's
nodes). Ray's node is described as `ray.nodes()` gives it; no Ray is started."""

from __future__ import annotations

import pytest

from harness.dispatch import local
from harness.dispatch.cluster import ClusterInfo
from harness.errors import UsageError
from harness.pipeline.execute import _check_threads


def _cluster(address: str) -> ClusterInfo:
    node = {**local.this_node(), "Resources": {"CPU": 2.0}}
    return ClusterInfo.of_ray(address, [node], node["Resources"])


@pytest.mark.parametrize(
    ("address", "message"),
    [
        (local.ADDRESS, "--threads 3: this machine has 2 CPUs"),
        ("10.0.0.7:6379", "--threads 3: no node of the Ray cluster has 3 CPUs (the largest has 2)"),
    ],
)
def test_threads_no_node_holds_say_where(address: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        _check_threads(_cluster(address), 3)
    assert str(info.value) == message
    _check_threads(_cluster(address), 2)  # what fits runs
