"""The Chinese catalog is the source translators edit (locale/zh_Hans/LC_MESSAGES/django.po): every entry
is translated, none is fuzzy, and each translation keeps the placeholders of its message."""

from __future__ import annotations

import re

from tests.paths import REPO

PO = REPO / "locale/zh_Hans/LC_MESSAGES/django.po"


def _entries() -> list[dict[str, object]]:
    """(flags, msgctxt, msgid, msgstr) of each entry, multi-line strings joined."""
    out: list[dict[str, object]] = []
    for block in PO.read_text(encoding="utf-8").split("\n\n"):
        fields: dict[str, object] = {"flags": [], "msgid": None, "msgstr": None}
        key = None
        for line in block.splitlines():
            if line.startswith("#,"):
                fields["flags"] = [f.strip() for f in line[2:].split(",")]
            elif line.startswith(("msgctxt ", "msgid ", "msgstr ", "msgid_plural ", "msgstr[")):
                key, _, rest = line.partition(" ")
                fields[key] = rest[1:-1]
            elif line.startswith('"') and key:
                fields[key] = str(fields[key]) + line[1:-1]
        if fields["msgid"] is not None:
            out.append(fields)
    return out


def test_every_message_is_translated_and_none_is_fuzzy() -> None:
    entries = [e for e in _entries() if e["msgid"]]  # the header has an empty msgid
    assert len(entries) > 300
    untranslated = [e["msgid"] for e in entries if not (e.get("msgstr") or e.get("msgstr[0]"))]
    fuzzy = [e["msgid"] for e in entries if "fuzzy" in e["flags"]]
    assert not untranslated, untranslated
    assert not fuzzy, fuzzy


def test_translations_keep_their_placeholders() -> None:
    pattern = re.compile(r"%\(\w+\)[sd]|\{\w+\}")
    for e in _entries():
        if not e["msgid"] or not e.get("msgstr"):
            continue
        assert sorted(pattern.findall(str(e["msgid"]))) == sorted(pattern.findall(str(e["msgstr"]))), \
            e["msgid"]


def test_decode_is_one_term_in_both_catalogs() -> None:
    """"Decode" reads "Decode 阶段" (MindStudio's term for the phase), never half-translated ("未找到 Decode
    token", "包含 decode token") nor as 解码, in the pages' catalog and the engine's."""
    from pypto_core.i18n.catalog_tools import read_po

    engine = REPO / "pypto_core/i18n/locale/zh_Hans/LC_MESSAGES/pypto_core.po"
    pairs = [(str(e["msgid"]), str(e.get("msgstr") or e.get("msgstr[0]") or "")) for e in _entries()]
    pairs += [(k, v.msgstr) for k, v in read_po(engine).items()]
    checked = 0
    for msgid, msgstr in pairs:
        if not re.search(r"\bdecode\b", re.sub(r"\{[^}]*\}", "", msgid), re.I):
            continue
        checked += 1
        msgstr = re.sub(r"\{[^}]*\}", "", msgstr)
        assert "Decode 阶段" in msgstr, (msgid, msgstr)
        assert "解码" not in msgstr and "decode" not in msgstr, (msgid, msgstr)
        assert "Decode token" not in msgstr, (msgid, msgstr)
    assert checked >= 10
