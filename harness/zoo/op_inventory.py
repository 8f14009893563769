"""The op inventory as `harness zoo refresh ops` writes it (`model_zoo/ops/_inventory.json`,
harness.zoo.generated.ops): the zoo's ATen ops, each with the argument template of its
first call (harness.zoo.generated.one_op builds its one-op model from it) or why it has
none. Declared here, without torch, so that coverage reads it too."""

from __future__ import annotations

from typing import NotRequired, TypeAlias, TypedDict


class Leaf(TypedDict):
    """A tensor argument of a template: its shape, dtype and role in the real graph
    ("input", or "param" for a parameter, buffer or constant)."""

    shape: list[int]
    dtype: str
    role: str


# One argument's template (harness.zoo.generated.ops): {"tensor": Leaf}, {"dtype": name}
# (memory formats and layouts likewise), {"float": "inf"}; other values as themselves.
Template: TypeAlias = "bool | int | float | str | list[Template] | dict[str, Leaf | str] | None"


class FirstCall(TypedDict):
    model: str
    node: str


class OpEntry(TypedDict):
    """One op of the inventory that has a one-op model."""

    op: str
    name: str
    models: list[str]
    calls: int
    first_call: FirstCall
    args: list[Template]
    kwargs: dict[str, Template]
    outputs: NotRequired[list[int] | None]
    floats: NotRequired[str]


class SkippedOp(TypedDict):
    """One op of the inventory that has none, and why."""

    op: str
    reason: str | None
    models: list[str]
    calls: int


class Captured(TypedDict, total=False):
    """How a zoo model's capture went: its number of distinct ops, or the error."""

    ops: int
    error: str


class Inventory(TypedDict):
    schema: int
    about: str
    torch: str
    models: dict[str, Captured]
    ops: list[OpEntry]
    skipped: list[SkippedOp]
