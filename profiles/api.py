"""REST API for projects, members, invitations, chunked uploads and profile archives (docs/contract.md). Thin:
validate, call a service or selector, serialise. The profile endpoints that involve the analysis (list,
upload, detail, delete, re-run, model file, completing an upload) are ``analysis.profile_api``.

Chunked, resumable upload (for multi-GB archives):

1. ``POST /api/projects/{id}/uploads/`` ``{"filename", "size", "name"?, "sku"?, "tags"?, "sha256"?}``
   -> 201 ``{"id", "offset": 0, "size", "chunk_size", "url"}``
2. ``PUT /api/uploads/{upload_id}/`` with the raw bytes of the next chunk as the body and the header
   ``Upload-Offset: N`` (where the chunk starts) -> 200 ``{"offset": N + len}``. A chunk that does not start
   at the current offset gets 409 ``{"offset": current}``: the client continues from there.
3. To resume after a broken connection: ``GET /api/uploads/{upload_id}/`` -> ``{"offset", "size", ...}``.
4. ``POST /api/uploads/{upload_id}/complete/`` -> 201 with the profile (same shape as
   ``GET /api/profiles/{id}/``).
   If ``sha256`` was given at step 1, the assembled file must match it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import FileResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.exceptions import APIException, Throttled, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from profiles import selectors, services
from profiles.auth import token_expires_at, token_for
from profiles.models import Invitation, Membership, Project, Role, UploadSession
from profiles.throttling import login_blocked_for, login_failed, login_succeeded


def drf_error(exc: DjangoValidationError) -> APIException:
    """A service's Django ``ValidationError`` as the API's: 400, or an upload refusal's own status."""
    detail: Any = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
    http_status = getattr(exc, "http_status", None)  # services.UploadRefused: 413, 429, 503, 507
    if http_status:
        refused = APIException(detail)
        refused.status_code = http_status
        return refused
    return ValidationError(detail)


def request_object(request: Request) -> dict[str, Any]:
    """The request's body as an object (JSON, or form fields); a JSON list or scalar is a 400, not a crash."""
    data = request.data
    if not isinstance(data, dict):
        raise ValidationError({"detail": "The request body must be a JSON object."})
    return data


@contextmanager
def service_errors() -> Iterator[None]:
    """A service's Django ``ValidationError`` answered as the API's own (400, or an upload refusal's
    status)."""
    try:
        yield
    except DjangoValidationError as exc:
        raise drf_error(exc) from exc


class ProjectSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["id", "name", "description", "created_at", "role", "baseline", "regression_threshold_pct"]
        read_only_fields = ["id", "created_at", "role", "baseline", "regression_threshold_pct"]

    def get_role(self, obj: Project) -> str | None:
        request = self.context.get("request")
        membership = (
            selectors.membership_get(user=selectors.signed_in(request.user), project=obj) if request else None
        )
        return membership.role if membership else None


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "username", "role", "created_at"]


class InvitationSerializer(serializers.ModelSerializer):
    project = ProjectSerializer(read_only=True)
    username = serializers.CharField(source="user.username", read_only=True)
    invited_by = serializers.CharField(source="invited_by.username", read_only=True, default=None)

    class Meta:
        model = Invitation
        fields = ["id", "project", "username", "role", "status", "invited_by", "created_at"]


class InvitationCreateSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER)


class UploadStartSerializer(serializers.Serializer):
    filename = serializers.CharField(max_length=255)
    size = serializers.IntegerField(min_value=1)
    name = serializers.CharField(required=False, allow_blank=True, default="")
    sku = serializers.CharField(required=False, allow_blank=True, default="")
    tags = serializers.JSONField(
        required=False,
        default=list,  # type: ignore[arg-type]  # stubs: list is fine
        help_text=gettext_lazy("a list, or a comma-separated string"),
    )
    sha256 = serializers.CharField(required=False, allow_blank=True, default="")


