"""The TorchScript exporter docs' "unsupported tensor indexing patterns", one model per pattern.

Measured with torch 2.13: the rank-2 and negative-index writes now export correctly (no
expectation), the other three still fail with both TorchScript flavours; dynamo handles all.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec

# Index tensors are written inside forward(), as in the docs, so they become graph constants.


class NegativeRead(nn.Module):
    def forward(self, data: torch.Tensor) -> torch.Tensor:
        return data[torch.tensor([[1, 2], [2, -3]]), torch.tensor([-2, 3])]


class PutRank2(nn.Module):
    def forward(self, data: torch.Tensor, new_data: torch.Tensor) -> torch.Tensor:
        data = data.clone()
        data[torch.tensor([[1, 2], [2, 3]]), torch.tensor([2, 3])] = new_data
        return data


class PutNonContiguous(nn.Module):
    def forward(self, data: torch.Tensor, new_data: torch.Tensor) -> torch.Tensor:
        data = data.clone()
        data[torch.tensor([2, 3]), :, torch.tensor([1, 2])] = new_data
        return data


class PutNegative(nn.Module):
    def forward(self, data: torch.Tensor, new_data: torch.Tensor) -> torch.Tensor:
        data = data.clone()
        data[torch.tensor([1, -2]), torch.tensor([-2, 3])] = new_data
        return data


class PutBroadcast(nn.Module):
    def forward(self, data: torch.Tensor, new_data: torch.Tensor) -> torch.Tensor:
        data = data.clone()
        data[torch.tensor([[0, 2], [1, 1]]), 1:3] = new_data  # new_data (F,) -> (2, 2, 2, F)
        return data


def _spec(
    name: str, model: type[nn.Module], inputs, dynamic_shapes, description: str, **extra
) -> ModelSpec:
    return ModelSpec(
        name=name,
        family="seed",
        build=model,
        example_inputs=inputs,
        dynamic_shapes=dynamic_shapes,
        tags=("seed", "indexing", "doc-example"),
        description=description,
        **extra,
    )


# Axis 0 is indexed by constants, so only a trailing "features" axis is dynamic.
SPECS = [
    _spec(
        "index_negative_read",
        NegativeRead,
        lambda: (torch.randn(4, 5, 6),),
        ({2: "features"},),
        "read data[[[1, 2], [2, -3]], [-2, 3]]: tensor indices with negative values",
        expect=(
            Expect(
                "torchscript*",
                status="numerics_mismatch",
                stage="numerics",
                reason="negative tensor indices in a multi-index read: the export runs but gives wrong values",
            ),
        ),
    ),
    _spec(
        "index_put_rank2",
        PutRank2,
        lambda: (torch.randn(4, 5, 6), torch.randn(2, 2, 6)),
        ({2: "features"}, {2: "features"}),
        "write data[[[1, 2], [2, 3]], [2, 3]] = v: several tensor indices, one of rank 2",
    ),
    _spec(
        "index_put_noncontiguous",
        PutNonContiguous,
        lambda: (torch.randn(4, 6, 5), torch.randn(2, 6)),
        ({1: "features"}, {1: "features"}),
        "write data[[2, 3], :, [1, 2]] = v: tensor indices that are not consecutive",
        expect=(
            Expect(
                "torchscript*",
                status="export_failed",
                stage="translate",
                reason="export error: only consecutive 1-d tensor indices are supported for aten::index_put",
            ),
        ),
    ),
    _spec(
        "index_put_negative",
        PutNegative,
        lambda: (torch.randn(4, 5, 6), torch.randn(2, 6)),
        ({2: "features"}, {1: "features"}),
        "write data[[1, -2], [-2, 3]] = v: tensor indices with negative values",
    ),
    _spec(
        "index_put_broadcast",
        PutBroadcast,
        lambda: (torch.randn(3, 4, 6), torch.randn(6)),
        ({2: "features"}, {0: "features"}),
        "write data[[[0, 2], [1, 1]], 1:3] = v: v needs implicit broadcasting",
        # "features" sits on axis 0 of new_data: say its second size instead of the default 1.
        dynamic_sizes={"features": 3},
        expect=(
            Expect(
                "torchscript*",
                status="ort_run_failed",
                stage="ort_run",
                reason="index_put needing an implicit broadcast of the value: the exported Reshape fails "
                "in ONNX Runtime",
            ),
        ),
    ),
]
