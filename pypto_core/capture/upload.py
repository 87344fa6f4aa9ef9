"""The resumable chunked upload client (the protocol is the platform's, documented beside the upload API).

``POST <create>`` opens an upload and answers its ``url``; each ``PUT <url>`` sends the bytes from the
server's offset with ``Content-Range: bytes START-END/TOTAL``; ``POST <url>complete/`` turns it into a
profile. A small state file remembers the open upload, so a run that died (a lost connection, a killed
process) continues from the server's offset instead of starting over.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pypto_core.capture.client import ApiClient, ApiError
from pypto_core.errors import InputError, PyptoError

# Chunks are never larger than this, whatever the server allows: one PUT lost costs at most this much.
MAX_CHUNK_BYTES = 8 * 1024 * 1024
_HASH_BLOCK = 1024 * 1024

ProgressFn = Callable[[int, int], None]  # (bytes sent so far, total)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def pack_folder(folder: Path, archive: Path) -> Path:
    """Write ``folder`` as a .tar.gz whose members sit under
    the folder's own name (what the server unpacks)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(str(folder), "not a folder")
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".part")
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        # links are refused by the server's safe extraction, so they are never packed
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=str(Path(folder.name) / path.relative_to(folder)), recursive=False)
    os.replace(tmp, archive)
    return archive


class ResumableUpload:
    """One file sent in chunks. ``state_path`` (optional) makes it resumable across processes."""

    def __init__(
        self,
        client: ApiClient,
        create_path: str,
        path: Path,
        *,
        metadata: dict[str, Any] | None = None,
        state_path: Path | None = None,
        chunk_bytes: int = MAX_CHUNK_BYTES,
        progress: ProgressFn | None = None,
    ) -> None:
        self.client = client
        self.create_path = create_path
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(str(path), "no such file")
        self.size = self.path.stat().st_size
        self.metadata = dict(metadata or {})
        self.state_path = state_path
        self.chunk_bytes = max(1, min(chunk_bytes, MAX_CHUNK_BYTES))
        self.progress = progress
        self.upload_url: str | None = None
        self.upload_id: str | None = None

    def run(self) -> dict[str, Any]:
        """Send the file and complete the upload; returns the server's profile JSON (at least ``id``)."""
        offset, done_profile = self._open()
        if done_profile is not None:
            return done_profile
        self._send_from(offset)
        return self._complete()

    def abort(self) -> None:
        """Give the upload up: delete the server's open upload (its bytes) if one exists, forget the state.

        Best effort: a server that cannot be told keeps an open upload that its stale-upload sweep removes."""
        url = self.upload_url or (self._read_state() or {}).get("url")
        if url:
            try:
                self.client.request("DELETE", url, ok=(200, 204, 404, 410))
            except PyptoError:
                pass
        self._clear_state()

    # -- steps -------------------------------------------------------------------------------------------

    def _open(self) -> tuple[int, dict[str, Any] | None]:
        state = self._read_state()
        if state and state.get("size") == self.size and state.get("create_path") == self.create_path:
            self.upload_url, self.upload_id = state["url"], state["id"]
            try:
                status = self.client.get(self.upload_url)
            except ApiError as exc:
                if exc.status not in (404, 410):
                    raise
                status = {"status": "aborted"}
            if status.get("status") == "complete" and status.get("profile") is not None:
                self._clear_state()
                return self.size, {"id": status["profile"]}
            if status.get("status") == "open":
                return int(status["offset"]), None
        body = {"filename": self.path.name, "size": self.size, "sha256": sha256_file(self.path),
                **self.metadata}
        created = self.client.post(self.create_path, body, ok=(200, 201))
        self.upload_url, self.upload_id = created["url"], str(created["id"])
        if created.get("chunk_size"):
            self.chunk_bytes = max(1, min(self.chunk_bytes, int(created["chunk_size"])))
        self._write_state()
        return int(created.get("offset", 0)), None

    def _send_from(self, offset: int) -> None:
        assert self.upload_url is not None
        with open(self.path, "rb") as fh:
            while offset < self.size:
                fh.seek(offset)
                chunk = fh.read(self.chunk_bytes)
                end = offset + len(chunk) - 1
                try:
                    answer = self.client.request(
                        "PUT",
                        self.upload_url,
                        data=chunk,
                        # Content-Range per the protocol; Upload-Offset for servers that read only the start
                        headers={"Content-Range": f"bytes {offset}-{end}/{self.size}",
                                 "Upload-Offset": str(offset)},
                    ).body
                except ApiError as exc:
                    # 409: the server holds a different offset (an earlier PUT landed but its answer was lost)
                    if exc.status == 409 and isinstance(exc.body, dict) and "offset" in exc.body:
                        offset = int(exc.body["offset"])
                        continue
                    raise
                offset = int(answer["offset"])
                if self.progress:
                    self.progress(offset, self.size)

    def _complete(self) -> dict[str, Any]:
        assert self.upload_url is not None
        try:
            answer = self.client.post(self.upload_url.rstrip("/") + "/complete/", ok=(200, 201))
        except ApiError:
            # A retried complete whose first try landed: the upload already names its profile.
            status = self.client.get(self.upload_url)
            if status.get("status") != "complete" or status.get("profile") is None:
                raise
            answer = {"profile": {"id": status["profile"]}}
        self._clear_state()
        # {"profile": {...}} per the protocol; a bare profile object is accepted too
        profile = answer.get("profile", answer) if isinstance(answer, dict) else None
        if not isinstance(profile, dict) or "id" not in profile:
            raise PyptoError(f"{self.path}: the server completed the upload without a profile")
        return profile

    # -- state file --------------------------------------------------------------------------------------

    def _read_state(self) -> dict[str, Any] | None:
        if not self.state_path or not self.state_path.exists():
            return None
        try:
            state: dict[str, Any] | None = json.loads(self.state_path.read_text(encoding="utf-8"))
            return state
        except (OSError, json.JSONDecodeError):
            return None

    def _write_state(self) -> None:
        if not self.state_path:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"id": self.upload_id, "url": self.upload_url, "size": self.size,
               "create_path": self.create_path}
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        os.replace(tmp, self.state_path)

    def _clear_state(self) -> None:
        if self.state_path and self.state_path.exists():
            self.state_path.unlink()


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pypto"


