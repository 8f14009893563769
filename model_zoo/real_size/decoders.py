"""Real-size decoders as one generation step with a KV cache (family `real-size-decode`,
named `real.<name>.decode`; the `real-size-decode` suite): the decode suite's entries
(model_zoo/transformers/decoders.py: prefill and decode-step shapes, 16 greedy tokens) at
the published configs of model_zoo/real_size/_configs.json, so that every way to an ONNX
decoder (dynamo, transformers' exporter, the model builders) is compared where its users
run it. Importing this file reads JSON only: neither torch nor transformers."""

from __future__ import annotations

from harness.zoo import ModelSpec
from model_zoo.real_size.models import FAMILY, entry
from model_zoo.transformers._decode_inventory import (
    DECODE_INVENTORY,
    decode_name,
    probed_entries,
    published_decode_spec,
    with_layers,
)
from model_zoo.transformers._inventory import read_inventory

DECODE_FAMILY = f"{FAMILY}-decode"
# The real-size causal LMs whose model type both model builders build (benchmarks/README.md,
# "Every way to an ONNX model"), from 360 M to 0.6 B parameters.
DECODERS = ("smollm2_360m", "qwen2_5_0_5b", "qwen3_0_6b")


def _specs() -> list[ModelSpec]:
    if not DECODE_INVENTORY.is_file():
        return []
    probed = probed_entries(read_inventory(DECODE_INVENTORY))
    specs = []
    for name in DECODERS:
        published = entry(name)
        shrunk = probed[decode_name(published["model_type"], "causal-lm")]
        layers = int(published["config"]["num_hidden_layers"])
        metadata = {
            "checkpoint": published["checkpoint"],
            "parameters": int(published["params_counted"]),
            "parameter_bytes": int(published["fp32_bytes"]),
        }
        specs.append(
            published_decode_spec(
                f"real.{name}.decode", with_layers(shrunk, layers), name, DECODE_FAMILY, metadata
            )
        )
    return specs


SPECS = _specs()