def upload_session_data(session: UploadSession) -> dict[str, Any]:
    return {
        "id": str(session.pk),
        "project": session.project_id,
        "filename": session.filename,
        "size": session.size,
        "offset": session.received,
        "status": session.status,
        "chunk_size": settings.PYPTO_CHUNK_BYTES,
        "url": reverse("api-upload", args=[session.pk]),
        "profile": session.profile_id,
    }


class TokenView(APIView):
    """``POST /api/auth/token/`` with username and password -> ``{"token": ..., "expires": ...}``: the
    user's token while it is valid, a new one once it expired or with ``"rotate": true`` (the old key stops
    working). Requests per address are throttled, and failed passwords per user name and per address
    (profiles/throttling.py): 429 with Retry-After."""

    authentication_classes: list[type] = []
    permission_classes: list[type] = []
    parser_classes = [JSONParser, FormParser, MultiPartParser]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "auth"

    @extend_schema(request=None, responses={200: dict})
    def post(self, request: Request) -> Response:
        body = request_object(request)
        username = str(body.get("username", ""))[:150]
        wait = login_blocked_for(request, username)
        if wait:
            raise Throttled(wait=wait, detail=_("Too many failed logins: try again later."))
        serializer = AuthTokenSerializer(data=request.data, context={"request": request})
        if not serializer.is_valid():
            login_failed(request, username)
            raise ValidationError(serializer.errors)
        login_succeeded(request, username)
        rotate = str(body.get("rotate", "")).lower() in ("1", "true", "yes")
        token = token_for(serializer.validated_data["user"], rotate=rotate)
        return Response({"token": token.key, "expires": token_expires_at(token).isoformat()})


class ProjectListView(APIView):
    @extend_schema(responses=ProjectSerializer(many=True))
    def get(self, request: Request) -> Response:
        projects = selectors.projects_for_user(request.user)
        return Response(ProjectSerializer(projects, many=True, context={"request": request}).data)

    @extend_schema(request=ProjectSerializer, responses={201: ProjectSerializer})
    def post(self, request: Request) -> Response:
        serializer = ProjectSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            project = services.project_create(
                user=selectors.signed_in(request.user), **serializer.validated_data
            )
        return Response(
            ProjectSerializer(project, context={"request": request}).data, status=status.HTTP_201_CREATED
        )


