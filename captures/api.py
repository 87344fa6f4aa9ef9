"""Capture API: agents and captures for members, and the endpoints agents call (``Authorization: Agent``).

Members (session or ``Token``):
  GET, POST /api/projects/{id}/agents/          list; register one (maintainer) -> token, shown once
  POST      /api/agents/{id}/revoke/
  GET, POST /api/projects/{id}/captures/        list; ``{"agent": id, "workload": "name", "params": {...}}``
  GET       /api/captures/{id}/                 status, log tail, profile
  POST      /api/captures/{id}/cancel/
Agents:
  POST /api/agent/register/  heartbeat/  jobs/next/ (long-poll, ``{"wait_s": N}``)
  POST /api/agent/jobs/{id}/status/  jobs/{id}/log/  jobs/{id}/upload/
  GET, PUT, DELETE /api/agent/uploads/{uuid}/   POST /api/agent/uploads/{uuid}/complete/
    (the resumable upload protocol)
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis.profile_api import ProfileSerializer
from analysis.selectors import finding_get_for_user
from analysis.texts import localized, request_language
from captures import selectors, services
from captures.auth import AgentTokenAuthentication, IsAgent
from captures.models import FINAL_STATUSES, Agent, CaptureJob
from captures.verification import VerificationRefused, verification_create, verification_of_job
from profiles import selectors as profile_selectors
from profiles.api import request_object, upload_session_data


def _drf_error(exc: DjangoValidationError) -> ValidationError:
    return ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)


# --- serialisers ----------------------------------------------------------------------------------------


# Agent endpoints take and return small JSON objects documented in pypto_core/capture/client.py.
FREE_FORM = extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)

class AgentSerializer(serializers.ModelSerializer):
    online = serializers.BooleanField(read_only=True)
    revoked = serializers.BooleanField(read_only=True)

    class Meta:
        model = Agent
        fields = [
            "id", "project", "name", "token_prefix", "online", "revoked", "last_seen", "hostname", "version",
            "capabilities", "workloads", "created_at",
        ]
        read_only_fields = fields


class CaptureJobSerializer(serializers.ModelSerializer):
    agent_name = serializers.CharField(source="agent.name", read_only=True)
    profile_url = serializers.SerializerMethodField()
    verification = serializers.SerializerMethodField(help_text=gettext_lazy(
        "A verification job: the findings, its comparison with the original, the verdicts."))
    message_localized = serializers.SerializerMethodField(help_text=gettext_lazy(
        "The message in the request's language (message_i18n holds its template; an agent's own text is "
        "shown as it came)."))

    class Meta:
        model = CaptureJob
        fields = [
            "id", "project", "agent", "agent_name", "workload", "params", "status", "cancel_requested",
            "message", "message_i18n", "message_localized", "log_tail", "profile", "profile_url",
            "created_at", "claimed_at", "finished_at", "updated_at", "remedies", "remedies_left_out",
            "verification",
        ]
        read_only_fields = fields

    def get_message_localized(self, obj: CaptureJob) -> str:
        request = self.context.get("request")
        return localized(obj.message, obj.message_i18n, request_language(request) if request else None)

    def get_profile_url(self, obj: CaptureJob) -> str | None:
        return reverse("api-profile", args=[obj.profile_id]) if obj.profile_id else None

    def get_verification(self, obj: CaptureJob) -> dict[str, Any] | None:
        """A verification job (issue 21): the findings, its comparison with the original, the verdicts."""
        return verification_of_job(job=obj)


class AgentCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)


class CaptureCreateSerializer(serializers.Serializer):
    agent = serializers.IntegerField()
    workload = serializers.CharField(max_length=100)
    params = serializers.DictField(required=False, default=dict)


def agent_job_data(job: CaptureJob) -> dict[str, Any]:
    """What an agent is told about a job: never more than the workload's name and the params."""
    return {"id": job.pk, "workload": job.workload, "params": job.params, "created_at": job.created_at,
            # what a verification job asks the host to apply; the agent's own config decides
            "remedies": [{k: r.get(k) for k in ("kind", "name", "content", "sha256", "rule")}
                         for r in job.remedies]}


