"""Writes on projects, members, invitations, uploads and profile rows (``<entity>_<action>``).

This app stores an upload and makes its row; it knows nothing of the analysis. What also starts, re-runs or
removes a profile's analysis is ``analysis.profile_services``, which calls these.
"""

from __future__ import annotations

import ast
import enum
import errno
import hashlib
import os
import re
import uuid
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import IO, Any, Final, Protocol

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files import File
from django.db import transaction
from django.utils import timezone
from django.utils.text import get_valid_filename
from django.utils.translation import gettext as _

from profiles.models import (
    IN_PIPELINE,
    MODEL_FILE_MAX_BYTES,
    Invitation,
    Membership,
    Profile,
    ProfileStatus,
    Project,
    Role,
    UploadSession,
)
from profiles.selectors import can_write, membership_get
from pypto_core.archive import detect_upload_kind
from pypto_core.errors import InputError

_HASH_BLOCK = 1024 * 1024


def require_write(*, user: Account, project: Project) -> None:
    """Owners and maintainers change a project's data; viewers get 403 (they can see it exists)."""
    if not can_write(user=user, project=project):
        raise PermissionDenied(_("Viewers cannot change this project."))


# --- projects and members -------------------------------------------------------------------------


@transaction.atomic
def project_create(*, user: Account, name: str, description: str = "") -> Project:
    name = name.strip()
    if not name:
        raise ValidationError({"name": _("A project needs a name.")})
    project = Project.objects.create(name=name[:200], description=description, created_by=user)
    Membership.objects.create(project=project, user=user, role=Role.OWNER)
    return project


@transaction.atomic
def invitation_create(
    *, project: Project, invited_by: Account, username: str, role: str = Role.VIEWER
) -> Invitation:
    require_write(user=invited_by, project=project)
    if role not in Role.values:
        raise ValidationError({"role": _("Unknown role.")})
    inviter = membership_get(user=invited_by, project=project)
    if role == Role.OWNER and (inviter is None or inviter.role != Role.OWNER):
        raise PermissionDenied(_("Only an owner can invite another owner."))
    # Same answer whether the username is unknown or not, so invitations cannot probe for accounts.
    invitee = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
    if invitee is None:
        raise ValidationError({"username": _("No active user with that username.")})
    if Membership.objects.filter(project=project, user=invitee).exists():
        raise ValidationError({"username": _("That user is already a member.")})
    existing = Invitation.objects.filter(
        project=project, user=invitee, status=Invitation.Status.PENDING
    ).first()
    if existing is not None:
        existing.role = role
        existing.invited_by = invited_by
        existing.save(update_fields=["role", "invited_by"])
        return existing
    return Invitation.objects.create(project=project, user=invitee, role=role, invited_by=invited_by)


def _invitation_answer(*, invitation: Invitation, user: Account, status: str, not_yours: str) -> None:
    """Mark ``user``'s own pending invitation answered; anyone else's, or one already answered, is refused."""
    if invitation.user_id != user.pk or invitation.status != Invitation.Status.PENDING:
        raise PermissionDenied(not_yours)
    invitation.status = status
    invitation.answered_at = timezone.now()
    invitation.save(update_fields=["status", "answered_at"])


@transaction.atomic
def invitation_accept(*, invitation: Invitation, user: Account) -> Membership:
    _invitation_answer(
        invitation=invitation,
        user=user,
        status=Invitation.Status.ACCEPTED,
        not_yours=_("This invitation is not yours to accept."),
    )
    membership, _created = Membership.objects.get_or_create(
        project=invitation.project, user=user, defaults={"role": invitation.role}
    )
    return membership


@transaction.atomic
def invitation_decline(*, invitation: Invitation, user: Account) -> None:
    _invitation_answer(
        invitation=invitation,
        user=user,
        status=Invitation.Status.DECLINED,
        not_yours=_("This invitation is not yours to decline."),
    )


