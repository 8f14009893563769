"""Minimal repros: from a failing cell to the smallest program that still fails the same way.

A pure core (`ddmin`: delta debugging and bisection over an abstract "does this candidate
still fail the same way" oracle; `dag`: which nodes a kept subgraph reads and gives;
`select`: which cells of a run get a repro) and the shell around it (`program`: surgery on
the program torch.export captured; `oracle`: the real export, checker, ONNX Runtime and
numerics gate on a candidate; `script`: the standalone `repro_min.py`; `modules` and
`module_script`: the smallest failing submodule, for failures no captured graph shows, and
its script; `minimize`: one cell; `child`: one cell in a fresh process; `runner`: a run's
cells, bounded in time, verified in fresh processes, written into the records). `select`,
`runner` and `verify` import no torch: the command line uses them.
"""
