"""The matrix's axes, declared once: what a cell names besides its model and exporter.

Each `Axis` says what its value is (type and default), how a cell's id and label show it,
what a record and the history call it, the expected file's column, and the report's and
the site's name for it. The cell's key, id and label, the record's fields and validator,
matrix expansion and its announcement, the run's flags and suite keys (for the list axes),
expectations and the expected files, the ratchet's grouping, the report's columns, the
site's sub-cells and the history's columns all iterate `AXES`, so a new axis is one row
here plus the stage code that uses its value. A record that lacks an axis (written before
it existed) reads as the axis's default: no schema bump.

The first four axes expand in ways of their own (opsets per exporter, the devices, the
static and dynamic shapes a model declares, the `--variant` package sets); the others are
*list axes*: a flag and a suite key naming the values to run, validated against the known
ones, the default where neither names any (`LIST_AXES`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar


class Dtype(StrEnum):
    """The floating dtype a cell casts the model and its floating inputs to (`--dtypes`);
    float32 is the zoo's own. `tolerance` is torch's `assert_close` default for the dtype,
    the export-fidelity gate of a reduced-precision cell (docs/design.md)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"

    @property
    def reduced(self) -> bool:
        return self is not Dtype.FLOAT32

    @property
    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol) of torch.testing.assert_close for this dtype."""
        return _ASSERT_CLOSE[self]


class OrtOpt(StrEnum):
    """How ONNX Runtime optimises the exported graph before the cell judges and times it
    (`--ort-opt`): `default`, a session as a user opens one (ORT's online optimisations at
    ORT_ENABLE_ALL, nothing written); `none`, the graph as exported (ORT_DISABLE_ALL);
    `all`, ORT_ENABLE_ALL written out (`optimized_model_filepath`) and that file judged;
    `fusions`, onnxruntime.transformers' optimizer (its fused transformer ops)."""

    DEFAULT = "default"
    NONE = "none"
    ALL = "all"
    FUSIONS = "fusions"


_ASSERT_CLOSE = {
    Dtype.FLOAT32: (1.3e-6, 1e-5),
    Dtype.FLOAT16: (1e-3, 1e-5),
    Dtype.BFLOAT16: (1.6e-2, 1e-5),
}

NO_PATCH = "none"  # the plain export call: no patch (harness.exporters.patches)
ANY = "*"  # an expectation's glob that selects every value

V = TypeVar("V")


def _nothing(value: object) -> str:
    return ""


@dataclass(frozen=True)
class Axis(Generic[V]):
    """One axis of the matrix.

    `kind` is what a record holds (its validator's type) and `parse` reads a value from
    its text (a flag, a suite file, an expected file, the history). `id_part` and
    `label_part` are the fragments of the cell's id and label ("" where the value adds
    nothing: the default), `label_rank` the fragment's place in the label. `column` is the
    expected file's column and the history's, `title` the report's and the site's name.
    An expectation that names no value of the axis selects any value (`any_by_default`),
    or only the default (an expectation is about the cells it was written for)."""

    name: str
    kind: Any
    default: V
    parse: Callable[[str], V]
    title: str
    id_part: Callable[[V], str]
    label_part: Callable[[V], str] = _nothing
    label_rank: int = 0
    column: str = ""
    # The report's columns: where the axis's value stands in a column's label (None: never,
    # the rows hold it) when the run has several, and the label's fragment ("" shows
    # nothing; None: the cell label's fragment).
    column_rank: int | None = None
    column_part: Callable[[V], str] | None = None
    any_by_default: bool = True
    pinned: bool = True  # the ratchet's exact rows name its value (False: `*` over it)
    # The values it knows (None: any), as globs name them: a flag or a glob naming another
    # is refused. A list axis: the `harness run` flag and the suite file's and options' key
    # naming its values, and what the flag's help says.
    known: Callable[[], tuple[str, ...]] | None = None
    flag: str | None = None
    plural: str | None = None
    help: str = ""
    many: str = ""  # the announcement's name for several values: "2 dtypes (...)"

    @property
    def key_column(self) -> str:
        return self.column or self.name

    def column_text(self, value: V) -> str:
        """The value as the report's column labels and the site's sub-cells show it."""
        return (self.column_part or self.label_part)(value)

    def text(self, value: V) -> str:
        """The value as the expected file, a glob and the history's text write it."""
        return str(int(value)) if isinstance(value, bool) else str(value)

    def glob_text(self, value: V) -> str:
        """The value as an expectation's glob matches it."""
        return str(value)

    def coerce(self, value: object) -> V:
        """A value given as text or as itself, as the record holds it."""
        return self.parse(value) if isinstance(value, str) else value  # type: ignore[return-value]

    def expectation_default(self) -> str:
        return ANY if self.any_by_default else self.glob_text(self.default)

    def json(self, value: V) -> object:
        """The value as `records.jsonl` holds it."""
        return value.value if isinstance(value, StrEnum) else value


def _shape_glob(value: bool) -> str:
    return "dynamic" if value else "static"


class _ShapeAxis(Axis[bool]):
    """Static or dynamic: a boolean in the record, `static`/`dynamic` in globs and ids."""

    def glob_text(self, value: bool) -> str:
        return _shape_glob(value)


