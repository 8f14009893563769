"""Error text, in one place: an exception's root cause, its message without terminal
colours, its first line, and the signature that groups failures with one cause across
cells (pure; no torch)."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# torch.export's symbolic sizes in an error (`s44`), numbered per export: one failure's
# signatures differ by them between a model and a module of it exported alone.
SIZE_SYMBOL = re.compile(r"\bs\d+\b")

_VOLATILE = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(/[\w.\-]+)+"), "<path>"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "N"),
    (re.compile(r"\s+"), " "),
]


def root_cause(error: BaseException) -> BaseException:
    """The innermost exception of a `raise ... from ...` chain: the exporters wrap the
    real cause (a missing translation, a guard failure) in a generic step error."""
    seen = {id(error)}
    while error.__cause__ is not None and id(error.__cause__) not in seen:
        error = error.__cause__
        seen.add(id(error))
    return error


def clean(text: str) -> str:
    """`text` without terminal colour codes or surrounding blanks."""
    return _ANSI.sub("", text).strip()


def first_line(error: BaseException) -> str:
    """`Type: the message's first line`, colours removed, at most 300 characters."""
    lines = clean(str(error)).splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def message_line(error: BaseException) -> str:
    """The message's first line, colours removed, at most 300 characters; the type's name
    where the message is empty."""
    lines = clean(str(error)).splitlines()
    return lines[0][:300] if lines else type(error).__name__


def signature_of(error: BaseException) -> str:
    """The error signature of a raised exception: its root cause's type and first line."""
    root = root_cause(error)
    return error_signature(type(root).__name__, clean(str(root)) or repr(root))


def error_signature(error_type: str, message: str) -> str:
    """A short, stable key that groups failures with the same cause across cells.

    The first meaningful line of the message with paths, addresses and numbers
    replaced, so that 'shape [2, 3]' and 'shape [4, 5]' group together.
    """
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    first = next((ln for ln in lines if not ln.startswith(("Traceback", "File ", "#"))), "")
    return f"{error_type}: {normalize(first)}"


def normalization_rules() -> list[tuple[str, str]]:
    """The (regex, replacement) pairs an error signature normalizes a message with, for a
    standalone repro script that judges its own error the same way."""
    return [(pattern.pattern, replacement) for pattern, replacement in _VOLATILE]


def normalize(text: str) -> str:
    """`text` with addresses, paths and numbers replaced, blanks folded, cut at 160."""
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return text.strip()[:160]
