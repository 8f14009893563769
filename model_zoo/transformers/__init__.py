"""Every transformers architecture that builds offline (the `transformers` suite; needs the hf extra)."""
