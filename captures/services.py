"""Writes on capture agents and jobs (``<entity>_<action>``, keyword-only).

Security lines, all enforced here rather than in views:
- agents are created and revoked by maintainers (owners too); the token is returned once and kept hashed;
- a capture names one of the agent's reported workloads, with params inside ``pypto_core``'s whitelist;
- a job is handed out once: the claim is a conditional update of exactly one queued row;
- an agent can change only its own jobs, and only along ``AGENT_TRANSITIONS``.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from captures.models import AGENT_TRANSITIONS, FINAL_STATUSES, HEARTBEAT_S, Agent, CaptureJob, JobStatus
from profiles import services as profile_services
from profiles.models import Profile, Project, UploadSession
from pypto_core.capture.options import OptionsError, validate_params

TOKEN_PREFIX = "pyag_"
LOG_TAIL_CHARS = 16_000
__all__ = ["HEARTBEAT_S"]  # re-exported for the API
MAX_WAIT_S = 25  # long-poll ceiling: below common proxy idle timeouts (30-60 s)
_POLL_INTERVAL_S = 0.5
_CAPABILITIES_MAX_CHARS = 64_000


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# --- agents ---------------------------------------------------------------------------------------------


def agent_create(*, project: Project, user: AbstractBaseUser, name: str) -> tuple[Agent, str]:
    """Register an agent; returns it and its token (the only time the token is ever available)."""
    profile_services.require_write(user=user, project=project)
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": _("An agent needs a name.")})
    if Agent.objects.filter(project=project, name=name[:100]).exists():
        raise ValidationError({"name": _("This project already has an agent of that name.")})
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    agent = Agent.objects.create(
        project=project, name=name[:100], token_hash=hash_token(token), token_prefix=token[:12], created_by=user
    )
    return agent, token


def agent_revoke(*, agent: Agent, user: AbstractBaseUser) -> Agent:
    """Revoke the token for good; queued jobs of the agent are cancelled."""
    profile_services.require_write(user=user, project=agent.project)
    with transaction.atomic():
        if agent.revoked_at is None:
            agent.revoked_at = timezone.now()
            agent.save(update_fields=["revoked_at"])
        CaptureJob.objects.filter(agent=agent, status=JobStatus.QUEUED).update(
            status=JobStatus.CANCELLED, message="the agent was revoked", finished_at=timezone.now()
        )
    return agent


def agent_authenticate(token: str) -> Agent | None:
    """The live agent holding ``token``, or None (unknown or revoked)."""
    if not token or not token.startswith(TOKEN_PREFIX):
        return None
    agent = Agent.objects.select_related("project").filter(token_hash=hash_token(token)).first()
    if agent is None or agent.revoked:
        return None
    return agent


def agent_touch(*, agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(last_seen=timezone.now())


def agent_register(
    *, agent: Agent, hostname: str, capabilities: dict[str, Any], workloads: list[Any], version: str = ""
) -> Agent:
    """Record what the host reported. Workloads are names and descriptions only: the commands stay on the host."""
    if not isinstance(capabilities, dict) or len(str(capabilities)) > _CAPABILITIES_MAX_CHARS:
        raise ValidationError({"capabilities": _("Must be a JSON object of reasonable size.")})
    clean: list[dict[str, Any]] = []
    for item in workloads if isinstance(workloads, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
            clean.append(
                {
                    "name": item["name"][:100],
                    "kind": str(item.get("kind", ""))[:16],
                    "description": str(item.get("description", ""))[:500],
                    "timeout_s": item.get("timeout_s") if isinstance(item.get("timeout_s"), int) else None,
                }
            )
    agent.hostname = str(hostname)[:255]
    agent.capabilities = capabilities
    agent.workloads = clean[:200]
    agent.version = str(version)[:32]
    agent.last_seen = timezone.now()
    agent.save(update_fields=["hostname", "capabilities", "workloads", "version", "last_seen"])
    return agent


def agent_heartbeat(*, agent: Agent, running: list[Any]) -> list[int]:
    """Mark the agent alive; returns the ids of its jobs whose cancel was requested."""
    agent_touch(agent=agent)
    return list(
        CaptureJob.objects.filter(agent=agent, cancel_requested=True)
        .exclude(status__in=FINAL_STATUSES)
        .values_list("id", flat=True)
    )


# --- jobs -----------------------------------------------------------------------------------------------


def capture_create(
    *, project: Project, user: AbstractBaseUser, agent_id: int, workload: str, params: dict[str, Any] | None
) -> CaptureJob:
    profile_services.require_write(user=user, project=project)
    agent = Agent.objects.filter(project=project, pk=agent_id).first()
    if agent is None:
        raise ValidationError({"agent": _("No such agent in this project.")})
    if agent.revoked:
        raise ValidationError({"agent": _("This agent's token was revoked.")})
    if workload not in agent.workload_names():
        raise ValidationError(
            {"workload": _("The agent does not offer a workload named %(name)s.") % {"name": repr(workload)}})
    try:
        options = validate_params(params or {})
    except OptionsError as exc:
        raise ValidationError({"params": str(exc)}) from exc
    # keep only what was asked (the agent fills defaults), in canonical types
    clean = {k: getattr(options, k) for k in (params or {})}
    return CaptureJob.objects.create(
        project=project, agent=agent, workload=workload, params=clean, created_by=user
    )


def capture_cancel(*, job: CaptureJob, user: AbstractBaseUser) -> CaptureJob:
    """A queued job is cancelled at once; a running one when its agent stops it (told on its next call)."""
    profile_services.require_write(user=user, project=job.project)
    now = timezone.now()
    if CaptureJob.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
        status=JobStatus.CANCELLED, cancel_requested=True, message="cancelled before it started", finished_at=now
    ):
        pass
    else:
        CaptureJob.objects.filter(pk=job.pk).exclude(status__in=FINAL_STATUSES).update(cancel_requested=True)
    job.refresh_from_db()
    return job


def job_claim_next(*, agent: Agent, wait_s: float = 0) -> CaptureJob | None:
    """Hand the agent its oldest queued job, claimed by a conditional update; wait up to ``wait_s`` for one.

    Two requests (a retried poll, two agent processes with one token) can never both claim one job: the
    update changes the row only while it is still queued.
    """
    deadline = time.monotonic() + max(0.0, min(float(wait_s), MAX_WAIT_S))
    agent_touch(agent=agent)
    while True:
        queued = CaptureJob.objects.filter(agent=agent, status=JobStatus.QUEUED).order_by("created_at", "id")
        for job_id in queued.values_list("id", flat=True)[:5]:
            if CaptureJob.objects.filter(pk=job_id, status=JobStatus.QUEUED, cancel_requested=False).update(
                status=JobStatus.CLAIMED, claimed_at=timezone.now()
            ):
                return CaptureJob.objects.get(pk=job_id)
        if time.monotonic() >= deadline:
            agent_touch(agent=agent)
            return None
        time.sleep(_POLL_INTERVAL_S)


def job_report_status(*, agent: Agent, job: CaptureJob, status: str, message: str = "") -> CaptureJob:
    """Move the agent's own job along; raises ``PermissionDenied`` for a move that is not allowed."""
    if job.agent_id != agent.pk:
        raise PermissionDenied("not this agent's job")
    agent_touch(agent=agent)
    allowed = AGENT_TRANSITIONS.get(job.status, ())
    if status not in allowed:
        raise PermissionDenied(f"a job that is {job.status} cannot become {status}")
    fields: dict[str, Any] = {"status": status}
    if message:
        fields["message"] = message[:2000]
    if status in FINAL_STATUSES:
        fields["finished_at"] = timezone.now()
    # conditional on the status we read: a concurrent cancel or a second report does not get overwritten
    updated = CaptureJob.objects.filter(pk=job.pk, status=job.status).update(**fields)
    job.refresh_from_db()
    if not updated:
        raise PermissionDenied(f"the job is now {job.status}")
    return job


