"""The patch registry: the changes to transformers and torch that some export tools apply
around the export call (onnx-diagnostic, optimum, transformers' own exporters), each offered
as a named option, never applied unasked. A cell's `patch` (`--patches`, a suite's
`patches`) names the one it ran with; `none` is the user's plain call. A run with
`--patches none,NAME` shows, per model, whether it exports plain, only patched, or not at
all.

A `Patch` carries its name, what it changes and why, and the module that applies it (which
imports torch and transformers, so it is imported only in the cell). Planning validates
names against the registry without importing torch.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

NONE = "none"


@dataclass(frozen=True)
class Patch:
    name: str
    description: str
    implementation: str | None  # the module with `unavailable()` and `applied()`; None: no patch

    def unavailable(self) -> str | None:
        """Why this patch cannot be applied here (what it patches does not exist), or None."""
        if self.implementation is None:
            return None
        reason: str | None = importlib.import_module(self.implementation).unavailable()
        return reason

    def pointless(self, metadata: Mapping[str, object]) -> str | None:
        """Why the patch would change nothing for a model, known from its zoo entry's
        metadata (a patch of sliding-window cache layers, for a cache without one): its
        cells are skipped with the reason, the plain cell says it all. None: it may matter."""
        module = importlib.import_module(self.implementation) if self.implementation else None
        check = getattr(module, "pointless", None)
        return check(metadata) if check is not None else None

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The patch in place for the duration of the block, undone after."""
        if self.implementation is None:
            yield
            return
        with importlib.import_module(self.implementation).applied():
            yield


REGISTRY: dict[str, Patch] = {
    p.name: p
    for p in (
        Patch(NONE, "no patch: the user's plain export call", None),
        Patch(
            "sliding-window",
            "sliding-window cache layers read their length from their tensors, not from a"
            " Python counter torch.export bakes in (right while the past is shorter than the"
            " window)",
            "harness.exporters.patches.sliding_window",
        ),
        Patch(
            "transformers-exporters",
            "the patches transformers' own exporters install around torch.export and"
            " torch.onnx.export (transformers.exporters.utils.apply_patches, dynamo + onnx)",
            "harness.exporters.patches.transformers_exporters",
        ),
    )
}
NAMES = tuple(REGISTRY)


def get(name: str) -> Patch:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown patch {name!r} (known: {', '.join(NAMES)})") from None
