"""`harness debt`: which of transformers' workarounds a cell still needs; the search (a
worker half, search.py) and its driver."""
