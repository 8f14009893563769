"""Errors that end the CLI: bad input from the user, reported in one sentence with exit 2."""

from __future__ import annotations


class UsageError(Exception):
    """A flag, suite file or zoo path the user got wrong. The CLI prints it and exits 2."""
