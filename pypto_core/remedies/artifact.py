"""``Artifact``: one downloadable remedy file (a tuning config, a script, a patch module or a diff)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

ARTIFACT_SCHEMA_VERSION = 1
KINDS = ("config", "script", "patch", "diff")

# Served as attachments, never rendered inline; text/* so a browser's "view source" stays readable.
MEDIA_TYPES = {
    ".json": "application/json",
    ".sh": "text/x-shellscript; charset=utf-8",
    ".py": "text/x-python; charset=utf-8",
    ".diff": "text/x-diff; charset=utf-8",
}


@dataclass(frozen=True)
class Artifact:
    name: str  # file name, unique within one analysis; the name Finding.remedies refers to
    kind: str  # config | script | patch | diff
    content: bytes
    rule: str  # the finding's rule id
    # what it was made for: finding, profile, ops, shapes
    header: dict[str, Any] = field(default_factory=dict)
    schema_version: int = ARTIFACT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"artifact kind must be one of {KINDS}, not {self.kind!r}")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def size(self) -> int:
        return len(self.content)

    @property
    def media_type(self) -> str:
        suffix = self.name[self.name.rfind("."):] if "." in self.name else ""
        return MEDIA_TYPES.get(suffix, "application/octet-stream")

    def text(self) -> str:
        return self.content.decode("utf-8")

    def to_dict(self) -> dict[str, Any]:
        """Metadata only (the API lists this; the content is downloaded separately)."""
        return {"name": self.name, "kind": self.kind, "rule": self.rule, "size": self.size,
                "sha256": self.sha256, "media_type": self.media_type, "header": self.header,
                "schema_version": self.schema_version}