@transaction.atomic
def membership_remove(*, project: Project, user: Account, member: Membership) -> None:
    actor = membership_get(user=user, project=project)
    if actor is None or actor.role != Role.OWNER:
        raise PermissionDenied(_("Only an owner can remove members."))
    if member.role == Role.OWNER and project.memberships.filter(role=Role.OWNER).count() == 1:
        raise ValidationError(_("A project keeps at least one owner."))
    member.delete()


class _Unset(enum.Enum):
    TOKEN = 0


class ByteStream(Protocol):
    """What an upload chunk is read from: a file, or the request itself (read as it arrives)."""

    def read(self, size: int = -1, /) -> bytes: ...


_UNSET: Final = _Unset.TOKEN  # "leave the baseline as it is", unlike None ("no baseline")
MAX_REGRESSION_THRESHOLD_PCT = 1000.0


@transaction.atomic
def project_baseline_set(
    *,
    project: Project,
    user: Account,
    profile_id: int | None | _Unset = _UNSET,
    threshold_pct: float | None = None,
) -> Project:
    """Pin (or, with ``profile_id=None``, unpin) the project's baseline and set its regression threshold.

    Every profile that becomes ready afterwards is compared with the baseline (analysis.regressions).
    A profile of another project is refused with the same message as a missing one (no existence oracle).
    """
    require_write(user=user, project=project)
    fields = []
    if profile_id is not _UNSET:
        if profile_id is None:
            project.baseline = None
        else:
            profile = Profile.objects.filter(pk=profile_id, project=project).first()
            if profile is None:
                raise ValidationError(
                    {"profile": _("No profile %(id)s in this project.") % {"id": profile_id}}
                )
            if profile.status != ProfileStatus.READY:
                raise ValidationError(
                    {
                        "profile": _("%(name)s is %(status)s: pin a ready profile.")
                        % {"name": profile.name, "status": profile.status}
                    }
                )
            project.baseline = profile
        fields.append("baseline")
    if threshold_pct is not None:
        if not 0 < threshold_pct <= MAX_REGRESSION_THRESHOLD_PCT:
            raise ValidationError(
                {"threshold_pct": _("The threshold is a percentage above 0 and at most 1000.")}
            )
        project.regression_threshold_pct = float(threshold_pct)
        fields.append("regression_threshold_pct")
    if fields:
        project.save(update_fields=fields)
    return project


# --- uploads --------------------------------------------------------------------------------------


def _clean_filename(filename: str) -> str:
    base = os.path.basename(filename.replace("\\", "/")).strip()
    try:
        cleaned = get_valid_filename(base)
    except Exception:  # SuspiciousFileOperation for names like ".."
        cleaned = ""
    if not cleaned:
        raise ValidationError({"file": _("The file has no usable name.")})
    return cleaned[:200]


# What a profile's name leaves out when the upload gives none: the archive or trace suffix it came with
_UPLOAD_SUFFIX = re.compile(r"(\.pt\.trace)?\.(json|csv|db)(\.gz)?$|\.(tar\.gz|tgz|tar|zip)$", re.I)


def default_profile_name(filename: str) -> str:
    """A profile's name where the upload gives none: ``rank0_ascend_pt.zip`` -> ``rank0_ascend_pt``,
    ``eager.pt.trace.json.gz`` -> ``eager``; the file's name as it is where nothing else is left."""
    return _UPLOAD_SUFFIX.sub("", filename) or filename


def _upload_kind(filename: str) -> str:
    try:
        return detect_upload_kind(filename)
    except InputError as exc:
        raise ValidationError({"file": str(exc)}) from exc


def _clean_tags(tags: Iterable[str] | str | None) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = tags.split(",")
    if not isinstance(tags, (list, tuple)):
        raise ValidationError({"tags": _("Tags are a list or a comma-separated string.")})
    return [str(t).strip()[:64] for t in tags if t and str(t).strip()][:32]


def _sha256_of(stream: IO[bytes]) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    while True:
        block = stream.read(_HASH_BLOCK)
        if not block:
            break
        digest.update(block)
        size += len(block)
    stream.seek(0)
    return digest.hexdigest(), size


