"""transformers models from tiny configs (the `hf` suite; needs the `hf` extra)."""