# --- members --------------------------------------------------------------------------------------------


class ProjectAgentsView(APIView):
    @extend_schema(responses=AgentSerializer(many=True))
    def get(self, request: Request, project_id: int) -> Response:
        project = profile_selectors.project_get_for_user(user=request.user, project_id=project_id)
        return Response(AgentSerializer(selectors.agents_of_project(project=project), many=True).data)

    @extend_schema(request=AgentCreateSerializer, responses={201: dict})
    def post(self, request: Request, project_id: int) -> Response:
        project = profile_selectors.project_get_for_user(user=request.user, project_id=project_id)
        data = AgentCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            agent, token = services.agent_create(project=project,
                                                 user=profile_selectors.signed_in(request.user),
                                                 name=data.validated_data["name"])
        except DjangoValidationError as exc:
            raise _drf_error(exc) from exc
        return Response({**AgentSerializer(agent).data, "token": token}, status=status.HTTP_201_CREATED)


class AgentRevokeView(APIView):
    @FREE_FORM
    def post(self, request: Request, agent_id: int) -> Response:
        agent = selectors.agent_get_for_user(user=request.user, agent_id=agent_id)
        agent = services.agent_revoke(agent=agent, user=profile_selectors.signed_in(request.user))
        return Response(AgentSerializer(agent).data)


