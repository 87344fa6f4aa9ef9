"""The compiled gettext catalogs shipped with the engine (stdlib ``gettext``, no Django)."""

from __future__ import annotations

import gettext
from functools import cache
from pathlib import Path

DOMAIN = "pypto_core"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
# engine language code -> gettext locale folder
LOCALE_NAMES = {"zh-Hans": "zh_Hans"}


@cache
def translations(language: str) -> gettext.NullTranslations:
    """The catalog for ``language`` (English and unknown languages: the templates themselves)."""
    name = LOCALE_NAMES.get(language)
    if name is None:
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[name], fallback=True)


def translate(template: str, language: str) -> str:
    return translations(language).gettext(template)
