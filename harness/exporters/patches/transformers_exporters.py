"""`transformers-exporters`: the patches transformers' own exporters install around
`torch.export` and `torch.onnx.export` (`transformers.exporters.utils.apply_patches`, for the
`dynamo` and `onnx` backends: sliding-window layers traced as full ones, attention routed
through the math kernel on CPU, torch ops swapped for forms the ONNX exporter lowers, and an
FX clean-up hooked into the ONNX exporter's preparation of the program). They are the
installed transformers' own code, applied as that library applies them, nothing copied;
the rest of its exporter (its signature rewriting, its custom translations, its fixes of
the ONNX graph) is not applied: the cell still makes the user's `torch.onnx.export` call.
Only in a transformers that has `transformers.exporters` (5.13 and later)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

BACKENDS = ("dynamo", "onnx")


def unavailable() -> str | None:
    try:
        # Importing the exporter modules registers their patches.
        import transformers.exporters.exporter_dynamo
        import transformers.exporters.exporter_onnx  # noqa: F401
        from transformers.exporters.utils import apply_patches  # noqa: F401
    except ImportError as exc:
        return f"this transformers has no exporters with patches to apply ({exc})"
    return None


@contextlib.contextmanager
def applied() -> Iterator[None]:
    import transformers.exporters.exporter_dynamo
    import transformers.exporters.exporter_onnx  # noqa: F401 - registers the onnx patches
    from transformers.exporters.utils import apply_patches

    with contextlib.ExitStack() as stack:
        for backend in BACKENDS:
            stack.enter_context(apply_patches(backend))
        yield