class UploadRefused(ValidationError):
    """An upload refused for a limit or a storage problem, with the HTTP status the API answers:
    413 (too large, project quota), 429 (too many uploads in flight), 503 (storage unreachable),
    507 (storage full). Forms show it like any ValidationError."""

    def __init__(self, message: str, *, http_status: int, field: str = "file") -> None:
        super().__init__({field: [message]})
        self.http_status = http_status


def upload_limits_check(
    *, project: Project, user: Account, size: int, filename: str, concurrency: bool = True
) -> None:
    """Size, project quota and uploads in flight (per user and per project), from settings (env)."""
    if size > settings.PYPTO_MAX_UPLOAD_BYTES:
        raise UploadRefused(
            _("%(name)s is %(size)d bytes, over the upload limit of %(limit)d bytes.")
            % {"name": filename, "size": size, "limit": settings.PYPTO_MAX_UPLOAD_BYTES},
            http_status=413,
        )
    quota = settings.PYPTO_PROJECT_QUOTA_BYTES
    if quota:
        used = sum(Profile.objects.filter(project=project, group__isnull=True).values_list("size", flat=True))
        if used + size > quota:
            raise UploadRefused(
                _(
                    "%(name)s (%(size)d bytes) would take the project over its storage quota "
                    "(%(used)d of %(quota)d bytes used). Delete old profiles or ask an administrator."
                )
                % {"name": filename, "size": size, "used": used, "quota": quota},
                http_status=413,
            )
    if not concurrency:
        return
    for scope, limit, profiles, sessions in (
        (
            _("you"),
            settings.PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_USER,
            Profile.objects.filter(created_by=user),
            UploadSession.objects.filter(created_by=user),
        ),
        (
            _("this project"),
            settings.PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_PROJECT,
            Profile.objects.filter(project=project),
            UploadSession.objects.filter(project=project),
        ),
    ):
        if not limit:
            continue
        busy = (
            profiles.filter(group__isnull=True, status__in=IN_PIPELINE).count()
            + sessions.filter(status=UploadSession.Status.OPEN).count()
        )
        if busy >= limit:
            raise UploadRefused(
                _(
                    "Too many uploads in flight for %(scope)s (%(busy)d, limit %(limit)d): wait until some "
                    "are analysed, then upload again."
                )
                % {"scope": scope, "busy": busy, "limit": limit},
                http_status=429,
            )


def _storage_save(field: Any, name: str, content: File, filename: str) -> None:
    """Save to storage; a full or unreachable store is a clear refusal (the caller keeps the bytes)."""
    try:
        field.save(name, content, save=False)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise UploadRefused(
                _("Storage is full: %(name)s was not stored (%(why)s). Try again later.")
                % {"name": filename, "why": exc.strerror},
                http_status=507,
            ) from exc
        raise
    except Exception as exc:
        if type(exc).__module__.startswith(("botocore", "urllib3")):
            raise UploadRefused(
                _("Storage is unreachable: %(name)s was not stored (%(why)s). Try again later.")
                % {"name": filename, "why": type(exc).__name__},
                http_status=503,
            ) from exc
        raise


