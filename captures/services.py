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
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User as Account
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from analysis.profile_services import upload_complete
from captures.models import (
    ACTIVE_STATUSES,
    AGENT_TRANSITIONS,
    FINAL_STATUSES,
    HEARTBEAT_S,
    Agent,
    CaptureJob,
    JobStatus,
)
from profiles import services as profile_services
from profiles.models import Profile, Project, UploadSession
from pypto_core.capture.options import OptionsError, validate_params
from pypto_core.i18n import Message, msg, render, stored_message

TOKEN_PREFIX = "pyag_"
LOG_TAIL_CHARS = 16_000
__all__ = ["HEARTBEAT_S"]  # re-exported for the API
MAX_WAIT_S = 25  # long-poll ceiling: below common proxy idle timeouts (30-60 s)
_POLL_INTERVAL_S = 0.5
_CAPABILITIES_MAX_CHARS = 64_000


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# --- agents ---------------------------------------------------------------------------------------------


def agent_create(*, project: Project, user: Account, name: str) -> tuple[Agent, str]:
    """Register an agent; returns it and its token (the only time the token is ever available)."""
    profile_services.require_write(user=user, project=project)
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": _("An agent needs a name.")})
    if Agent.objects.filter(project=project, name=name[:100]).exists():
        raise ValidationError({"name": _("This project already has an agent of that name.")})
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    agent = Agent.objects.create(
        project=project, name=name[:100], token_hash=hash_token(token), token_prefix=token[:12],
        created_by=user
    )
    return agent, token


MESSAGE_CHARS = 2000  # what a job keeps of a message


def message_fields(message: Message) -> dict[str, Any]:
    """The columns a server-written job message sets: ``message`` in English (the API's and the log's) and
    ``message_i18n``, from which each page shows it in its reader's language."""
    return {"message": render(message)[:MESSAGE_CHARS], "message_i18n": stored_message(message)}


def _status_word(status: str) -> Message:
    """A job status inside a message: its label, translated with the message."""
    with translation.override("en"):
        return msg(str(JobStatus(status).label))


