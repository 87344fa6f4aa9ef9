"""``Message``: a template and its parameters, rendered in a language on demand."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pypto_core.i18n.catalog import translate
from pypto_core.i18n.language import DEFAULT_LANGUAGE

MESSAGE_KEY = "msgid"  # the stored form: {"msgid": template, "params": {...}}
# A template's translation in a language; the engine's catalog unless a caller (the web) brings its own.
Translate: TypeAlias = Callable[[str, str], str]


@dataclass(frozen=True)
class Message:
    template: str
    params: dict[str, Any] = field(default_factory=dict)

    def bind(self, **params: Any) -> Message:
        """The same template with more parameters (a template declared once and filled where it is used)."""
        return Message(self.template, {**self.params, **params})

    def render(self, language: str = DEFAULT_LANGUAGE) -> str:
        return render(self, language)

    def __str__(self) -> str:
        return self.render()

    def map_strings(self, change: Callable[[str], str]) -> Message:
        """The same message with ``change`` applied to every text parameter, in nested messages too (a
        worker's folder taken out of the file names it carries)."""
        return Message(self.template, {k: _mapped(v, change) for k, v in self.params.items()})

    def to_dict(self) -> dict[str, Any]:
        return {MESSAGE_KEY: self.template, "params": {k: _stored(v) for k, v in self.params.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls(str(data[MESSAGE_KEY]), {k: _loaded(v) for k, v in (data.get("params") or {}).items()})


def msg(template: str, /, **params: Any) -> Message:
    """A translatable template; the extractor and the catalog test find every ``msg("...")`` literal."""
    return Message(template, params)


# Text a user reads: a message, or a plain string (data, or text stored before it was a message).
Text: TypeAlias = Message | str


def as_message(value: Message | str) -> Message:
    """Text that is already a message stays one; a plain string becomes a template without parameters."""
    return value if isinstance(value, Message) else Message(str(value))


def render(value: Message | str, language: str = DEFAULT_LANGUAGE,
           translator: Translate | None = None) -> str:
    if not isinstance(value, Message):
        return str(value)
    params = {k: _rendered(v, language, translator) for k, v in value.params.items()}
    template = (translator or translate)(value.template, language) if value.template else ""
    try:
        return template.format(**params)
    except (KeyError, IndexError, ValueError):
        return value.template.format(**params)  # a broken translation must not lose the text


def render_stored(data: Any, language: str = DEFAULT_LANGUAGE,
                  translator: Translate | None = None) -> str | None:
    """A stored message (``Message.to_dict()``) rendered; None when ``data`` is not one."""
    if not isinstance(data, dict) or MESSAGE_KEY not in data:
        return None
    try:
        return render(Message.from_dict(data), language, translator)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError):
        return None


# --- texts kept as two parallel lists: the English strings (what JSON readers always had) and, per string,
# its message or None (``Report.warnings`` / ``Report.warning_messages``, ``ProfileMeta`` in profile.json) ---


def stored_message(value: Text) -> dict[str, Any] | None:
    """The stored form of a text: its message's template and parameters, or None for a plain string."""
    return value.to_dict() if isinstance(value, Message) else None


def stored_texts(values: Iterable[Text]) -> tuple[list[str], list[dict[str, Any] | None]]:
    """(the texts in English, their stored messages): what a JSON file or a row keeps of a list of texts."""
    values = list(values)
    return [render(v) for v in values], [stored_message(v) for v in values]


def loaded_texts(texts: Iterable[Any], messages: Iterable[Any] | None) -> list[Text]:
    """The texts ``stored_texts`` kept, messages again where their stored form is one (any other entry, or
    none at all, as lists written before the messages were kept: the plain string)."""
    stored = list(messages or [])
    out: list[Text] = []
    for i, text in enumerate(texts):
        data = stored[i] if i < len(stored) else None
        loaded: Text = str(text)
        if isinstance(data, dict) and MESSAGE_KEY in data:
            try:
                loaded = Message.from_dict(data)
            except (KeyError, TypeError, AttributeError):
                pass
        out.append(loaded)
    return out


def localized_texts(texts: Iterable[Any], messages: Iterable[Any] | None, language: str,
                    translator: Translate | None = None) -> list[str]:
    """Stored texts in ``language`` where their messages allow; a plain string stays as it is."""
    stored = list(messages or [])
    out = []
    for i, text in enumerate(texts):
        rendered = render_stored(stored[i], language, translator) if i < len(stored) and stored[i] else None
        out.append(rendered if rendered is not None else str(text))
    return out


def unique_texts(values: Iterable[Text]) -> list[Text]:
    """``values`` without repeats, judged by their English text (a message holds a dict: not hashable)."""
    seen: set[str] = set()
    out: list[Text] = []
    for v in values:
        key = render(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def join_texts(values: Iterable[Text], separator: str = "; ") -> Text:
    """Texts joined into one: a plain string when none is a message, else a message whose parameters are
    the texts (each message rendered in the language asked for, each string kept as it is)."""
    values = list(values)
    if all(isinstance(v, str) for v in values):
        return separator.join(str(v) for v in values)
    sep = separator.replace("{", "{{").replace("}", "}}")
    params = {f"t{i}": v for i, v in enumerate(values)}
    return Message(sep.join(f"{{{name}}}" for name in params), params)


def map_text(value: Text, change: Callable[[str], str]) -> Text:
    """``change`` applied to a plain string, or to every text parameter of a message."""
    return value.map_strings(change) if isinstance(value, Message) else change(value)


def _rendered(value: Any, language: str, translator: Translate | None = None) -> Any:
    if isinstance(value, Message):
        return render(value, language, translator)
    if isinstance(value, list) and value and all(isinstance(v, Message) for v in value):
        return "".join(render(v, language, translator) for v in value)
    return value


def _mapped(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Message):
        return value.map_strings(change)
    if isinstance(value, list):
        return [_mapped(v, change) for v in value]
    return value


def _stored(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list) and any(isinstance(v, Message) for v in value):
        return [_stored(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        return value.item()  # numpy scalars
    return value


def _loaded(value: Any) -> Any:
    if isinstance(value, dict) and MESSAGE_KEY in value:
        return Message.from_dict(value)
    if isinstance(value, list) and any(isinstance(v, dict) and MESSAGE_KEY in v for v in value):
        return [_loaded(v) for v in value]
    return value
