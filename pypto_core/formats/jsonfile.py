"""Small JSON documents (profiler_info, communication.json, ...) read with clear errors.

Numbers can be kept as their decimal text (``exact=True``) so that epoch-µs timestamps such as
``"Start Timestamp(us)": 1736408883732241.5`` reach :func:`csvtable.to_ns` without passing through a float.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pypto_core.errors import InputError
from pypto_core.i18n import msg

# Metadata and communication files are a few MB at most; refuse the absurd rather than exhaust memory.
MAX_SMALL_JSON_BYTES = 512 * 1024 * 1024


def load_json(path: str | os.PathLike[str], *, exact: bool = False) -> Any:
    """Parse ``path``; ``InputError`` naming the file and the reason for empty, binary or broken JSON."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size == 0:
            raise InputError(str(p), msg("file is empty (0 bytes)"))
        if size > MAX_SMALL_JSON_BYTES:
            raise InputError(str(p), msg("JSON metadata file too large ({size} bytes)", size=size))
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(str(p), msg("cannot read file ({error})", error=exc.strerror or str(exc))) from exc
    if b"\x00" in raw[:65536]:
        raise InputError(str(p), msg("not a JSON text file (binary content)"))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(str(p), msg("not UTF-8 text (invalid byte at offset {offset})",
                                     offset=exc.start)) from exc
    try:
        if exact:
            return json.loads(text, parse_float=str, parse_int=str)
        return json.loads(text)
    except json.JSONDecodeError as exc:
        unterminated_at_end = exc.msg.startswith("Unterminated string") and '"' not in text[exc.pos + 1:]
        if exc.pos >= len(text.rstrip()) - 1 or unterminated_at_end:
            raise InputError(str(p), msg("truncated JSON (ends unexpectedly at line {line} column {column})",
                                         line=exc.lineno, column=exc.colno)) from exc
        raise InputError(str(p), msg("invalid JSON ({error} at line {line} column {column})", error=exc.msg,
                                     line=exc.lineno, column=exc.colno)) from exc
    except RecursionError as exc:
        raise InputError(str(p), msg("invalid JSON (nested too deeply)")) from exc
