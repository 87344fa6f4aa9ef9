"""Text a worker writes for a user (a failure's reason, a warning, a log line), stored so that each page shows
it in its reader's language.

A text is kept twice: in English (the ``error`` and ``warnings`` the API always had, and what the server
log says) and as its message, ``{"msgid": template, "params": {...}}`` (``pypto_core.i18n.Message``). The
templates come from two catalogs: the pipeline's own (``msg(gettext_noop("..."))`` here, translated in
Django's ``django.po``) and the engine's (a reader's or a rule's ``msg("...")``, in ``pypto_core.po``); a
message may nest the other kind, so a template is looked up in Django's catalog first, then the engine's.
Rows and summaries written before the messages were kept show their English text, as they always did.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils import translation

from pypto_core.i18n import (
    DEFAULT_LANGUAGE,
    Text,
    loaded_texts,
    localized_texts,
    normalize_language,
    pick_language,
    render,
    render_stored,
    stored_message,
)
from pypto_core.i18n.catalog import translate as engine_translate

ERROR_CHARS = 4000  # what a row keeps of a reason


def page_language() -> str:
    """The engine's name of the language Django has active (the page's, or the request's)."""
    return normalize_language(translation.get_language()) or DEFAULT_LANGUAGE


def request_language(request: Any) -> str:
    """An API request's language: ``?lang=``, else the page's (LocaleMiddleware: the user's choice or
    Accept-Language)."""
    return pick_language(request.GET.get("lang"), translation.get_language())


def translate(template: str, language: str) -> str:
    """A template in ``language``: Django's catalog (the pipeline's messages), else the engine's."""
    if language == DEFAULT_LANGUAGE:
        return template
    with translation.override(language.lower()):
        text = translation.gettext(template)
    return text if text != template else engine_translate(template, language)


def localized(text: str, message: Any, language: str | None = None) -> str:
    """A stored text in ``language`` (default: the active one); its English ``text`` where no message was
    kept. An empty ``text`` is no text, whatever message a row still holds."""
    if not text:
        return ""
    rendered = render_stored(message, language or page_language(), translate) if message else None
    return rendered if rendered is not None else text


def localized_list(texts: Iterable[Any], messages: Iterable[Any] | None,
                   language: str | None = None) -> list[str]:
    """Stored texts (``pypto_core.i18n.stored_texts``) in ``language`` (default: the active one)."""
    return localized_texts(texts, messages, language or page_language(), translate)


def stored_text(text: str, message: Any) -> Text:
    """A stored text as a message again (to nest in another), or its English text."""
    return loaded_texts([text], [message])[0]


def error_fields(reason: Text) -> dict[str, Any]:
    """The columns a failure writes: ``error`` in English (cut to ``ERROR_CHARS``) and ``error_message``."""
    return {"error": render(reason)[:ERROR_CHARS], "error_message": stored_message(reason)}


NO_ERROR: dict[str, Any] = {"error": "", "error_message": None}