def profile_create(
    *,
    project: Project,
    user: Account,
    file: File,
    filename: str,
    name: str = "",
    sku: str = "",
    tags: Iterable[str] | str | None = None,
    model_file: File | None = None,
    concurrency: bool = True,
) -> Profile:
    """Store the upload untouched (kept for good), record its checksum, and make its row (status uploaded);
    ``analysis.profile_services.profile_upload`` queues its analysis in the same transaction.

    ``model_file`` (optional): the user's model source, for the remedies' unified diffs.
    """
    require_write(user=user, project=project)
    filename = _clean_filename(filename)
    kind = _upload_kind(filename)
    model_name = _check_model_file(file=model_file, filename=model_file.name or "") if model_file else ""
    file.seek(0)
    sha256, size = _sha256_of(file)
    if size == 0:
        raise ValidationError({"file": _("%(name)s is empty.") % {"name": filename}})
    upload_limits_check(project=project, user=user, size=size, filename=filename, concurrency=concurrency)
    profile = Profile(
        project=project,
        name=(name.strip() or default_profile_name(filename))[:200],
        sku=sku.strip()[:32],
        tags=_clean_tags(tags),
        original_filename=filename,
        upload_kind=kind,
        size=size,
        sha256=sha256,
        created_by=user,
        status=ProfileStatus.UPLOADED,
    )
    # The bytes go to storage before the row exists: a failed insert leaves an orphan file, never a row
    # that points at nothing.
    _storage_save(profile.archive, filename, file, filename)
    if model_file is not None:
        _storage_save(profile.model_file, model_name, model_file, model_name)
    profile.save()
    return profile


def _partial_path(session: UploadSession) -> Path:
    return Path(settings.PYPTO_UPLOAD_TMP_DIR) / f"{session.pk}.part"


def upload_session_start(
    *,
    project: Project,
    user: Account,
    filename: str,
    size: int,
    name: str = "",
    sku: str = "",
    tags: Iterable[str] | str | None = None,
    sha256: str = "",
) -> UploadSession:
    require_write(user=user, project=project)
    filename = _clean_filename(filename)
    _upload_kind(filename)
    if size <= 0:
        raise ValidationError({"size": _("The file is empty.")})
    upload_limits_check(project=project, user=user, size=size, filename=filename)
    sha256 = sha256.strip().lower()
    if sha256 and (len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256)):
        raise ValidationError({"sha256": _("Not a SHA-256 hex digest.")})
    session = UploadSession.objects.create(
        id=uuid.uuid4(),
        project=project,
        created_by=user,
        filename=filename,
        size=size,
        name=name.strip()[:200],
        sku=sku.strip()[:32],
        tags=_clean_tags(tags),
        sha256=sha256,
    )
    path = _partial_path(session)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return session


