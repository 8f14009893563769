"""A checkpoint by name (`--models hf:PATH_OR_REPO`, model_zoo/transformers/_checkpoint.py):
the entry a saved checkpoint makes, and every way it cannot be one: exit 2, one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.conftest import one_line_error
from tests.zoo_fixtures.checkpoint.from_config import built


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT classifier saved as a user saves one (`save_pretrained`)."""
    torch.manual_seed(0)
    where = tmp_path_factory.mktemp("ckpt") / "tiny-bert"
    built().save_pretrained(where)
    return where


def test_a_saved_checkpoint_is_an_entry_named_after_its_folder(saved: Path) -> None:
    from harness.zoo.discovery import checkpoint_spec, load_source

    spec = checkpoint_spec(str(saved))
    assert spec.name == "hf.tiny-bert" and spec.family == "checkpoint"
    assert spec.metadata["class"] == "BertForSequenceClassification"
    assert spec.input_names == ("input_ids", "attention_mask")  # the task heads' recipe
    assert spec.metadata["parameter_bytes"] == (saved / "model.safetensors").stat().st_size
    assert spec.source == f"checkpoint:{saved}"
    (again,) = load_source(spec.source)  # as a worker loads it
    assert again.name == spec.name and again.input_names == spec.input_names


def test_the_entry_builds_the_checkpoints_own_weights(saved: Path) -> None:
    from harness.zoo.discovery import checkpoint_spec

    model = checkpoint_spec(str(saved)).build()
    torch.manual_seed(0)
    reference = built()
    mine = dict(model.model.named_parameters())
    assert all(torch.equal(mine[n], p) for n, p in reference.named_parameters())


def _broken(tmp_path: Path, config: dict | None) -> Path:
    where = tmp_path / "broken"
    where.mkdir()
    if config is not None:
        (where / "config.json").write_text(json.dumps(config))
    return where


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "has no config.json"),
        ({"model_type": "bert"}, "config.json names no architecture"),
        (
            {"model_type": "bert", "architectures": ["BertForTimeTravel"]},
            "has no class BertForTimeTravel (its config's architecture): upgrade transformers",
        ),
    ],
)
def test_a_checkpoint_that_cannot_be_an_entry_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: dict | None, message: str
) -> None:
    where = _broken(tmp_path, config)
    line = one_line_error(capsys, "run", "--models", f"hf:{where}", "--out", str(tmp_path / "r"))
    assert message in line and str(where) in line
    assert not (tmp_path / "r").exists()


def test_a_repo_id_neither_cached_nor_reachable_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline (HF_HUB_OFFLINE, as this machine is: no Hub), a repo id not in the cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    line = one_line_error(capsys, "run", "--models", "hf:no-such-org/no-such-model")
    assert "hf:no-such-org/no-such-model: no such directory, not in the Hugging Face cache" in line


def test_a_model_named_beside_a_suite_runs_even_outside_it(tmp_path: Path) -> None:
    """`--suite smoke --zoo DIR --models A,X` with X of the zoo path but not of the suite:
    X runs (it was dropped without a word)."""
    from harness.plan.build import RunOptions, make_plan

    fixtures = Path(__file__).resolve().parents[1] / "zoo_fixtures" / "tiny"
    options = RunOptions(
        suite="smoke",
        zoo=(str(fixtures),),
        models=("mlp_sigmoid", "tiny_mlp"),
        out=str(tmp_path / "r"),
    )
    plan = make_plan(options)
    assert {c.model for c in plan.matrix.cells} == {"mlp_sigmoid", "tiny_mlp"}


def test_a_zoo_file_declares_a_checkpoint_in_one_line(saved: Path, tmp_path: Path) -> None:
    from harness.zoo.discovery import discover

    zoo_file = tmp_path / "mine.py"
    zoo_file.write_text(
        f"from harness.zoo import checkpoint\nSPEC = checkpoint({str(saved)!r}, name='my_bert')\n"
    )
    spec = discover([zoo_file], builtin=False, entry_points=False).get("my_bert")
    assert spec.metadata["class"] == "BertForSequenceClassification"
    assert spec.source == str(zoo_file.resolve())  # a worker imports the file again
