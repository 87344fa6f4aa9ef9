"""Process names found before the scan: torch_npu names its host process after all of that process's events.

A trace_view.json is written process by process, and the ``process_name`` metadata event of the host
("Python") process comes after its slices (docs/formats.md §2.5; in the samples, after the first 1,496
of 10,476
events). The streaming reader must know a slice's process to send it to its table, so without help it would
keep every host slice of a big trace in memory until the name turns up. A byte search for the metadata
events over the file (a few GB/s, from the page cache the scan then reads again) finds the
names first. Only names whose table does not depend on the process label are taken, and an event that does
not parse as plain JSON is left to the scan: what this finds is what the scan would find later.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

_MARK = b'"process_name"'
_REACH = 4096  # how far from the mark an event's braces may be
_PIECE = 16 << 20  # bytes searched at a time


def early_process_names(path: str | os.PathLike[str], decides: Callable[[str], bool]) -> dict[str, str]:
    """pid (as the scanner gives it: the number's text, or the string) -> name of every ``process_name``
    event in a plain (not gzipped) file whose name ``decides`` its table alone."""
    found: dict[str, str] = {}
    try:
        with open(path, "rb") as fh:
            if fh.read(2) == b"\x1f\x8b":
                return found
            size = os.fstat(fh.fileno()).st_size
            # read in pieces, each with _REACH bytes of its neighbours (read, not mapped: a mapping's pages
            # would count in this process's memory, the whole file of them)
            for offset in range(0, size, _PIECE):
                lo = max(0, offset - _REACH)
                fh.seek(lo)
                data = fh.read(offset - lo + _PIECE + _REACH)
                pos = data.find(_MARK, offset - lo)
                while 0 <= pos < offset - lo + _PIECE:
                    event = _event_at(data, pos)
                    if event is not None:
                        pid, name = _pid_and_name(event)
                        if pid is not None and name is not None and decides(name):
                            found.setdefault(pid, name)
                    pos = data.find(_MARK, pos + len(_MARK))
    except OSError:  # unreadable: the scan reports it
        return {}
    return found


def _event_at(buf: bytes, pos: int) -> dict[str, Any] | None:
    """The JSON object around ``pos`` (brace matching, strings skipped), parsed; None if it is not plain."""
    lo = max(0, pos - _REACH)
    before = buf[lo:pos]
    depth, start = 0, -1
    for i in range(len(before) - 1, -1, -1):
        c = before[i]
        if c == 0x7D:  # }
            depth += 1
        elif c == 0x7B:  # {
            if depth == 0:
                start = lo + i
                break
            depth -= 1
    if start < 0:
        return None
    after = buf[pos:pos + _REACH]
    depth, in_string, escaped = 1, False, False
    for i, c in enumerate(after):
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:  # backslash
                escaped = True
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                try:
                    event = json.loads(buf[start:pos + i + 1])
                except ValueError:
                    return None
                return event if isinstance(event, dict) else None
    return None


def _pid_and_name(event: dict[str, Any]) -> tuple[str | None, str | None]:
    if event.get("ph") != "M" or event.get("name") != "process_name":
        return None, None
    pid, args = event.get("pid"), event.get("args")
    name = args.get("name") if isinstance(args, dict) else None
    if isinstance(pid, bool) or not isinstance(pid, (int, str)) or not isinstance(name, str):
        return None, None
    return str(pid), name
