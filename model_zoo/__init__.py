"""The built-in model zoo: one small file per entry (or per small family of entries).

Files and folders whose names start with `_` hold shared building blocks, not entries.
"""
