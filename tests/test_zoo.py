"""Zoo tests generated from the registry: every entry builds, runs one forward, is
deterministic, and declares metadata the harness can use. Also: every suite file loads
and selects models."""

from __future__ import annotations

import collections
import fnmatch
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch
from torch.utils import _pytree as pytree

from harness.exporters import NAMES as EXPORTERS
from harness.plan import suites
from harness.zoo import ModelSpec, discovery

ZOO = discovery.discover(entry_points=False)
# Sampled entries (the opinfo family: ~2000 OpInfos at a dtype) are many small models
# each; tests/coverage/test_opinfo.py checks them as a family.
SAMPLED = sorted(n for n, s in ZOO.models.items() if s.samples is not None)
MODELS = sorted(set(ZOO.models) - set(SAMPLED))
# The generated transformers zoos (hundreds of model types, LM heads and task heads,
# model_zoo/transformers/) are tested by samples in tests/test_transformers_zoo.py,
# tests/test_transformers_decode.py and tests/test_transformers_tasks.py; their full sweeps
# are benchmarks (benchmarks/test_transformers_sweep.py, test_transformers_decode.py,
# test_transformers_tasks.py). Their metadata is checked here like any other.
GENERATED_FAMILIES = {"transformers", "transformers-decode", "transformers-tasks"}
# The real-size zoo (model_zoo/real_size/: up to 1.5 B parameters) is tested in
# tests/test_real_size.py: every entry on the meta device, a few for real.
REAL_SIZE = {"real-size", "real-size-xl", "real-size-decode"}
HAND_WRITTEN = [n for n in MODELS if ZOO.get(n).family not in {*GENERATED_FAMILIES, *REAL_SIZE}]
# Only what this machine can build is parametrized (nothing is skipped): models whose
# libraries do not import here (torchvision) and the 2 GB model are checked elsewhere
# (tests/test_adapters.py, where their cells must come out `skipped` or ok).
TOO_LARGE_TAG = "large"
BUILDABLE = [
    n
    for n in HAND_WRITTEN
    if not ZOO.get(n).missing_requirement() and TOO_LARGE_TAG not in ZOO.get(n).tags
]
DYNAMIC = [n for n in HAND_WRITTEN if ZOO.get(n).dynamic_shapes is not None]
DYNAMIC_BUILDABLE = [n for n in BUILDABLE if n in DYNAMIC]
REQUIRED = {"vision": 10, "nlp": 8, "audio": 4, "seed": 8}
SMOKE = {"mlp_sigmoid", "sum_module"}


def _spec_to_run(name: str) -> ModelSpec:
    return ZOO.get(name)


def test_models_this_machine_cannot_build_say_why() -> None:
    unbuildable = [ZOO.get(n) for n in HAND_WRITTEN if n not in BUILDABLE]
    for spec in unbuildable:
        assert spec.missing_requirement() or TOO_LARGE_TAG in spec.tags
    assert len(BUILDABLE) >= sum(REQUIRED.values())


def _run(spec: ModelSpec) -> list[torch.Tensor]:
    """Build and run one forward exactly as the harness does: seeded build and inputs, eval."""
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    args = spec.example_inputs()
    kwargs = spec.example_kwargs() if spec.example_kwargs else {}
    with torch.no_grad():
        out = model(*args, **kwargs)
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _tensors_with_axes(
    inputs: Any, spec: Any, where: str
) -> Iterator[tuple[str, torch.Tensor, Any]]:
    """Walk inputs and dynamic_shapes together: (where, tensor, {axis: name} or None)."""
    if isinstance(inputs, torch.Tensor):
        assert spec is None or isinstance(spec, dict), (
            f"{where}: a tensor needs {{axis: name}} or None"
        )
        yield where, inputs, spec
    elif isinstance(inputs, dict):
        assert spec is None or (isinstance(spec, dict) and set(spec) == set(inputs)), (
            f"{where}: dynamic_shapes must have the dict input's keys {sorted(inputs)}"
        )
        for key, value in inputs.items():
            yield from _tensors_with_axes(
                value, None if spec is None else spec[key], f"{where}[{key!r}]"
            )
    elif isinstance(inputs, list | tuple):
        assert spec is None or (isinstance(spec, list | tuple) and len(spec) == len(inputs)), (
            f"{where}: dynamic_shapes must have one entry per element ({len(inputs)})"
        )
        for i, value in enumerate(inputs):
            yield from _tensors_with_axes(value, None if spec is None else spec[i], f"{where}[{i}]")
    else:
        assert spec is None, f"{where}: a non-tensor input cannot have dynamic dimensions"


