"""``Message``: a template and its parameters, rendered in a language on demand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pypto_core.i18n.catalog import translate
from pypto_core.i18n.language import DEFAULT_LANGUAGE

MESSAGE_KEY = "msgid"  # the stored form: {"msgid": template, "params": {...}}


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

    def to_dict(self) -> dict[str, Any]:
        return {MESSAGE_KEY: self.template, "params": {k: _stored(v) for k, v in self.params.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls(str(data[MESSAGE_KEY]), {k: _loaded(v) for k, v in (data.get("params") or {}).items()})


def msg(template: str, /, **params: Any) -> Message:
    """A translatable template; the extractor and the catalog test find every ``msg("...")`` literal."""
    return Message(template, params)


def as_message(value: Message | str) -> Message:
    """Text that is already a message stays one; a plain string becomes a template without parameters."""
    return value if isinstance(value, Message) else Message(str(value))


def render(value: Message | str, language: str = DEFAULT_LANGUAGE) -> str:
    if not isinstance(value, Message):
        return str(value)
    params = {k: _rendered(v, language) for k, v in value.params.items()}
    template = translate(value.template, language) if value.template else ""
    try:
        return template.format(**params)
    except (KeyError, IndexError, ValueError):
        return value.template.format(**params)  # a broken translation must not lose the text


def render_stored(data: Any, language: str = DEFAULT_LANGUAGE) -> str | None:
    """A stored message (``Message.to_dict()``) rendered; None when ``data`` is not one."""
    if not isinstance(data, dict) or MESSAGE_KEY not in data:
        return None
    try:
        return render(Message.from_dict(data), language)
    except (KeyError, IndexError, ValueError, TypeError):
        return None


def _rendered(value: Any, language: str) -> Any:
    if isinstance(value, Message):
        return render(value, language)
    if isinstance(value, list) and value and all(isinstance(v, Message) for v in value):
        return "".join(render(v, language) for v in value)
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
