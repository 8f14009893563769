"""The model a `transformers` suite entry exports: the model class for a model type (the base
model, or a task head where the type has no base model or it does not run on its own), built
from the shrunk config, and wrapped so both exporters see what a user's export sees: the
inputs as named positional arguments, no KV cache, a flat tuple of output tensors.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

from model_zoo.transformers._shrink import shrunk_config

# The base model first, then heads in the order a user exporting the type would likely
# pick them; the remaining auto mappings follow in alphabetical order.
PREFERRED_MAPPINGS = (
    "MODEL_MAPPING_NAMES",
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_FOR_CTC_MAPPING_NAMES",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_BACKBONE_MAPPING_NAMES",
)


def offline() -> None:
    """Nothing may reach the Hub: a config default that names a checkpoint must fail, not
    download. The environment covers a huggingface_hub imported later; one imported
    already (the worker imported transformers to check `requires`) read its environment
    then, so its offline flag is set too."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        setattr(constants, "HF_HUB_OFFLINE", True)  # noqa: B010 - a module attribute


def candidate_classes(model_type: str) -> list[str]:
    """The model class names registered for `model_type`, base model first; for a
    sub-config the auto classes do not map (a composite model's text or vision part), the
    classes of its modeling module built from exactly that config, as `module.Class`."""
    return _registered_classes(model_type) or _classes_of_config(model_type)


def _registered_classes(model_type: str) -> list[str]:
    from transformers.models.auto import modeling_auto

    names = [
        n for n in dir(modeling_auto) if n.endswith("_MAPPING_NAMES") and n.startswith("MODEL")
    ]
    ordered = [*PREFERRED_MAPPINGS, *sorted(set(names) - set(PREFERRED_MAPPINGS))]
    classes: list[str] = []
    for mapping in ordered:
        entry = getattr(modeling_auto, mapping, {}).get(model_type)
        for name in entry if isinstance(entry, list | tuple) else [entry]:
            if isinstance(name, str) and name not in classes:
                classes.append(name)
    return classes


def _classes_of_config(model_type: str) -> list[str]:
    import importlib

    from transformers import CONFIG_MAPPING, PreTrainedModel

    config_class = CONFIG_MAPPING[model_type]
    module_name = config_class.__module__.replace(".configuration_", ".modeling_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return []
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, PreTrainedModel)
        and getattr(value, "config_class", None) is config_class
    ]
    # Models before heads, and the shortest name (the plain model) first.
    found.sort(key=lambda c: (not c.__name__.endswith("Model"), len(c.__name__), c.__name__))
    return [f"{module_name}.{c.__name__}" for c in found]


def model_class(name: str) -> Any:
    """A class name from the top level of transformers, or a `module.Class` path."""
    import importlib

    import transformers

    module_name, _, class_name = name.rpartition(".")
    module = importlib.import_module(module_name) if module_name else transformers
    cls = getattr(module, class_name, None)
    if cls is None:
        raise LookupError(f"transformers has no class {name}")
    return cls


def build_model(model_type: str, class_name: str) -> torch.nn.Module:
    """The model in eval mode, random weights (seeded by the caller), float32."""
    offline()
    import transformers

    transformers.logging.set_verbosity_error()
    config = shrunk_config(model_type)
    return model_class(class_name)(config).eval()


class Exportable(torch.nn.Module):
    """A transformers model called with keyword inputs, returning its output tensors as a
    flat tuple (None fields and caches dropped): `forward`'s parameters are the input names
    (subclasses made by `exportable`), so the ONNX graph's inputs carry them."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def call(self, **inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(output_tensors(self.model(**inputs)))


def exportable(model: torch.nn.Module, names: tuple[str, ...]) -> Exportable:
    """`model` behind a forward(self, <names>) that passes each input by its keyword."""
    for name in names:
        if not name.isidentifier():
            raise ValueError(f"input name {name!r} is not an identifier")
    params = ", ".join(names)
    call = ", ".join(f"{n}={n}" for n in names)
    namespace: dict[str, Any] = {}
    exec(f"def forward(self, {params}):\n    return self.call({call})\n", namespace)
    cls = type(
        f"{type(model).__name__}Exportable", (Exportable,), {"forward": namespace["forward"]}
    )
    return cls(model, names)


def output_tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a model output in order: tuples, lists, dicts and ModelOutputs
    walked depth first; anything else (a cache, a None) dropped."""
    return [t for _, t in named_outputs(value)]


def named_outputs(value: Any, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    """`output_tensors` with a name for each: a ModelOutput's or dict's keys and a tuple's
    or list's positions joined by dots (`logits`, `hidden_states.1`,
    `image_outputs.pooler_output.0`); a bare tensor is `output`."""
    if isinstance(value, torch.Tensor):
        return [(prefix or "output", value)]
    if isinstance(value, dict):  # ModelOutputs are ordered dicts of their non-None fields
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, tuple | list):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return []
    return [
        named
        for key, v in items
        for named in named_outputs(v, f"{prefix}.{key}" if prefix else key)
    ]


def start_decoding_as_checkpoints_do(model: torch.nn.Module) -> None:
    """An encoder-decoder whose config names no token to start decoding from (T5's family:
    the config class has none, the checkpoints' generation config starts from the padding
    token; an `EncoderDecoderModel`, whose users set it) gets the padding token of its
    config or of its decoder's, as `generate` needs one."""
    settings = getattr(model, "generation_config", None)
    config: Any = getattr(model, "config", None)
    if settings is None or not getattr(config, "is_encoder_decoder", False):
        return
    if settings.decoder_start_token_id is None and settings.bos_token_id is None:
        pads = (
            getattr(c, "pad_token_id", None) for c in (config, getattr(config, "decoder", None))
        )
        settings.decoder_start_token_id = next((p for p in pads if p is not None), None)