def test_zoo_loads_without_problems() -> None:
    assert ZOO.problems == ()


def test_required_families_are_populated() -> None:
    counts = collections.Counter(spec.family for spec in ZOO.models.values())
    for family, minimum in REQUIRED.items():
        assert counts[family] >= minimum, (
            f"family {family!r} has {counts[family]} models, needs {minimum}"
        )


def test_names_are_unique_across_files() -> None:
    # discover() refuses duplicates; check the files directly too, so a clash is named here.
    names = [
        s.name for f in discovery.zoo_files(discovery.BUILTIN_ZOO) for s in discovery.load_file(f)
    ]
    assert len(names) == len(set(names)), [
        n for n, c in collections.Counter(names).items() if c > 1
    ]


def test_smoke_tag_marks_the_few_smallest_models() -> None:
    smoke = {s.name for s in ZOO.select(["tag:smoke"])}
    assert smoke >= SMOKE and len(smoke) == 3
    assert any("cnn" in ZOO.get(name).tags for name in smoke - SMOKE)


def _by_file(names: list[str]) -> dict[str, list[str]]:
    """The entries of each zoo file, by the file's path under the repository."""
    files: dict[str, list[str]] = collections.defaultdict(list)
    for name in names:
        files[_relative(ZOO.get(name).source)].append(name)
    return dict(sorted(files.items()))


def _relative(source: str) -> str:
    return source.split("/model_zoo/", 1)[-1] if "/model_zoo/" in source else source


ZOO_FILES = _by_file(MODELS)


@pytest.mark.parametrize("source", ZOO_FILES)
def test_metadata(source: str) -> None:
    """Every entry of the zoo file declares metadata the harness can use; the failure lists
    each bad entry with what is wrong with it."""
    bad = {name: problems for name in ZOO_FILES[source] if (problems := _metadata_problems(name))}
    assert not bad, "\n".join(f"{name}: {'; '.join(found)}" for name, found in bad.items())


def _metadata_problems(name: str) -> list[str]:
    spec = ZOO.get(name)
    problems = []
    if spec.family not in spec.tags:
        problems.append("tags start from the family")
    if len(spec.tags) < 2:
        problems.append("tags name the family and the kind of model")
    if not spec.description or "\n" in spec.description:
        problems.append("a description of one line")
    for expect in spec.expect:
        if not expect.reason:
            problems.append(f"expectation {expect.describe()} needs a reason")
        if expect.status is None or expect.stage is None:
            problems.append(f"the expectation for {expect.exporter} names no status and stage: "
                            "say which failure is expected")  # fmt: skip
        if not any(fnmatch.fnmatchcase(e, expect.exporter) for e in EXPORTERS):
            problems.append(f"{expect.exporter!r} names no known exporter ({', '.join(EXPORTERS)})")
    if spec.tolerance is not None and not all(0 <= t < 1 for t in spec.tolerance):
        problems.append(f"tolerance {spec.tolerance} outside [0, 1)")
    return problems


def test_a_bad_entry_is_listed_with_what_is_wrong() -> None:
    """The metadata check names each problem (a test of the test: it can fail)."""
    good = ZOO.get(MODELS[0])
    bad = replace(good, tags=(good.family,), description="two\nlines", tolerance=(1.5, 0.0))
    ZOO.models["bad_entry_for_the_test"] = bad
    try:
        found = _metadata_problems("bad_entry_for_the_test")
    finally:
        del ZOO.models["bad_entry_for_the_test"]
    assert found == [
        "tags name the family and the kind of model",
        "a description of one line",
        "tolerance (1.5, 0.0) outside [0, 1)",
    ]
    assert not _metadata_problems(MODELS[0])