def _source_key(path: Path, server: str, project: int | str) -> str:
    """Identifies one source (file or folder, by path, sizes and times) going to one destination."""
    path = Path(path).resolve()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    stats = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return hashlib.sha256(json.dumps([str(path), stats, server, str(project)]).encode()).hexdigest()[:32]


def upload_profile(
    path: Path,
    *,
    server: str,
    project: int | str,
    token: str | None,
    name: str | None = None,
    sku: str | None = None,
    tags: list[str] | None = None,
    progress: ProgressFn | None = None,
    client: ApiClient | None = None,
) -> dict[str, Any]:
    """Upload a profile file or folder (packed as .tar.gz first) to a project; returns the profile JSON.

    Running it again after a failure resumes the open upload of the same source from the server's offset.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "no such file or folder")
    key = _source_key(path, server, project)
    state_path = _cache_dir() / "uploads" / f"{key}.json"
    if path.is_dir():
        # the packed archive is kept until the upload completes, so that a resumed upload sends the same bytes
        archive = _cache_dir() / "packed" / key / f"{path.resolve().name}.tar.gz"
        if not (archive.exists() and state_path.exists()):
            pack_folder(path, archive)
        send = archive
    else:
        send = path
    metadata: dict[str, Any] = {"name": name or path.name}
    if sku:
        metadata["sku"] = sku
    if tags:
        metadata["tags"] = tags
    api = client or ApiClient(server, token)
    upload = ResumableUpload(
        api, f"/api/projects/{project}/uploads/", send, metadata=metadata, state_path=state_path,
        progress=progress
    )
    profile = upload.run()
    if send != path:
        send.unlink(missing_ok=True)
    return profile