OPSET: Axis[int] = Axis(
    "opset", int, 0, int, "opset", lambda v: f"--op{v}", lambda v: f"@{v}", 0, column_rank=3
)
DEVICE: Axis[str] = Axis(
    "device", str, "cpu", str, "device", lambda v: f"--{v}", lambda v: f" {v}", 1, column_rank=0
)
DYNAMIC: Axis[bool] = _ShapeAxis(
    "dynamic", bool, False, lambda s: s in ("dynamic", "1", "true", "True"), "shapes",
    lambda v: f"--{_shape_glob(v)}", lambda v: " dynamic" if v else "", 3, column="shape",
    column_part=lambda v: f" {_shape_glob(v)}", pinned=False, known=lambda: ("static", "dynamic"),
)  # fmt: skip
VARIANT: Axis[str] = Axis(
    "variant", str, "base", str, "variant", lambda v: f"--{v}",
    lambda v: "" if v == "base" else f" [{v}]", 4, column_rank=4, pinned=False,
)  # fmt: skip
PATCH: Axis[str] = Axis(
    "patch", str, NO_PATCH, str, "patch", lambda v: "" if v == NO_PATCH else f"--patch-{v}",
    lambda v: "" if v == NO_PATCH else f" [patch {v}]", 5, column_rank=5,
    flag="--patches", plural="patches", many="patches",  # known: the registry (plan.suites)
    help="export-time patches, each a value of the cells' patch axis: none (the plain call)"
    " and/or patches `harness list` names",
)  # fmt: skip
DTYPE: Axis[Dtype] = Axis(
    "dtype", Dtype, Dtype.FLOAT32, Dtype, "dtype",
    lambda v: f"--{v}" if v.reduced else "", lambda v: f" {v}" if v.reduced else "", 2,
    column_rank=1, column_part=lambda v: f" {v}", any_by_default=False, flag="--dtypes", plural="dtypes", many="dtypes",
    known=lambda: tuple(Dtype),
    help="the floating dtypes the models and their inputs are cast to, each a value of the"
    " cells' dtype axis: float32, float16, bfloat16; a reduced one is judged against eager"
    " at the dtype and the float32 model",
)  # fmt: skip
ORT_OPT: Axis[OrtOpt] = Axis(
    "ort_opt", OrtOpt, OrtOpt.DEFAULT, OrtOpt, "ORT optimisation",
    lambda v: "" if v is OrtOpt.DEFAULT else f"--ort-{v}",
    lambda v: "" if v is OrtOpt.DEFAULT else f" [ort {v}]", 6,
    column_rank=2, column_part=lambda v: f" [ort {v}]", any_by_default=False, flag="--ort-opt", plural="ort_opts", many="ORT optimisations",
    known=lambda: tuple(OrtOpt),
    help="how ONNX Runtime optimises each graph before it is judged and timed, each a value"
    " of the cells' ORT-optimisation axis: default (a session as a user opens one), none"
    " (ORT_DISABLE_ALL), all (ORT_ENABLE_ALL written out and that file judged), fusions"
    " (onnxruntime.transformers' fused ops)",
)  # fmt: skip


def _batch_size(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError("a batch size is a whole number, 0 for the entry's own example")
    return int(text)


BATCH: Axis[int] = Axis(
    "batch", int, 0, _batch_size, "batch size", lambda v: f"--batch{v}" if v else "",
    lambda v: f" batch {v}" if v else "", 7, column_rank=6,
    flag="--batches", plural="batches", many="batch sizes",
    help="the batch sizes the inputs are resized to along the entry's `batch` dimension, each"
    " a value of the cells' batch axis (0: the entry's own example; an entry that declares"
    " no batch dimension is skipped at any other)",
)  # fmt: skip

# In the key's order (and the cell id's, and the expected file's optional columns').
AXES: tuple[Axis[Any], ...] = (OPSET, DEVICE, DYNAMIC, VARIANT, PATCH, DTYPE, ORT_OPT, BATCH)
LIST_AXES: tuple[Axis[Any], ...] = tuple(a for a in AXES if a.flag is not None)
BY_NAME: Mapping[str, Axis[Any]] = {a.name: a for a in AXES}


def label_order() -> Iterator[Axis[Any]]:
    """The axes in the order the cell's label shows them."""
    return iter(sorted(AXES, key=lambda a: a.label_rank))


def column_order() -> tuple[Axis[Any], ...]:
    """The axes a report's column holds, in the order its label shows them (the rows hold
    the rest: the shapes)."""
    return tuple(sorted((a for a in AXES if a.column_rank is not None), key=_column_rank))


def _column_rank(axis: Axis[Any]) -> int:
    return axis.column_rank if axis.column_rank is not None else len(AXES)


def value_rank(axis: Axis[Any], value: object) -> tuple[Any, ...]:
    """Where a value sorts among the axis's: the default first, then the known values in
    their order, then by value."""
    known = axis.known() if axis.known else ()
    text = axis.glob_text(value)
    return (value != axis.default, known.index(text) if text in known else len(known), value)
