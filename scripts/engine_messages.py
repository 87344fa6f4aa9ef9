"""Refresh the engine's catalogs: add new ``msg(...)`` templates to each ``.po`` (untranslated), drop the
ones no longer in the source, keep the translations, and compile the ``.mo`` files beside them.

    python scripts/engine_messages.py          # then translate the empty msgstr entries and run it again
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pypto_core.i18n.catalog import DOMAIN, LOCALE_DIR, LOCALE_NAMES  # noqa: E402
from pypto_core.i18n.catalog_tools import PoEntry, extract_templates, read_po, write_mo, write_po  # noqa: E402


def main() -> int:
    templates = extract_templates()
    missing = 0
    for language, folder in LOCALE_NAMES.items():
        po = LOCALE_DIR / folder / "LC_MESSAGES" / f"{DOMAIN}.po"
        old = read_po(po)
        entries = [PoEntry(t, old[t].msgstr if t in old else "", refs) for t, refs in templates.items()]
        write_po(po, entries, language)
        write_mo(po.with_suffix(".mo"), {e.msgid: e.msgstr for e in entries}, language)
        untranslated = [e.msgid for e in entries if not e.msgstr]
        missing += len(untranslated)
        print(f"{po.relative_to(LOCALE_DIR.parents[2])}: {len(entries)} messages, {len(untranslated)} "
              "untranslated")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
