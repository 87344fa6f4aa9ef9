"""Putting untrusted profile text (op names, shapes, file names) into generated code, safely.

Op names come from uploaded archives, so a name that closes a string or a docstring and goes on with
``import os; os.system(...)`` must never become code. The only two ways such text enters a generated file are:
  * ``py_literal``: a Python literal made by ``repr`` of plain data and checked by ``ast.literal_eval``;
  * ``comment_text``: one line of printable characters for a ``#`` comment (newlines and every other line
    separator Python or a shell might honour are replaced, and the length is capped).
JSON files are written by ``json.dumps``, which escapes everything itself.
"""

from __future__ import annotations

import ast
import re
from typing import Any

MAX_COMMENT_CHARS = 300
_SAFE_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def comment_text(value: Any, limit: int = MAX_COMMENT_CHARS) -> str:
    """One printable line: control characters and line separators (\\n, \\r, \\x0b, \\x85, \\u2028...)
    become '?'."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def py_literal(value: Any) -> str:
    """``repr`` of str/int/float/bool/None or lists, tuples and dicts of them; proven to parse back
    unchanged."""
    _check_plain(value)
    text = repr(value)
    if ast.literal_eval(text) != value:
        raise ValueError("value does not survive a repr round trip")
    return text


def _check_plain(value: Any) -> None:
    if value is None or isinstance(value, (str, int, float, bool)):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(item)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key)
            _check_plain(item)
        return
    raise TypeError(f"only plain data may be embedded in generated code, not {type(value).__name__}")


def safe_filename(name: str | None, default: str) -> str:
    """The base name of a user-supplied file name when it is plain, otherwise ``default``."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    return base if _SAFE_FILENAME.fullmatch(base) and ".." not in base else default
