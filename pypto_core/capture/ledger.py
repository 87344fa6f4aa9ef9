"""The agent's own record of every job it has taken, kept on disk so a restart never runs a job twice.

A job is written here (``started``) before its workload runs. After a crash, a job found ``started`` is not
run again: it is reported failed, unless its output was already packed (``packed``), in which case only
the upload is resumed. The server's conditional claim is the other half of the guarantee.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any


class JobLedger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._jobs: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            try:
                self._jobs = json.loads(self.path.read_text(encoding="utf-8")).get("jobs", {})
            except (OSError, json.JSONDecodeError):
                # an unreadable ledger must not make old jobs runnable again: keep it aside, refuse to guess
                self.path.rename(self.path.with_suffix(".corrupt"))
                self._jobs = {}

    def get(self, job_id: int | str) -> dict[str, Any] | None:
        entry = self._jobs.get(str(job_id))
        return dict(entry) if entry else None

    def seen(self, job_id: int | str) -> bool:
        return str(job_id) in self._jobs

    def record(self, job_id: int | str, **fields: Any) -> None:
        """Merge ``fields`` into the job's entry and make it durable before returning."""
        with self._lock:
            entry = self._jobs.setdefault(str(job_id), {})
            entry.update(fields)
            self._write()

    def unfinished(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self._jobs.items()
                if v.get("state") not in ("done", "failed", "cancelled")}

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"jobs": self._jobs}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
