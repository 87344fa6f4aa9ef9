"""The languages the engine speaks, and how a request's language names map onto them."""

from __future__ import annotations

DEFAULT_LANGUAGE = "en"
LANGUAGES: tuple[str, ...] = ("en", "zh-Hans")

# Accepted spellings (lower case) of each language: BCP 47 tags, gettext locale names, browser variants.
_ALIASES = {
    "en": "en", "en-us": "en", "en-gb": "en", "en_us": "en",
    "zh-hans": "zh-Hans", "zh_hans": "zh-Hans", "zh-cn": "zh-Hans", "zh_cn": "zh-Hans", "zh": "zh-Hans",
    "zh-sg": "zh-Hans", "zh-hans-cn": "zh-Hans",
}


def normalize_language(value: str | None) -> str | None:
    """``"zh-CN"`` -> ``"zh-Hans"``; None for a language the engine does not speak."""
    if not value:
        return None
    key = value.strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    base = key.split("-")[0].split("_")[0]
    return _ALIASES.get(base)


def pick_language(*candidates: str | None, accept_language: str | None = None) -> str:
    """The first candidate the engine speaks, else the best of an ``Accept-Language`` header, else English."""
    for c in candidates:
        lang = normalize_language(c)
        if lang:
            return lang
    if accept_language:
        ranked = []
        for i, part in enumerate(accept_language.split(",")):
            tag, _, params = part.strip().partition(";")
            q = 1.0
            if params.strip().startswith("q="):
                try:
                    q = float(params.strip()[2:])
                except ValueError:
                    q = 0.0
            ranked.append((-q, i, tag))
        for _q, _i, tag in sorted(ranked):
            lang = normalize_language(tag)
            if lang and _q < 0:
                return lang
    return DEFAULT_LANGUAGE
