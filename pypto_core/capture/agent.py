"""The host agent: register, heartbeat, long-poll for capture jobs, run them, upload, report.

It runs only the workloads of its own config (``agent_config``) with params inside the whitelist
(``options``), checking both again whatever the server says. A job is never run twice: the server hands
a job out by a conditional claim, and the agent writes the job into its ledger before running it. A lost
connection is retried with backoff, forever; a refused token (revoked) stops the agent.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pypto_core import __version__
from pypto_core.capture import host
from pypto_core.capture.agent_config import AgentConfig
from pypto_core.capture.client import ApiClient, ApiError, Backoff, ConnectionLost
from pypto_core.capture.ledger import JobLedger
from pypto_core.capture.options import OptionsError, validate_params
from pypto_core.capture.remedy_apply import RemedyRefused, applied_workload, check_remedies
from pypto_core.capture.upload import MAX_CHUNK_BYTES, ResumableUpload, pack_folder
from pypto_core.capture.workloads import RunContext, WorkloadCancelled, WorkloadFailed, run_workload
from pypto_core.errors import PyptoError

log = logging.getLogger("pypto.agent")

# Authorization: Agent <token>; distinct from users' "Token" so neither is taken for the other
AUTH_SCHEME = "Agent"
LOG_TAIL_BYTES = 8192
# Operations/test hook: while this file exists the agent pauses after each uploaded chunk (lets an operator
# or a test kill it mid-upload at a known point).
ENV_HOLD_FILE = "PYPTO_AGENT_HOLD_FILE"


class TokenRefused(PyptoError):
    """The server refused the agent's token (unknown or revoked)."""


class UploadCancelled(PyptoError):
    """The job was cancelled while its output was being uploaded."""


def _cancel_answer(exc: ApiError) -> bool:
    """A refusal that carries the job's cancelled state (the server answers a chunk PUT this way)."""
    return exc.status == 409 and isinstance(exc.body, dict) and bool(exc.body.get("cancel"))


