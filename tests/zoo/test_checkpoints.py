"""A checkpoint by name (`--models hf:PATH_OR_REPO`, model_zoo/transformers/_checkpoint.py):
the entry a saved checkpoint makes, and every way it cannot be one: exit 2, one line."""

from __future__ import annotations

import json
import shutil
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
    assert spec.name == "ckpt.tiny-bert" and spec.family == "checkpoint"
    assert spec.metadata["class"] == "BertForSequenceClassification"
    assert spec.input_names == ("input_ids", "attention_mask")  # the task heads' recipe
    weights = sum(p.numel() for p in built().state_dict().values())
    assert spec.metadata["parameter_bytes"] == 4 * weights  # float32, from the file's header
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


def _broken(tmp_path: Path, config: dict | list | None) -> Path:
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
        ([1, 2], "config.json is not a JSON object"),
        (
            {"model_type": "bert", "architectures": "BertModel"},
            "config.json's architectures is a string, not a list of class names",
        ),
        (
            {"model_type": "bert", "architectures": ["BertTokenizer"]},
            "config.json's architecture BertTokenizer is not a model class",
        ),
        ({"model_type": "bert", "architectures": ["BertModel"]}, "holds no weights"),
    ],
)
def test_a_checkpoint_that_cannot_be_an_entry_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: dict | list | None, message: str
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


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "model.safetensors.index.json names model-00002-of-00002.safetensors, not in"),
        ("truncated", "model-00001-of-00002.safetensors is not a safetensors file"),
        ("index", "model.safetensors.index.json is not a weights index"),
    ],
)
def test_a_missing_or_broken_shard_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, damage: str, message: str
) -> None:
    """Found when the run is planned (the shards' index and headers), not as a cell's
    failure that would read as the harness's."""
    where = tmp_path / "sharded"
    torch.manual_seed(0)
    built().save_pretrained(where, max_shard_size="100KB")
    shards = sorted(where.glob("*.safetensors"))
    assert len(shards) == 2, shards
    if damage == "missing":
        shards[1].unlink()
    elif damage == "truncated":
        shards[0].write_bytes(shards[0].read_bytes()[:4])
    else:  # a traceback (JSONDecodeError) before
        index = where / "model.safetensors.index.json"
        index.write_text(index.read_text()[:30])
    capsys.readouterr()  # save_pretrained's progress bar
    line = one_line_error(capsys, "run", "--models", f"hf:{where}", "--out", str(tmp_path / "r"))
    assert message in line


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("", "hf: names no checkpoint: give a save_pretrained directory or a repo id"),
        ("./no-such-folder", "hf:./no-such-folder: no such directory"),
        ("~nobody-here/bert", "hf:~nobody-here/bert: no such directory"),  # a traceback before
    ],
)
def test_a_location_that_names_nothing_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, location: str, message: str
) -> None:
    line = one_line_error(capsys, "run", "--models", f"hf:{location}", "--out", str(tmp_path / "r"))
    assert line.endswith(message) or message in line


def test_two_folders_of_one_name_are_one_line(
    capsys: pytest.CaptureFixture[str], saved: Path, tmp_path: Path
) -> None:
    """Both would be the model ckpt.tiny-bert: the second would stand for the first."""
    other = tmp_path / "elsewhere" / "tiny-bert"
    torch.manual_seed(1)
    built().save_pretrained(other)
    capsys.readouterr()  # save_pretrained's progress bar
    models = f"hf:{saved},hf:{other}"
    line = one_line_error(capsys, "run", "--models", models, "--out", str(tmp_path / "r"))
    assert f"hf:{other} and {saved} are both the model ckpt.tiny-bert" in line


def test_a_local_checkpoint_is_kept_by_its_absolute_path_and_named_after_its_folder(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hf:.` inside the folder and `hf:~/...` name the folder's entry, and the run keeps
    the absolute path (repro and debt from another folder find it)."""
    from harness.zoo.discovery import checkpoint_spec, located

    monkeypatch.chdir(saved)
    monkeypatch.setenv("HOME", str(saved.parent))
    assert located(("hf:.", "hf:~/tiny-bert", "bert*", "hf:org/name")) == (
        f"hf:{saved}", f"hf:{saved}", "bert*", "hf:org/name",
    )  # fmt: skip
    assert checkpoint_spec(".").name == checkpoint_spec("~/tiny-bert").name == "ckpt.tiny-bert"


def test_only_the_weights_from_pretrained_loads_count(saved: Path, tmp_path: Path) -> None:
    """A folder may hold other safetensors files beside the model's (Mistral's
    consolidated.safetensors, an adapter's): they doubled the memory need."""
    from harness.zoo.discovery import checkpoint_spec

    crowded = tmp_path / "crowded"
    shutil.copytree(saved, crowded)
    shutil.copy(saved / "model.safetensors", crowded / "consolidated.safetensors")
    own = checkpoint_spec(str(saved)).metadata["parameter_bytes"]
    assert checkpoint_spec(str(crowded)).metadata["parameter_bytes"] == own


def test_a_half_precision_checkpoint_is_built_in_float32(tmp_path: Path) -> None:
    """Saved in bfloat16, as many are: built in float32 (the dtype axis casts it, as every
    entry's); its memory need counts float32 bytes."""
    from harness.zoo.discovery import checkpoint_spec

    torch.manual_seed(0)
    built().to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    spec = checkpoint_spec(str(tmp_path / "bf16"))
    assert spec.metadata["saved_dtype"] == "bfloat16"
    weights = sum(p.numel() for p in built().state_dict().values())
    assert spec.metadata["parameter_bytes"] == 4 * weights
    assert {p.dtype for p in spec.build().parameters()} == {torch.float32}


@pytest.mark.parametrize(
    ("model_type", "architecture", "inputs"),
    [
        ("whisper", "WhisperModel", ("input_features", "decoder_input_ids")),
        ("t5", "T5Model", ("input_ids", "attention_mask", "decoder_input_ids")),
        ("wav2vec2", "Wav2Vec2Model", ("input_values",)),
        ("clip_vision_model", "CLIPVisionModel", ("pixel_values",)),
        ("bert", "BertForSequenceClassification", ("input_ids", "attention_mask")),
    ],
)
def test_a_class_the_inventory_lacks_gets_its_types_inputs(
    model_type: str, architecture: str, inputs: tuple[str, ...]
) -> None:
    """Base models (fed text, they failed at their reference: "You must specify exactly one
    of input_ids or inputs_embeds") take the inputs of their type's other classes."""
    from model_zoo.transformers._checkpoint import recipe_of

    assert recipe_of(model_type, architecture)[0] == inputs


def test_a_base_model_checkpoint_runs_on_its_types_inputs(tmp_path: Path) -> None:
    import transformers

    from harness.zoo.discovery import checkpoint_spec

    config = transformers.WhisperConfig(
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=100,
        num_mel_bins=8, max_source_positions=16, max_target_positions=16, pad_token_id=1,
        bos_token_id=2, eos_token_id=2, decoder_start_token_id=3,
    )  # fmt: skip
    transformers.WhisperModel(config).save_pretrained(tmp_path / "whisper")
    spec = checkpoint_spec(str(tmp_path / "whisper"))
    with torch.no_grad():
        out = spec.build()(*spec.example_inputs())
    assert spec.input_names == ("input_features", "decoder_input_ids")
    assert out[0].shape[-1] == 32  # the decoder's last hidden state
