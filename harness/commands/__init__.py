"""One module per CLI verb (`harness <verb>`), each with `HELP`, `add_arguments(parser)`
and `main(args) -> int`. The modules import nothing heavy at import time (no torch, no
ray, no matplotlib) so that `harness --help` and user errors answer at once."""

# The verbs, in the order `harness --help` lists them.
VERBS = ("run", "list", "compare", "history", "report", "coverage", "repro")
