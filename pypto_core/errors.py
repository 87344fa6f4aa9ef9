"""Errors a user sees: each names the file and the reason, never a stack trace."""

from __future__ import annotations


class PyptoError(Exception):
    """Base class of every error the engine raises on purpose."""


class InputError(PyptoError):
    """The input cannot be read. ``str()`` is one line naming the file and the reason (CLI exit 2)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class UnknownSku(PyptoError, KeyError):
    """A device name no spelling of which is known (also a KeyError, as a lookup of a missing key is)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