class ProjectDetailView(APIView):
    @extend_schema(responses=ProjectSerializer)
    def get(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(
            user=selectors.signed_in(request.user), project_id=project_id
        )
        return Response(ProjectSerializer(project, context={"request": request}).data)


class BaselineSerializer(serializers.Serializer):
    profile = serializers.IntegerField(
        required=False, allow_null=True, help_text=gettext_lazy("a profile id; null unpins")
    )
    threshold_pct = serializers.FloatField(
        required=False, help_text=gettext_lazy("regression threshold in percent")
    )


class ProjectBaselineView(APIView):
    """``POST {"profile": id|null, "threshold_pct": float}``: pin the baseline new profiles are compared
    with."""

    @extend_schema(request=BaselineSerializer, responses={200: ProjectSerializer})
    def post(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(
            user=selectors.signed_in(request.user), project_id=project_id
        )
        serializer = BaselineSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        kwargs: dict[str, Any] = {"threshold_pct": data.get("threshold_pct")}
        if "profile" in data:
            kwargs["profile_id"] = data["profile"]
        with service_errors():
            project = services.project_baseline_set(
                project=project, user=selectors.signed_in(request.user), **kwargs
            )
        return Response(ProjectSerializer(project, context={"request": request}).data)


class ProjectMembersView(APIView):
    @extend_schema(responses=MembershipSerializer(many=True))
    def get(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(
            user=selectors.signed_in(request.user), project_id=project_id
        )
        return Response(MembershipSerializer(selectors.members_of_project(project=project), many=True).data)


class ProjectInvitationsView(APIView):
    @extend_schema(responses=InvitationSerializer(many=True))
    def get(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(
            user=selectors.signed_in(request.user), project_id=project_id
        )
        invitations = selectors.invitations_pending_of_project(project=project)
        return Response(InvitationSerializer(invitations, many=True, context={"request": request}).data)

    @extend_schema(request=InvitationCreateSerializer, responses={201: InvitationSerializer})
    def post(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(
            user=selectors.signed_in(request.user), project_id=project_id
        )
        serializer = InvitationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            invitation = services.invitation_create(
                project=project, invited_by=selectors.signed_in(request.user), **serializer.validated_data
            )
        return Response(
            InvitationSerializer(invitation, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )


class MyInvitationsView(APIView):
    @extend_schema(responses=InvitationSerializer(many=True))
    def get(self, request: Request) -> Response:
        invitations = selectors.invitations_pending_for_user(request.user)
        return Response(InvitationSerializer(invitations, many=True, context={"request": request}).data)


class InvitationAnswerView(APIView):
    accept = True

    @extend_schema(request=None, responses={200: dict})
    def post(self, request: Request, invitation_id: int) -> Response:
        invitation = selectors.invitation_get_for_invitee(
            user=selectors.signed_in(request.user), invitation_id=invitation_id
        )
        if self.accept:
            membership = services.invitation_accept(
                invitation=invitation, user=selectors.signed_in(request.user)
            )
            return Response({"status": "accepted", "project": membership.project_id, "role": membership.role})
        services.invitation_decline(invitation=invitation, user=selectors.signed_in(request.user))
        return Response({"status": "declined"})


class UploadStartView(APIView):
    @extend_schema(request=UploadStartSerializer, responses={201: dict})
    def post(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(
            user=selectors.signed_in(request.user), project_id=project_id
        )
        services.require_write(user=selectors.signed_in(request.user), project=project)
        serializer = UploadStartSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with service_errors():
            session = services.upload_session_start(
                project=project, user=selectors.signed_in(request.user), **serializer.validated_data
            )
        return Response(upload_session_data(session), status=status.HTTP_201_CREATED)


class UploadView(APIView):
    # The body is raw bytes, read as a stream: never parsed, never held in memory whole.
    parser_classes: list[type] = []

    @extend_schema(responses={200: dict})
    def get(self, request: Request, upload_id: Any) -> Response:
        session = selectors.upload_session_get_for_user(
            user=selectors.signed_in(request.user), session_id=upload_id
        )
        return Response(upload_session_data(session))

    @extend_schema(request={"application/octet-stream": bytes}, responses={200: dict, 409: dict})
    def put(self, request: Request, upload_id: Any) -> Response:
        session = selectors.upload_session_get_for_user(
            user=selectors.signed_in(request.user), session_id=upload_id
        )
        try:
            offset = _chunk_offset(request)
            length = int(request.headers.get("Content-Length", ""))
        except ValueError as exc:
            raise ValidationError(
                {"chunk": _("the Upload-Offset (or Content-Range) and Content-Length headers are required")}
            ) from exc
        try:
            with service_errors():
                session = services.upload_session_append(
                    session=session,
                    user=selectors.signed_in(request.user),
                    offset=offset,
                    stream=request._request,
                    length=length,
                )
        except services.OffsetMismatch as exc:
            return Response({"offset": exc.expected, "detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(upload_session_data(session))


def _chunk_offset(request: Request) -> int:
    """Where the chunk starts: ``Upload-Offset: N`` or ``Content-Range: bytes N-M/TOTAL``."""
    if "Upload-Offset" in request.headers:
        return int(request.headers["Upload-Offset"])
    unit, _sep, spec = request.headers.get("Content-Range", "").partition(" ")
    if unit != "bytes" or "-" not in spec:
        raise ValueError("no chunk offset")
    return int(spec.split("-", 1)[0])


class ProfileArchiveView(APIView):
    """The original upload, byte for byte, as an attachment."""

    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    def get(self, request: Request, profile_id: int) -> FileResponse:
        profile = selectors.profile_get_for_user(
            user=selectors.signed_in(request.user), profile_id=profile_id
        )
        return attachment_response(profile.archive.open("rb"), profile.original_filename)


def attachment_response(fileobj: Any, filename: str) -> FileResponse:
    """A download that browsers save, never render (no sniffing, attachment disposition)."""
    response = FileResponse(
        fileobj, as_attachment=True, filename=filename, content_type="application/octet-stream"
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
