"""Errors a user sees: each names the file and the reason, never a stack trace."""

from __future__ import annotations

from collections.abc import Callable

from pypto_core.i18n.message import Message, Text, map_text, msg, render


class PyptoError(Exception):
    """Base class of every error the engine raises on purpose."""


class InputError(PyptoError):
    """The input cannot be read. ``str()`` is one line naming the file and the reason (CLI exit 2).

    The reason may be a message (``pypto_core.i18n.msg``): ``reason`` is its English text, ``message`` the
    whole error as a message that a page renders in its own language."""

    def __init__(self, path: str, reason: Text) -> None:
        self.path = str(path)
        self.reason_text: Text = reason
        self.reason = render(reason)
        super().__init__(f"{self.path}: {self.reason}")

    @property
    def message(self) -> Message:
        """``str(self)`` as a message (the file name is data; the reason translates)."""
        return Message("{path}: {reason}", {"path": self.path, "reason": self.reason_text})

    def skipped(self, name: str) -> Message:
        """The warning of a reader that goes on without this file."""
        return msg("skipped {file}: {reason}", file=name, reason=self.reason_text)

    def with_names(self, change: Callable[[str], str]) -> InputError:
        """The same error with ``change`` applied to its path and to the names in its reason (a worker's
        folder written as the user knows the file)."""
        return InputError(change(self.path), map_text(self.reason_text, change))


class UnknownSku(PyptoError, KeyError):
    """A device name no spelling of which is known (also a KeyError, as a lookup of a missing key is)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