class OffsetMismatch(Exception):
    """The chunk does not start where the upload stands; the client resumes from ``expected``."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        super().__init__(f"upload is at byte {expected}")


def upload_session_append(
    *, session: UploadSession, user: Account, offset: int, stream: ByteStream, length: int
) -> UploadSession:
    """Append ``length`` bytes from ``stream`` at ``offset``. Rows are locked, so chunks never interleave."""
    require_write(user=user, project=session.project)
    max_chunk = settings.PYPTO_CHUNK_BYTES * 2
    if length <= 0 or length > max_chunk:
        raise ValidationError({"chunk": _("A chunk must be 1 to %(n)d bytes.") % {"n": max_chunk}})
    with transaction.atomic():
        locked = UploadSession.objects.select_for_update().get(pk=session.pk)
        if locked.status != UploadSession.Status.OPEN:
            raise ValidationError({"upload": _("This upload is already complete.")})
        if offset != locked.received:
            raise OffsetMismatch(locked.received)
        if offset + length > locked.size:
            raise ValidationError({"chunk": _("The chunk goes past the declared size.")})
        path = _partial_path(locked)
        with open(path, "r+b" if path.exists() else "wb") as out:
            # Truncate first: bytes of an earlier, interrupted write beyond ``received`` are not data.
            out.truncate(offset)
            out.seek(offset)
            remaining = length
            while remaining:
                block = stream.read(min(_HASH_BLOCK, remaining))
                if not block:
                    break
                out.write(block)
                remaining -= len(block)
        if remaining:
            # The connection broke mid-chunk: keep what is committed, the client resumes from there.
            raise ValidationError({"chunk": _("The chunk was shorter than its Content-Length.")})
        locked.received = offset + length
        locked.save(update_fields=["received", "updated_at"])
    return locked


def upload_session_complete(*, session: UploadSession, user: Account) -> Profile:
    """Turn a fully received upload into a profile (``profile_create``). Completing twice returns the same
    profile; ``analysis.profile_services.upload_complete`` queues its analysis."""
    require_write(user=user, project=session.project)
    with transaction.atomic():
        locked = UploadSession.objects.select_for_update().get(pk=session.pk)
        if locked.status == UploadSession.Status.COMPLETE and locked.profile_id:
            return Profile.objects.get(pk=locked.profile_id)
        if locked.received != locked.size:
            raise ValidationError(
                {
                    "upload": _("Received %(got)d of %(size)d bytes.")
                    % {"got": locked.received, "size": locked.size}
                }
            )
        path = _partial_path(locked)
        with open(path, "rb") as fh:
            if locked.sha256:
                digest, _size = _sha256_of(fh)
                if digest != locked.sha256:
                    raise ValidationError({"sha256": _("Checksum mismatch: the upload is corrupt.")})
            profile = profile_create(
                project=locked.project,
                user=user,
                file=File(fh, name=locked.filename),
                filename=locked.filename,
                name=locked.name,
                sku=locked.sku,
                tags=locked.tags,
                concurrency=False,  # counted when the upload started
            )
        locked.status = UploadSession.Status.COMPLETE
        locked.profile = profile
        locked.save(update_fields=["status", "profile", "updated_at"])
        transaction.on_commit(lambda: path.unlink(missing_ok=True))
    return profile


# --- profiles -------------------------------------------------------------------------------------


def _check_model_file(*, file: File, filename: str) -> str:
    """A model file is one UTF-8 Python module under the size limit; returns its cleaned name.

    It is parsed (never run) so that a wrong file is refused here rather than making diffs nobody can apply.
    """
    name = _clean_filename(filename)
    if not name.endswith(".py"):
        raise ValidationError({"file": _("%(name)s is not a Python file (.py).") % {"name": name}})
    file.seek(0)
    raw = file.read(MODEL_FILE_MAX_BYTES + 1)
    file.seek(0)
    if not raw:
        raise ValidationError({"file": _("%(name)s is empty.") % {"name": name}})
    if len(raw) > MODEL_FILE_MAX_BYTES:
        raise ValidationError(
            {"file": _("%(name)s is larger than %(n)d bytes.") % {"name": name, "n": MODEL_FILE_MAX_BYTES}}
        )
    try:
        ast.parse(raw.decode("utf-8"), filename=name)
    except UnicodeDecodeError as exc:
        raise ValidationError({"file": _("%(name)s is not UTF-8 text.") % {"name": name}}) from exc
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValidationError(
            {"file": _("%(name)s is not valid Python: %(why)s") % {"name": name, "why": str(exc)[:200]}}
        ) from exc
    return name


def profile_model_file_set(*, profile: Profile, user: Account, file: File, filename: str) -> None:
    """Attach (or replace) the profile's model file; ``analysis.profile_services.profile_model_file_attach``
    also makes the remedies again with it."""
    require_write(user=user, project=profile.project)
    name = _check_model_file(file=file, filename=filename)
    old = profile.model_file.name if profile.model_file else ""
    storage = profile.model_file.storage
    profile.model_file.save(
        name, file, save=False
    )  # bytes first: a failed update leaves an orphan, not a hole
    with transaction.atomic():
        Profile.objects.filter(pk=profile.pk).update(model_file=profile.model_file.name)
        profile.refresh_from_db(fields=["status", "model_file"])
        if old and old != profile.model_file.name:
            transaction.on_commit(lambda: storage.delete(old))


def partial_upload_path(session: UploadSession) -> Path:
    """Where a chunked upload's bytes wait (tests and operators look here)."""
    return _partial_path(session)


def remove_stale_partials(*, older_than_days: int = 7) -> int:
    """Drop partial uploads nobody resumed; returns how many."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    count = 0
    for session in UploadSession.objects.filter(status=UploadSession.Status.OPEN, updated_at__lt=cutoff):
        _partial_path(session).unlink(missing_ok=True)
        session.delete()
        count += 1
    return count