class ProjectCapturesView(APIView):
    @extend_schema(responses=CaptureJobSerializer(many=True))
    def get(self, request: Request, project_id: int) -> Response:
        project = profile_selectors.project_get_for_user(user=request.user, project_id=project_id)
        return Response(CaptureJobSerializer(selectors.jobs_of_project(project=project)[:200], many=True,
                                             context={"request": request}).data)

    @extend_schema(request=CaptureCreateSerializer, responses={201: CaptureJobSerializer})
    def post(self, request: Request, project_id: int) -> Response:
        project = profile_selectors.project_get_for_user(user=request.user, project_id=project_id)
        data = CaptureCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            job = services.capture_create(
                project=project, user=profile_selectors.signed_in(request.user),
                agent_id=data.validated_data["agent"], workload=data.validated_data["workload"],
                params=data.validated_data["params"],
            )
        except DjangoValidationError as exc:
            raise _drf_error(exc) from exc
        return Response(CaptureJobSerializer(job, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)


class CaptureDetailView(APIView):
    @extend_schema(responses=CaptureJobSerializer)
    def get(self, request: Request, job_id: int) -> Response:
        job = selectors.job_get_for_user(user=request.user, job_id=job_id)
        return Response(CaptureJobSerializer(job, context={"request": request}).data)


class CaptureCancelView(APIView):
    @extend_schema(request=None, responses=CaptureJobSerializer)
    def post(self, request: Request, job_id: int) -> Response:
        job = selectors.job_get_for_user(user=request.user, job_id=job_id)
        job = services.capture_cancel(job=job, user=profile_selectors.signed_in(request.user))
        return Response(CaptureJobSerializer(job, context={"request": request}).data)


# --- agents ---------------------------------------------------------------------------------------------


class AgentView(APIView):
    authentication_classes = [AgentTokenAuthentication]
    permission_classes = [IsAgent]

    @property
    def agent(self) -> Agent:
        return self.request.auth  # type: ignore[return-value]

    def own_job(self, job_id: int) -> CaptureJob:
        return get_object_or_404(CaptureJob.objects.select_related("upload", "created_by"), pk=job_id,
                                 agent=self.agent)

    def own_upload_job(self, upload_id: Any) -> CaptureJob:
        job = (CaptureJob.objects.select_related("upload", "created_by")
               .filter(upload_id=upload_id, agent=self.agent).first())
        if job is None or job.upload is None:
            raise Http404("No such upload")
        return job


def _job_answer(job: CaptureJob, code: int = status.HTTP_200_OK, detail: str | None = None) -> Response:
    # cancel: stop working on it (asked by a user, or the job ended on the server, e.g. failed by jobs_expire)
    body: dict[str, Any] = {"status": job.status,
                            "cancel": job.cancel_requested or job.status in FINAL_STATUSES}
    if detail:
        body["detail"] = detail
    return Response(body, status=code)


class AgentRegisterView(AgentView):
    @FREE_FORM
    def post(self, request: Request) -> Response:
        body = request_object(request)
        try:
            agent = services.agent_register(
                agent=self.agent,
                hostname=str(body.get("hostname", "")),
                capabilities=body.get("capabilities") or {},
                workloads=body.get("workloads") or [],
                version=str(body.get("version", "")),
                remedies=body.get("remedies"),
            )
        except DjangoValidationError as exc:
            raise _drf_error(exc) from exc
        return Response(
            {"agent": {"id": agent.pk, "name": agent.name}, "project": agent.project_id,
             "heartbeat_s": services.heartbeat_interval_s(), "max_wait_s": services.MAX_WAIT_S}
        )


class AgentHeartbeatView(AgentView):
    @FREE_FORM
    def post(self, request: Request) -> Response:
        body = request_object(request)
        return Response({"cancel": services.agent_heartbeat(agent=self.agent,
                                                            running=body.get("running", []))})


class AgentNextJobView(AgentView):
    @FREE_FORM
    def post(self, request: Request) -> Response:
        body = request_object(request)
        try:
            wait_s = float(body.get("wait_s", 0))
        except (TypeError, ValueError):
            wait_s = 0.0
        job = services.job_claim_next(agent=self.agent, wait_s=wait_s)
        if job is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(agent_job_data(job))


class AgentJobStatusView(AgentView):
    @FREE_FORM
    def post(self, request: Request, job_id: int) -> Response:
        job = self.own_job(job_id)
        body = request_object(request)
        try:
            job = services.job_report_status(
                agent=self.agent, job=job, status=str(body.get("status", "")),
                message=str(body.get("message", "") or ""),
            )
        except PermissionDenied as exc:
            job.refresh_from_db()
            return _job_answer(job, status.HTTP_409_CONFLICT, str(exc))
        return _job_answer(job)


class AgentJobLogView(AgentView):
    @FREE_FORM
    def post(self, request: Request, job_id: int) -> Response:
        body = request_object(request)
        job = services.job_append_log(agent=self.agent, job=self.own_job(job_id),
                                      tail=str(body.get("tail", "")))
        return _job_answer(job)


def _agent_upload_data(session: Any) -> dict[str, Any]:
    data = upload_session_data(session)
    data["url"] = reverse("api-agent-upload", args=[session.pk])
    return data


class AgentJobUploadView(AgentView):
    @FREE_FORM
    def post(self, request: Request, job_id: int) -> Response:
        job = self.own_job(job_id)
        body = request_object(request)
        try:
            size = int(body.get("size", 0))
        except (TypeError, ValueError) as exc:
            raise ValidationError({"size": "an integer"}) from exc
        try:
            session = services.job_upload_start(
                agent=self.agent, job=job, filename=str(body.get("filename", "")), size=size,
                sha256=str(body.get("sha256", "") or ""),
            )
        except PermissionDenied as exc:
            return _job_answer(job, status.HTTP_409_CONFLICT, str(exc))
        except DjangoValidationError as exc:
            raise _drf_error(exc) from exc
        return Response(_agent_upload_data(session), status=status.HTTP_201_CREATED)


class AgentUploadView(AgentView):
    parser_classes: list[type] = []  # raw bytes, streamed

    @FREE_FORM
    def get(self, request: Request, upload_id: Any) -> Response:
        job = self.own_upload_job(upload_id)
        return Response(_agent_upload_data(job.upload))

    @FREE_FORM
    def put(self, request: Request, upload_id: Any) -> Response:
        job = self.own_upload_job(upload_id)
        try:
            offset = _chunk_offset(request)
            length = int(request.headers.get("Content-Length", ""))
        except ValueError as exc:
            raise ValidationError({"chunk": "Content-Range (or Upload-Offset) and Content-Length are "
                                            "required"}) from exc
        try:
            session = services.job_upload_append(job=job, offset=offset, stream=request._request,
                                                 length=length)
        except PermissionDenied as exc:
            return _job_answer(job, status.HTTP_409_CONFLICT, str(exc))
        except DjangoValidationError as exc:
            raise _drf_error(exc) from exc
        except Exception as exc:  # the platform's OffsetMismatch: resume from the server's offset
            expected = getattr(exc, "expected", None)
            if expected is None:
                raise
            return Response({"offset": expected, "detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(_agent_upload_data(session))


    @FREE_FORM
    def delete(self, request: Request, upload_id: Any) -> Response:
        """Abort the job's open upload (the agent's answer to a cancel)."""
        services.job_upload_abort(agent=self.agent, job=self.own_upload_job(upload_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentUploadCompleteView(AgentView):
    @FREE_FORM
    def post(self, request: Request, upload_id: Any) -> Response:
        job = self.own_upload_job(upload_id)
        try:
            profile = services.job_upload_complete(agent=self.agent, job=job)
        except PermissionDenied as exc:
            return _job_answer(job, status.HTTP_409_CONFLICT, str(exc))
        except DjangoValidationError as exc:
            raise _drf_error(exc) from exc
        return Response({"profile": ProfileSerializer(profile).data}, status=status.HTTP_201_CREATED)


# --- verifying fixes (issue 21; captures/verification.py) -------------------------------------------------


class VerifySerializer(serializers.Serializer):
    agent = serializers.IntegerField(required=False)
    workload = serializers.CharField(max_length=100, required=False)
    params = serializers.DictField(required=False)
    findings = serializers.ListField(child=serializers.IntegerField(), required=False, min_length=1,
                                     max_length=20)


def _verify(request: Request, profile: Any, finding_ids: list[int]) -> Response:
    body = VerifySerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    try:
        job = verification_create(user=profile_selectors.signed_in(request.user), profile=profile,
                                  finding_ids=finding_ids,
                                  agent_id=data.get("agent"), workload=data.get("workload"),
                                  params=data.get("params"))
    except VerificationRefused as exc:
        code = status.HTTP_409_CONFLICT if exc.code == "profile_not_ready" else status.HTTP_400_BAD_REQUEST
        return Response(exc.body(), status=code)
    return Response(CaptureJobSerializer(job, context={"request": request}).data,
                    status=status.HTTP_202_ACCEPTED)


class FindingVerifyView(APIView):
    """``POST {"agent": id, "workload": name}``: run the workload again with this finding's remedies (202: the
    capture job); a named 4xx refusal (``code``) when no agent can run it."""

    @extend_schema(request=VerifySerializer, responses={202: dict, 400: dict})
    def post(self, request: Request, finding_id: int) -> Response:
        finding = finding_get_for_user(user=request.user, finding_id=finding_id)
        return _verify(request, finding.profile, [finding.pk])


class ProfileVerifyView(APIView):
    """``POST {"findings": [ids], "agent": id, "workload": name}``: the same for a ticked set of findings."""

    @extend_schema(request=VerifySerializer, responses={202: dict, 400: dict})
    def post(self, request: Request, profile_id: int) -> Response:
        profile = profile_selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
        findings = request.data.get("findings") if isinstance(request.data, dict) else None
        if not isinstance(findings, list) or not findings:
            raise ValidationError({"findings": _("a list of finding ids")})
        return _verify(request, profile, [int(i) for i in findings if isinstance(i, int)])


def _chunk_offset(request: Request) -> int:
    """START of ``Content-Range: bytes START-END/TOTAL``, else ``Upload-Offset``."""
    header = request.headers.get("Content-Range", "")
    if header.startswith("bytes ") and "-" in header:
        return int(header[6:].split("-", 1)[0])
    return int(request.headers.get("Upload-Offset", ""))
