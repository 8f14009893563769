"""The generators of the generated zoos, each rewriting a committed inventory in `model_zoo/`
that its entry file reads (`harness zoo refresh NAME`): `ops` (one-op models of the ATen ops
the zoo uses, ops.py), `opinfo` (torch's OpInfo database, opinfo_*.py), `transformers` and
`transformers-decode` (the transformers registry, transformers.py)."""
