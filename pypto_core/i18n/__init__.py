"""Engine text in the user's language: message templates with parameters, rendered through gettext catalogs.

A ``Message`` is an English template (the gettext msgid, with ``str.format`` fields such as ``{pct:.0f}``) and
its parameters; parameters that are messages themselves are rendered in the same language, plain strings
(op names, file names) are data and never translated. Reports keep the English text plus each message's
template and parameters (``Finding.messages``), so that the web, the API and the CLI render any language
from the same stored finding and ids and numbers never depend on the language.

The catalogs are ``locale/<lang>/LC_MESSAGES/pypto_core.po`` (compiled to ``.mo`` beside it, see
``scripts/engine_messages.py``); a test fails when a template has no translation.
"""

from __future__ import annotations

from pypto_core.i18n.language import DEFAULT_LANGUAGE, LANGUAGES, normalize_language, pick_language
from pypto_core.i18n.message import (
    Message,
    Text,
    Translate,
    as_message,
    join_texts,
    loaded_texts,
    localized_texts,
    map_text,
    msg,
    render,
    render_stored,
    stored_message,
    stored_texts,
    unique_texts,
)

__all__ = ["DEFAULT_LANGUAGE", "LANGUAGES", "Message", "Text", "Translate", "as_message", "join_texts",
           "loaded_texts", "localized_texts", "map_text", "msg", "normalize_language", "pick_language",
           "render", "render_stored", "stored_message", "stored_texts", "unique_texts"]