def job_append_log(*, agent: Agent, job: CaptureJob, tail: str) -> CaptureJob:
    if job.agent_id != agent.pk:
        raise PermissionDenied("not this agent's job")
    agent_touch(agent=agent)
    CaptureJob.objects.filter(pk=job.pk).update(log_tail=str(tail)[-LOG_TAIL_CHARS:], updated_at=timezone.now())
    job.refresh_from_db()
    return job


# --- the job's upload (the platform's resumable upload, on behalf of whoever asked for the capture) -------


def _uploader(job: CaptureJob) -> AbstractBaseUser:
    if job.created_by is None:
        raise PermissionDenied("the user who asked for this capture no longer exists")
    return job.created_by


def job_upload_start(
    *, agent: Agent, job: CaptureJob, filename: str, size: int, sha256: str = ""
) -> UploadSession:
    """Open the job's upload, or return the one already open (a restarted agent resumes it)."""
    if job.agent_id != agent.pk:
        raise PermissionDenied("not this agent's job")
    if job.status != JobStatus.UPLOADING:
        raise PermissionDenied(f"the job is {job.status}, not uploading")
    if job.cancel_requested:
        raise PermissionDenied("the job was cancelled")
    with transaction.atomic():
        locked = CaptureJob.objects.select_for_update().get(pk=job.pk)
        if locked.upload_id and locked.upload.status == UploadSession.Status.OPEN and locked.upload.size == size:
            return locked.upload
        session = profile_services.upload_session_start(
            project=locked.project,
            user=_uploader(locked),
            filename=filename,
            size=size,
            name=f"capture {locked.pk}: {locked.workload} on {agent.name}",
            sku=str(agent.capabilities.get("npu_sku") or "")[:32],
            tags=["capture", locked.workload],
            sha256=sha256,
        )
        locked.upload = session
        locked.save(update_fields=["upload", "updated_at"])
    return session