def agent_revoke(*, agent: Agent, user: Account) -> Agent:
    """Revoke the token for good; queued jobs of the agent are cancelled."""
    profile_services.require_write(user=user, project=agent.project)
    with transaction.atomic():
        if agent.revoked_at is None:
            agent.revoked_at = timezone.now()
            agent.save(update_fields=["revoked_at"])
        CaptureJob.objects.filter(agent=agent, status=JobStatus.QUEUED).update(
            status=JobStatus.CANCELLED, finished_at=timezone.now(),
            **message_fields(msg(gettext_noop("the agent was revoked"))),
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
    *, agent: Agent, hostname: str, capabilities: dict[str, Any], workloads: list[Any], version: str = "",
    remedies: Any = None,
) -> Agent:
    """Record what the host reported. Workloads are names and descriptions only: the commands stay on the
    host. ``remedies``: what the host lets a verification job change (kept in its capabilities, as
    reported)."""
    if not isinstance(capabilities, dict) or len(str(capabilities)) > _CAPABILITIES_MAX_CHARS:
        raise ValidationError({"capabilities": _("Must be a JSON object of reasonable size.")})
    capabilities = {**capabilities, "remedies": _remedy_policy(remedies)}
    clean: list[dict[str, Any]] = []
    for item in workloads if isinstance(workloads, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
            clean.append(
                {
                    "name": item["name"][:100],
                    "kind": str(item.get("kind", ""))[:16],
                    "description": str(item.get("description", ""))[:500],
                    "timeout_s": item.get("timeout_s") if isinstance(item.get("timeout_s"), int) else None,
                    "patchable": item.get("patchable") is True,  # declares a source folder a patch may touch
                }
            )
    agent.hostname = str(hostname)[:255]
    agent.capabilities = capabilities
    agent.workloads = clean[:200]
    agent.version = str(version)[:32]
    agent.last_seen = timezone.now()
    agent.save(update_fields=["hostname", "capabilities", "workloads", "version", "last_seen"])
    return agent


def _remedy_policy(raw: Any) -> dict[str, list[str]]:
    raw = raw if isinstance(raw, dict) else {}
    kinds = raw.get("kinds") if isinstance(raw.get("kinds"), list) else []
    env = raw.get("env") if isinstance(raw.get("env"), list) else []
    kinds = [k for k in kinds if k in ("env", "patch", "aoe")]
    return {"kinds": kinds, "env": [str(v)[:128] for v in env if isinstance(v, str)][:100]}


def heartbeat_interval_s() -> int:
    """What agents are told at registration: a third of the
    staleness window, so two lost beats are harmless."""
    return max(1, min(HEARTBEAT_S, settings.PYPTO_CAPTURE_AGENT_STALE_S // 3))


def agent_heartbeat(*, agent: Agent, running: list[Any]) -> list[int]:
    """Mark the agent alive; returns the ids of its jobs to stop: a cancel was requested, or a job it still
    runs has ended on the server (failed by ``jobs_expire`` while the agent was out of touch)."""
    agent_touch(agent=agent)
    items = running if isinstance(running, list) else []
    ids = [int(i) for i in items if isinstance(i, int) or (isinstance(i, str) and i.isdigit())][:100]
    return list(
        CaptureJob.objects.filter(agent=agent)
        .filter(
            (Q(cancel_requested=True) & ~Q(status__in=FINAL_STATUSES))
            | (Q(pk__in=ids) & Q(status__in=FINAL_STATUSES))
        )
        .values_list("id", flat=True)
    )


# --- jobs -----------------------------------------------------------------------------------------------


def capture_create(
    *, project: Project, user: Account, agent_id: int, workload: str, params: dict[str, Any] | None
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


def capture_cancel(*, job: CaptureJob, user: Account) -> CaptureJob:
    """A queued job is cancelled at once; a running one when its agent stops it (told on its next call)."""
    profile_services.require_write(user=user, project=job.project)
    now = timezone.now()
    if CaptureJob.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
        status=JobStatus.CANCELLED, cancel_requested=True, finished_at=now,
        **message_fields(msg(gettext_noop("cancelled before it started"))),
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
    wait_until = time.monotonic() + max(0.0, min(float(wait_s), MAX_WAIT_S))
    agent_touch(agent=agent)
    while True:
        queued = CaptureJob.objects.filter(agent=agent, status=JobStatus.QUEUED).order_by("created_at", "id")
        for job_id, workload, params in queued.values_list("id", "workload", "params")[:5]:
            now = timezone.now()
            job_deadline = now + timedelta(seconds=job_budget_s(agent=agent, workload=workload,
                                                                params=params))
            if CaptureJob.objects.filter(pk=job_id, status=JobStatus.QUEUED, cancel_requested=False).update(
                status=JobStatus.CLAIMED, claimed_at=now, deadline=job_deadline
            ):
                return CaptureJob.objects.get(pk=job_id)
        if time.monotonic() >= wait_until:
            agent_touch(agent=agent)
            return None
        time.sleep(_POLL_INTERVAL_S)


def job_budget_s(*, agent: Agent, workload: str, params: dict[str, Any] | None) -> int:
    """Seconds a claimed job may take before it is failed: the timeout the agent reported for the workload
    (the project default when it reported none) plus the grace. A vLLM workload profiles for ``duration_s``,
    then waits up to its timeout for stop_profile and again for the folder to settle
    (pypto_core/capture/workloads.py profile_vllm)."""
    info = next((w for w in agent.workloads if isinstance(w, dict) and w.get("name") == workload), {})
    timeout = info.get("timeout_s")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        timeout = settings.PYPTO_CAPTURE_DEFAULT_TIMEOUT_S
    if info.get("kind") == "vllm":
        try:
            duration = validate_params(params or {}).duration_s
        except OptionsError:
            duration = 0
        timeout = 2 * timeout + duration
    return int(timeout) + settings.PYPTO_CAPTURE_GRACE_S


def _utc(moment: datetime) -> str:
    return moment.astimezone(dt_timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def on_recovery_sweep(**kwargs: Any) -> dict[str, int]:
    """The recovery sweep's part here (``analysis.signals.recovery_sweep``; connected in captures/apps.py)."""
    return {"capture_jobs": jobs_expire()}


def jobs_expire(*, project_id: int | None = None, job_id: int | None = None) -> int:
    """Fail the jobs an agent holds but will not finish; returns how many changed. Idempotent and cheap, so it
    runs on read (the capture selectors) as well as from anywhere periodic.

    - the agent sent nothing for PYPTO_CAPTURE_AGENT_STALE_S (killed, host down, network gone): its claimed,
      running and uploading jobs fail, naming the agent and its last request;
    - a job still claimed or running past its deadline (set at the claim) fails, the agent being alive.
    Each change is a conditional UPDATE on the state that was read, so a concurrent report, cancel or second
    reader changes nothing twice. An agent that comes back is refused these jobs (its ledger never reruns
    one).
    """
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.PYPTO_CAPTURE_AGENT_STALE_S)
    silent = Q(agent__last_seen__lt=stale_before) | Q(agent__last_seen__isnull=True)
    late = Q(deadline__lt=now, status__in=(JobStatus.CLAIMED, JobStatus.RUNNING))
    held = CaptureJob.objects.filter(status__in=ACTIVE_STATUSES)
    if project_id is not None:
        held = held.filter(project_id=project_id)
    if job_id is not None:
        held = held.filter(pk=job_id)
    changed = 0
    for job in held.filter(silent | late).select_related("agent")[:500]:
        agent = job.agent
        if agent.last_seen is None or agent.last_seen < stale_before:
            seen = (_utc(agent.last_seen) if agent.last_seen
                    else msg(gettext_noop("registration (it never called)")))
            message = msg(gettext_noop("agent {agent} stopped sending heartbeats at {seen}; the job was "
                                       "{status} (no request for over {seconds} s)"),
                          agent=agent.name, seen=seen, status=_status_word(job.status),
                          seconds=settings.PYPTO_CAPTURE_AGENT_STALE_S)
            condition = silent
        else:
            assert job.deadline is not None  # matched by its deadline
            message = msg(gettext_noop("no result by the job's deadline, {deadline} (the workload's timeout "
                                       "plus {grace} s); agent {agent} is online but the job was still "
                                       "{status}"),
                          deadline=_utc(job.deadline), grace=settings.PYPTO_CAPTURE_GRACE_S, agent=agent.name,
                          status=_status_word(job.status))
            condition = late
        changed += CaptureJob.objects.filter(condition, pk=job.pk, status=job.status).update(
            status=JobStatus.FAILED, finished_at=now, updated_at=now, **message_fields(message)
        )
    return changed


def job_report_status(*, agent: Agent, job: CaptureJob, status: str, message: str = "") -> CaptureJob:
    """Move the agent's own job along; raises ``PermissionDenied`` for a move that is not allowed."""
    if job.agent_id != agent.pk:
        raise PermissionDenied("not this agent's job")
    agent_touch(agent=agent)
    allowed = AGENT_TRANSITIONS.get(job.status, ())
    if status not in allowed:
        raise PermissionDenied(f"a job that is {job.status} cannot become {status}")
    fields: dict[str, Any] = {"status": status}
    if message:  # the agent's own words, shown as they came
        fields.update(message=message[:MESSAGE_CHARS], message_i18n=None)
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
    CaptureJob.objects.filter(pk=job.pk).update(log_tail=str(tail)[-LOG_TAIL_CHARS:],
                                                updated_at=timezone.now())
    job.refresh_from_db()
    return job


# --- the job's upload (the platform's resumable upload, on behalf of whoever asked for the capture) -------


def _uploader(job: CaptureJob) -> Account:
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
        upload = locked.upload
        if upload is not None and upload.status == UploadSession.Status.OPEN and upload.size == size:
            return upload
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
        raise PermissionDenied("the job was cancelled" if job.cancel_requested
                               else f"the job is {job.status}")
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
    profile = upload_complete(session=job.upload, user=_uploader(job))
    CaptureJob.objects.filter(pk=job.pk, status=JobStatus.UPLOADING).update(
        status=JobStatus.DONE, profile=profile, finished_at=timezone.now(), message="", message_i18n=None
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
        if locked.upload_id is None:
            return False
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
