"""`harness bisect`: from a finding between two versions of a package to the version that
caused it.

A pure core decides: `versions` (which versions, in PEP 440 order), `search` (each cell's
bisection: what to try next, where it ended), `verdict` (what counts as bad, and what one
version says about one cell, from `harness compare`'s findings), `culprit` (several packages
moved: whose move it is), `progress` (where a bisection stands: its phase, an enum, and
pure transitions), `result` and `output` (bisect.json, bisect.md). A thin shell
carries it out: `index` asks pip (versions offered, whether a set installs), `runner` runs a
package set's cells in a Ray runtime_env through `harness run`'s machinery and compares
them, `session` runs what each phase asks for and keeps the append-only log of what was
tried. `harness/commands/bisect.py` is the command line.
"""