def job_upload_append(*, job: CaptureJob, offset: int, stream: Any, length: int) -> UploadSession:
    """Append a chunk, unless the job was cancelled or ended: the refusal is how the agent learns of a cancel
    between chunks (``job`` is read by the request, so the flag is current)."""
    assert job.upload is not None
    if job.cancel_requested or job.status != JobStatus.UPLOADING:
        raise PermissionDenied("the job was cancelled" if job.cancel_requested else f"the job is {job.status}")
    return profile_services.upload_session_append(
        session=job.upload, user=_uploader(job), offset=offset, stream=stream, length=length
    )


def job_upload_complete(*, agent: Agent, job: CaptureJob) -> Profile:
    """Turn the upload into a profile (the normal pipeline takes it from there) and finish the job, once."""
    if job.agent_id != agent.pk or job.upload is None:
        raise PermissionDenied("not this agent's upload")
    if job.status not in (JobStatus.UPLOADING, JobStatus.DONE):
        raise PermissionDenied(f"the job is {job.status}")
    if job.status == JobStatus.UPLOADING and job.cancel_requested:
        raise PermissionDenied("the job was cancelled")  # cancelled after the last chunk: no profile
    profile = profile_services.upload_session_complete(session=job.upload, user=_uploader(job))
    CaptureJob.objects.filter(pk=job.pk, status=JobStatus.UPLOADING).update(
        status=JobStatus.DONE, profile=profile, finished_at=timezone.now(), message=""
    )
    job.refresh_from_db()
    return profile


def job_upload_abort(*, agent: Agent, job: CaptureJob) -> bool:
    """Drop the job's open upload, its received bytes and its session (a cancelled capture leaves nothing
    half-sent, nor an open upload counted against the user's uploads in flight). A completed upload stays."""
    if job.agent_id != agent.pk:
        raise PermissionDenied("not this agent's job")
    with transaction.atomic():
        locked = CaptureJob.objects.select_for_update().get(pk=job.pk)
        session = UploadSession.objects.select_for_update().filter(
            pk=locked.upload_id, status=UploadSession.Status.OPEN
        ).first()
        if session is None:
            return False
        path = profile_services.partial_upload_path(session)
        locked.upload = None
        locked.save(update_fields=["upload", "updated_at"])
        session.delete()
        transaction.on_commit(lambda: path.unlink(missing_ok=True))
    return True