@pytest.mark.parametrize("name", BUILDABLE)
def test_forward_gives_finite_outputs(name: str) -> None:
    spec = _spec_to_run(name)
    outputs = _run(spec)
    assert outputs, "the model returns no tensor"
    for i, out in enumerate(outputs):
        # Architecture families return float tensors; one-op entries may return bool/int.
        if spec.family in REQUIRED:
            assert out.is_floating_point(), f"output {i} is {out.dtype}, not a float tensor"
        if out.is_floating_point():
            assert torch.isfinite(out).all(), f"output {i} has non-finite values"


@pytest.mark.parametrize("name", BUILDABLE)
def test_same_seed_same_outputs(name: str) -> None:
    spec = _spec_to_run(name)
    first, second = _run(spec), _run(spec)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", DYNAMIC)
def test_dynamic_shapes_mirror_the_inputs(name: str) -> None:
    spec = ZOO.get(name)
    torch.manual_seed(0)
    inputs = spec.example_inputs()
    assert isinstance(spec.dynamic_shapes, tuple), "one spec per positional input, as a tuple"
    assert len(spec.dynamic_shapes) == len(inputs)
    named: dict[str, int] = {}
    for where, tensor, axes in _tensors_with_axes(tuple(inputs), spec.dynamic_shapes, "inputs"):
        for axis, dim in (axes or {}).items():
            assert isinstance(axis, int) and 0 <= axis < tensor.dim(), f"{where}: no axis {axis}"
            assert isinstance(dim, str) and dim, f"{where}: axis {axis} needs a string name"
            assert tensor.shape[axis] >= 2, (
                f"{where}: torch.export specializes size {tensor.shape[axis]}"
            )
            assert named.setdefault(dim, tensor.shape[axis]) == tensor.shape[axis], (
                f"{where}: {dim!r} has two sizes"
            )
    assert named, "dynamic_shapes names no dimension"
    for dim, size in (spec.dynamic_sizes or {}).items():
        assert dim in named, f"dynamic_sizes names {dim!r}, which no input has"
        assert size >= 1, f"dynamic_sizes[{dim!r}] must be positive"


@pytest.mark.parametrize("name", DYNAMIC_BUILDABLE)
def test_model_runs_at_the_second_dynamic_shape(name: str) -> None:
    """The second verification shape (axis-0 dims -> 1, others halved, unless
    `dynamic_sizes` says otherwise) must be valid for the model in eager mode."""
    spec = _spec_to_run(name)
    torch.manual_seed(0)
    inputs = tuple(spec.example_inputs())
    sizes: dict[str, int] = {}
    for _, tensor, axes in _tensors_with_axes(inputs, spec.dynamic_shapes, "inputs"):
        for axis, dim in (axes or {}).items():
            sizes.setdefault(dim, 1 if axis == 0 else tensor.shape[axis] // 2)
    sizes.update(spec.dynamic_sizes or {})
    narrowed = _narrow(inputs, spec.dynamic_shapes, sizes)
    torch.manual_seed(0)
    model = spec.build().eval()
    kwargs = spec.example_kwargs() if spec.example_kwargs else {}
    with torch.no_grad():
        out = model(*narrowed, **kwargs)
    for t in pytree.tree_leaves(out):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            assert torch.isfinite(t).all()


def _narrow(inputs: Any, spec: Any, sizes: dict[str, int]) -> Any:
    if isinstance(inputs, torch.Tensor):
        for axis, dim in (spec or {}).items():
            inputs = inputs.narrow(axis, 0, sizes[dim])
        return inputs
    if isinstance(inputs, dict):
        return {k: _narrow(v, None if spec is None else spec[k], sizes) for k, v in inputs.items()}
    if isinstance(inputs, list | tuple):
        return type(inputs)(
            _narrow(v, None if spec is None else spec[i], sizes) for i, v in enumerate(inputs)
        )
    return inputs


@pytest.mark.parametrize("suite_name", suites.available_suites())
def test_suite_loads_and_selects_models(suite_name: str) -> None:
    suite = suites.load_suite(suite_name)
    assert suite.description
    assert ZOO.select(suite.models)
