"""The zoo: what a model entry is (`ModelSpec`, the contract zoo files and plugins import),
what is expected of it, how entries are found, and the generators of the generated zoos.

    from harness.zoo import Expect, ModelSpec, Sample, SampleSet   # the plugin contract
    SPEC = checkpoint("./my-bert")   # a saved Hugging Face checkpoint, in one line

- spec.py: `ModelSpec`, `Sample`, `SampleSet`;
- expect.py: `Expect`, an expected outcome, and how a record is judged by it;
- expected_file.py: the CSV of expectations (expected/status.csv, a zoo's _expected.csv);
- expected.py: a generated zoo's expected failures, rewritten from a run (`harness zoo expected`);
- discovery.py: the built-in `model_zoo/`, `--zoo` paths and plugins, loaded into a `Zoo`;
- generated/: the ops, opinfo and transformers zoos' generators (`harness zoo refresh NAME`).

The zoo's contents (entry files, inventories, expected failures) live in `model_zoo/`.
"""

from __future__ import annotations

import os

from harness.zoo.expect import Expect
from harness.zoo.spec import ModelSpec, Sample, SampleSet

__all__ = ["Expect", "ModelSpec", "Sample", "SampleSet", "checkpoint"]


def checkpoint(location: str | os.PathLike[str], *, name: str | None = None) -> ModelSpec:
    """A zoo entry of a saved Hugging Face checkpoint (a `save_pretrained` directory, a repo
    id in the cache, or the Hub where the network allows), built by `from_pretrained` with
    its own weights, its class and inputs from its config's architecture; what `--models
    hf:PATH_OR_REPO` makes. A relative path is the working directory's: write
    `Path(__file__).parent / "my-bert"` for one beside the zoo file."""
    from model_zoo.transformers._checkpoint import checkpoint as entry

    return entry(location, name=name)