class Agent:
    def __init__(
        self,
        server: str,
        token: str,
        config: AgentConfig,
        *,
        poll_s: int = 20,
        log_interval_s: float = 1.0,
        retry_max_s: float = 30.0,
        chunk_bytes: int = MAX_CHUNK_BYTES,
        capabilities: Callable[[], dict[str, Any]] = host.capabilities,
    ) -> None:
        self.config = config
        self.stop_event = threading.Event()
        # attempts=0: a lost server is retried forever, with backoff capped at retry_max_s, until the agent
        # stops (its waits end at once then)
        self.client = ApiClient(
            server, token, scheme=AUTH_SCHEME, backoff=Backoff(attempts=0, base_s=0.5, max_s=retry_max_s),
            sleep=self.stop_event.wait, stopped=self.stop_event.is_set,
        )
        self.poll_s = poll_s
        self.log_interval_s = log_interval_s
        self.chunk_bytes = chunk_bytes
        self.capabilities = capabilities
        self.ledger = JobLedger(config.state_dir / "jobs.json")
        self.heartbeat_s = 15.0
        self._running: dict[int, threading.Event] = {}  # job id -> its cancel event
        self._lock = threading.Lock()

    # -- main loop -----------------------------------------------------------------------------------------

    def run_forever(self) -> None:
        self.register()
        self.resume_unfinished()
        beat = threading.Thread(target=self._heartbeat_loop, name="pypto-heartbeat", daemon=True)
        beat.start()
        while not self.stop_event.is_set():
            try:
                job = self.next_job()
            except ConnectionLost:
                if self.stop_event.is_set():
                    return  # stopped while the server was away
                raise
            if job is not None:
                self.handle(job)

    def register(self) -> dict[str, Any]:
        body = {
            "hostname": self.config.name or socket.gethostname(),
            "capabilities": self.capabilities(),
            "workloads": self.config.public_workloads(),
            "remedies": self.config.remedies.public(),  # what this host lets a verification job change
            "version": __version__,
        }
        answer: dict[str, Any] = self._call("POST", "/api/agent/register/", body)
        self.heartbeat_s = float(answer.get("heartbeat_s", self.heartbeat_s))
        log.info("registered as agent %s of project %s", answer.get("agent", {}).get("id"),
                 answer.get("project"))
        return answer

    def next_job(self) -> dict[str, Any] | None:
        try:
            response = self.client.request(
                "POST", "/api/agent/jobs/next/", json_body={"wait_s": self.poll_s},
                timeout_s=self.poll_s + 30, ok=(200, 204),
            )
        except ApiError as exc:
            self._check_auth(exc)
            raise
        return response.body if response.status == 200 and response.body else None

    # -- one job -------------------------------------------------------------------------------------------

    def handle(self, job: dict[str, Any]) -> None:
        job_id = job.get("id") if isinstance(job, dict) else None
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
            # nothing can be reported for a job without a usable id: skip it and go on polling
            log.warning("skipped a job with a malformed id from the server: %.80r", job_id)
            return
        if self.ledger.seen(job_id):
            # the server handed out a job this host already took: never run it again
            self._status(job_id, "failed", "this agent already took this job once; not run twice")
            return
        self.ledger.record(job_id, state="started", workload=job.get("workload"), started_at=time.time())
        workload = self.config.workloads.get(str(job.get("workload")))
        if workload is None:
            self._finish(job_id, "failed",
                         f"refused: workload {job.get('workload')!r} is not in this agent's config")
            return
        try:
            options = validate_params(job.get("params") or {})
        except OptionsError as exc:
            self._finish(job_id, "failed", f"refused: {exc}")
            return
        try:  # the host's own policy decides, before anything runs
            remedies = check_remedies(job.get("remedies"), self.config.remedies, workload)
        except RemedyRefused as exc:
            self._finish(job_id, "failed", f"refused: {exc}")
            return
        job_dir = self.config.state_dir / "jobs" / str(job_id)
        output_dir = job_dir / "output"
        if output_dir.exists():
            shutil.rmtree(output_dir)
        cancel = threading.Event()
        with self._lock:
            self._running[job_id] = cancel
        log_path = job_dir / "job.log"
        job_dir.mkdir(parents=True, exist_ok=True)
        tail_stop = threading.Event()
        try:
            with open(log_path, "a", encoding="utf-8", buffering=1) as log_file:
                if self._status(job_id, "running").get("cancel"):
                    cancel.set()
                tailer = threading.Thread(
                    target=self._stream_log, args=(job_id, log_path, cancel, tail_stop), daemon=True
                )
                tailer.start()
                ctx = RunContext(workload, dict(job.get("params") or {}), options, output_dir, log_file,
                                 cancel)
                try:
                    if cancel.is_set():
                        raise WorkloadCancelled("cancelled before start")
                    ctx.workload = applied_workload(workload, remedies, job_dir,
                                                    self._applied_note(job_id, ctx))
                    run_workload(ctx)
                    ctx.note("packing the output")
                    archive = pack_folder(output_dir, job_dir / f"capture-{job_id}.tar.gz")
                finally:
                    tail_stop.set()
                    tailer.join(timeout=10)
                    self._send_log(job_id, log_path)
        except WorkloadCancelled:
            self._finish(job_id, "cancelled", "cancelled while running")
            return
        except (WorkloadFailed, OSError, PyptoError) as exc:
            if isinstance(exc, TokenRefused):
                raise
            self._finish(job_id, "failed", str(exc))
            return
        finally:
            with self._lock:
                self._running.pop(job_id, None)
            shutil.rmtree(job_dir / "source", ignore_errors=True)  # a patched job's scratch copy
        shutil.rmtree(output_dir, ignore_errors=True)
        self.ledger.record(job_id, state="packed", archive=str(archive))
        self.upload(job_id, archive)

    @staticmethod
    def _applied_note(job_id: int, ctx: RunContext) -> Callable[[str], None]:
        def note(message: str) -> None:
            ctx.note(message)
            log.info("job %s: %s", job_id, message)

        return note

    def upload(self, job_id: int, archive: Path) -> None:
        """Send the packed output; a cancel (told by a refused
        chunk or a heartbeat) aborts it between chunks."""
        cancel = threading.Event()
        with self._lock:
            self._running[job_id] = cancel  # the heartbeat reports it and sets the event on a cancel
        hold = os.environ.get(ENV_HOLD_FILE)

        def progress(sent: int, total: int) -> None:
            while hold and os.path.exists(hold) and not cancel.is_set():
                time.sleep(0.1)
            if cancel.is_set():
                raise UploadCancelled(f"cancelled after {sent} of {total} bytes")

        sender = ResumableUpload(
            self.client,
            f"/api/agent/jobs/{job_id}/upload/",
            archive,
            metadata={"name": f"capture {job_id}"},
            state_path=archive.with_suffix(".upload.json"),
            chunk_bytes=self.chunk_bytes,
            progress=progress,
        )
        try:
            answer = self._status(job_id, "uploading")
            if answer.get("status") in ("cancelled", "failed"):
                # ended on the server meanwhile (a cancel, or failed while this agent was out of touch)
                self._finish(job_id, str(answer["status"]), answer.get("detail"), report=False)
                sender.abort()
                archive.unlink(missing_ok=True)
                return
            if answer.get("cancel"):
                raise UploadCancelled("cancelled before the upload started")
            profile = sender.run()
        except UploadCancelled as exc:
            self._abort_upload(job_id, sender, archive, str(exc))
            return
        except ApiError as exc:
            self._check_auth(exc)
            if _cancel_answer(exc):
                ended = exc.body.get("status") if exc.body.get("status") in ("failed", "cancelled") else None
                self._abort_upload(job_id, sender, archive, "cancelled while uploading", ended=ended)
                return
            self._finish(job_id, "failed", f"upload refused: {exc}")
            return
        finally:
            with self._lock:
                self._running.pop(job_id, None)
        self.ledger.record(job_id, state="done", profile=profile.get("id"))
        archive.unlink(missing_ok=True)
        log.info("job %s uploaded as profile %s", job_id, profile.get("id"))

    def _abort_upload(
        self, job_id: int, sender: ResumableUpload, archive: Path, message: str, *, ended: str | None = None
    ) -> None:
        """``ended``: the status the server already gave the job (then nothing is reported)."""
        sender.abort()  # DELETE the open upload: nothing half-sent is left on the server
        archive.unlink(missing_ok=True)
        self._finish(job_id, ended or "cancelled", message, report=ended is None)

    def resume_unfinished(self) -> None:
        """After a restart: finish uploads that were cut off; never rerun a workload that had started."""
        for key, entry in self.ledger.unfinished().items():
            job_id = int(key)
            archive = Path(entry.get("archive", ""))
            if entry.get("state") == "packed" and archive.is_file():
                log.info("job %s: resuming its upload", job_id)
                self.upload(job_id, archive)
            else:
                self._finish(job_id, "failed", "the agent stopped while this job ran; it is not run twice")

    # -- reporting -----------------------------------------------------------------------------------------

    def _finish(self, job_id: int, status: str, message: str | None, *, report: bool = True) -> None:
        if report:
            self._status(job_id, status, message)
        self.ledger.record(job_id, state=status, message=message)
        log.info("job %s %s%s", job_id, status, f": {message}" if message else "")

    def _status(self, job_id: int, status: str, message: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"status": status}
        if message:
            body["message"] = message
        try:
            answer = self._call("POST", f"/api/agent/jobs/{job_id}/status/", body, ok=(200, 409))
        except ApiError as exc:
            log.warning("job %s: status %s not accepted: %s", job_id, status, exc)
            return {}
        return answer if isinstance(answer, dict) else {}

    def _send_log(self, job_id: int, log_path: Path) -> dict[str, Any]:
        try:
            with open(log_path, "rb") as fh:
                fh.seek(max(0, log_path.stat().st_size - LOG_TAIL_BYTES))
                tail = fh.read().decode("utf-8", "replace")
        except OSError:
            return {}
        try:
            answer = self._call("POST", f"/api/agent/jobs/{job_id}/log/", {"tail": tail}, ok=(200, 409))
        except ApiError:
            return {}
        return answer if isinstance(answer, dict) else {}

    def _stream_log(self, job_id: int, log_path: Path, cancel: threading.Event,
                    stop: threading.Event) -> None:
        last_size = -1
        while not stop.wait(self.log_interval_s):
            try:
                size = log_path.stat().st_size
            except OSError:
                continue
            if size == last_size:
                continue
            last_size = size
            if self._send_log(job_id, log_path).get("cancel"):
                cancel.set()

    def _heartbeat_loop(self) -> None:
        while not self.stop_event.wait(self.heartbeat_s):
            with self._lock:
                running = list(self._running)
            try:
                answer = self._call("POST", "/api/agent/heartbeat/", {"running": running})
            except (PyptoError, OSError) as exc:
                log.warning("heartbeat failed: %s", exc)
                continue
            for job_id in answer.get("cancel", []) if isinstance(answer, dict) else []:
                with self._lock:
                    event = self._running.get(int(job_id))
                if event is not None:
                    event.set()

    # -- HTTP ----------------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        try:
            return self.client.request(method, path, json_body=body if body is not None else {}, ok=ok).body
        except ApiError as exc:
            self._check_auth(exc)
            raise

    def _check_auth(self, exc: ApiError) -> None:
        if exc.status in (401, 403):
            self.stop_event.set()
            raise TokenRefused(f"{self.client.server}: the agent token was refused ({exc.status}); "
                               "revoked?") from exc
