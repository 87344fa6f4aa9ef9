"""Keeping the catalogs: find every ``msg("...")`` template in the engine's source, read and write ``.po``
files, compile ``.mo`` files (stdlib only; used by ``scripts/engine_messages.py`` and the catalog test)."""

from __future__ import annotations

import ast
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter

ENGINE_ROOT = Path(__file__).resolve().parents[1]


def _literals(node: ast.AST) -> list[str]:
    """The string constants a template argument can take
    (a literal, or either branch of ``a if c else b``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    return []


def extract_templates(root: Path = ENGINE_ROOT) -> dict[str, list[str]]:
    """{template: [source path, ...]} for every ``msg(...)`` call with a literal template under ``root``."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and node.args
                    and ((isinstance(node.func, ast.Name) and node.func.id == "msg")
                         or (isinstance(node.func, ast.Attribute) and node.func.attr == "msg"))):
                for text in _literals(node.args[0]):
                    where = str(path.relative_to(root.parent))
                    if where not in found.setdefault(text, []):
                        found[text].append(where)
    return found


def fields(template: str) -> set[str]:
    """The replacement fields of a ``str.format`` template, with their format specs (``{pct:.0f}``)."""
    return {f"{name}:{spec}" for _lit, name, spec, _conv in Formatter().parse(template) if name is not None}


@dataclass
class PoEntry:
    msgid: str
    msgstr: str = ""
    references: list[str] = field(default_factory=list)


def _unquote(line: str) -> str:
    body = line.strip()
    assert body.startswith('"') and body.endswith('"'), line
    text: str = ast.literal_eval(body)
    return text


def read_po(path: Path) -> dict[str, PoEntry]:
    """{msgid: entry} of a ``.po`` file (the subset this project writes: no plurals, no contexts)."""
    entries: dict[str, PoEntry] = {}
    if not path.exists():
        return entries
    refs: list[str] = []
    key = None
    parts: dict[str, list[str]] = {}

    def flush() -> None:
        nonlocal refs, parts, key
        mid = "".join(parts.get("msgid", []))
        if mid:  # the "" entry is the header
            entries[mid] = PoEntry(mid, "".join(parts.get("msgstr", [])), refs)
        refs, parts, key = [], {}, None

    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#:"):
            if "msgstr" in parts:
                flush()
            refs.append(line[2:].strip())
        elif line.startswith("#"):
            continue
        elif line.startswith(("msgid ", "msgstr ")):
            word, _, rest = line.partition(" ")
            if word == "msgid" and "msgstr" in parts:
                flush()
            key = word
            parts[key] = [_unquote(rest)]
        elif line.startswith('"') and key:
            parts[key].append(_unquote(line))
        elif not line.strip() and "msgstr" in parts:
            flush()
    flush()
    return entries


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return '"' + escaped + '"'


def _po_string(word: str, text: str, width: int = 100) -> list[str]:
    if len(text) + len(word) + 3 <= width:
        return [f"{word} {_quote(text)}"]
    chunks = re.findall(r".{1,%d}(?:\s|$)|.{1,%d}" % (width - 10, width - 10), text, re.S)
    return [f'{word} ""'] + [_quote(c) for c in chunks if c]


def write_po(path: Path, entries: list[PoEntry], language: str) -> None:
    lines = ["# The engine's messages (pypto_core.i18n). Keep the {fields} of each msgid in its msgstr.",
             'msgid ""', 'msgstr ""', _quote("Content-Type: text/plain; charset=UTF-8\n"),
             _quote(f"Language: {language}\n"), ""]
    for e in entries:
        lines += [f"#: {r}" for r in e.references]
        lines += _po_string("msgid", e.msgid) + _po_string("msgstr", e.msgstr) + [""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


def write_mo(path: Path, entries: dict[str, str], language: str) -> None:
    """GNU ``.mo`` for {msgid: msgstr} (untranslated entries left out: gettext falls back to the msgid)."""
    catalog = {"": f"Content-Type: text/plain; charset=UTF-8\nLanguage: {language}\n"}
    catalog.update({k: v for k, v in entries.items() if k and v})
    keys = sorted(catalog)
    ids = [k.encode("utf-8") for k in keys]
    strs = [catalog[k].encode("utf-8") for k in keys]
    n = len(keys)
    key_start = 7 * 4 + 16 * n
    offsets_ids, offsets_strs, blob_ids, blob_strs = [], [], b"", b""
    for b in ids:
        offsets_ids.append((len(b), key_start + len(blob_ids)))
        blob_ids += b + b"\0"
    value_start = key_start + len(blob_ids)
    for b in strs:
        offsets_strs.append((len(b), value_start + len(blob_strs)))
        blob_strs += b + b"\0"
    header = struct.pack("<7I", 0x950412DE, 0, n, 7 * 4, 7 * 4 + 8 * n, 0, 0)
    table = b"".join(struct.pack("<2I", *o) for o in offsets_ids + offsets_strs)
    path.write_bytes(header + table + blob_ids + blob_strs)
