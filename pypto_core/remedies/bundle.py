"""One zip per analysis with every artifact, plus a manifest of names, kinds, sizes and sha256 sums."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable

from pypto_core.remedies.artifact import Artifact

MANIFEST = "MANIFEST.json"
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # same input, same bytes: a re-run of the analysis gives the same sha256


def bundle_zip(artifacts: Iterable[Artifact]) -> bytes:
    items = list(artifacts)
    names = [a.name for a in items]
    if len(set(names)) != len(names) or MANIFEST in names:
        raise ValueError("artifact names must be unique and must not be MANIFEST.json")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for artifact in items:
            info = zipfile.ZipInfo(artifact.name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            # scripts keep their execute bit when unpacked
            info.external_attr = (0o755 if artifact.kind == "script" else 0o644) << 16
            zf.writestr(info, artifact.content)
        manifest = json.dumps([a.to_dict() for a in items], indent=2, sort_keys=True).encode()
        info = zipfile.ZipInfo(MANIFEST, date_time=_FIXED_TIME)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        zf.writestr(info, manifest)
    return buffer.getvalue()
