"""REST API for analysis results: findings, the what-if replay, artifacts, downloads, comparisons, the fix
ledger and regressions (docs/contract.md). The profiles themselves are ``analysis.profile_api``; verifying a
fix on an agent is ``captures.api``."""

from __future__ import annotations

import io
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import FileResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import selectors
from analysis.artifact_services import artifact_set_zip
from analysis.comparisons import comparison_create
from analysis.fix_ledger import fix_ledger, verdicts_of_comparison
from analysis.models import Artifact, Comparison
from analysis.pipeline.diagnose import profile_what_if
from analysis.regressions import regressions_of_project
from analysis.texts import localized, localized_list, request_language
from profiles.api import attachment_response
from profiles.models import ProfileStatus
from profiles.selectors import profile_get_for_user, project_get_for_user, signed_in
from profiles.services import require_write
from pypto_core.errors import InputError
from pypto_core.i18n import pick_language
from pypto_core.remedies.artifact import MEDIA_TYPES


class ArtifactSerializer(serializers.ModelSerializer):
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Artifact
        fields = ["id", "name", "kind", "rule", "size", "sha256", "version", "created_at", "download_url",
                  "header"]

    def get_download_url(self, obj: Artifact) -> str:
        return reverse("api-artifact-download", args=[obj.pk])


class ComparisonSerializer(serializers.ModelSerializer):
    error_localized = serializers.SerializerMethodField(help_text=gettext_lazy(
        "The failure's reason in the request's language (?lang=, or Accept-Language); empty when none."))
    warnings_localized = serializers.SerializerMethodField(help_text=gettext_lazy(
        "result.warnings in the request's language (result.warning_messages holds their templates)."))
    regression_localized = serializers.SerializerMethodField(help_text=gettext_lazy(
        "The regression lines in the request's language (regression_messages holds their templates)."))

    class Meta:
        model = Comparison
        fields = ["id", "project", "base", "candidate", "status", "error", "error_message", "error_localized",
                  "result", "warnings_localized", "created_at", "finished_at",
                  "auto", "is_regression", "regression", "regression_messages", "regression_localized",
                  "threshold_pct"]

    def _language(self) -> str | None:
        request = self.context.get("request")
        return request_language(request) if request is not None else None

    def get_error_localized(self, obj: Comparison) -> str:
        return localized(obj.error, obj.error_message, self._language())

    def get_regression_localized(self, obj: Comparison) -> list[str]:
        return localized_list(obj.regression or [], obj.regression_messages, self._language())

    def get_warnings_localized(self, obj: Comparison) -> list[str]:
        result = obj.result or {}
        return localized_list(result.get("warnings") or [], result.get("warning_messages"), self._language())


class ComparisonCreateSerializer(serializers.Serializer):
    base = serializers.IntegerField()
    candidate = serializers.IntegerField()


class ProfileFindingsView(APIView):
    """The findings in the ``analyze`` JSON shape; ``?lang=`` or ``Accept-Language`` (en, zh-Hans) picks the
    language of their text, never their ids or numbers."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = profile_get_for_user(user=request.user, profile_id=profile_id)
        language = pick_language(request.query_params.get("lang"),
                                 accept_language=request.headers.get("Accept-Language"))
        response = Response(selectors.findings_report(profile=profile, language=language))
        response["Content-Language"] = language
        response["Vary"] = "Accept-Language"
        return response


class WhatIfSerializer(serializers.Serializer):
    rules = serializers.ListField(child=serializers.CharField(max_length=64), min_length=1, max_length=50)


class ProfileWhatIfView(APIView):
    """``POST {"rules": [...]}``: the run replayed with those findings fixed together (``what_if``)."""

    @extend_schema(request=WhatIfSerializer, responses={200: dict})
    def post(self, request: Request, profile_id: int) -> Response:
        profile = profile_get_for_user(user=request.user, profile_id=profile_id)
        if profile.status != ProfileStatus.READY or not profile.parquet_prefix:
            raise ValidationError({"profile": _("the profile is not ready")})
        body = WhatIfSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            result = profile_what_if(profile=profile, rules=body.validated_data["rules"],
                                     language=request_language(request))
        except InputError as exc:
            raise ValidationError({"rules": exc.reason}) from exc
        return Response(result)


def _version_param(request: Request) -> int | None:
    raw = request.query_params.get("version")
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise ValidationError({"version": _("an artifact version number")}) from exc


class ProfileArtifactsView(APIView):
    """The latest analysis's artifacts; ``?version=N`` one older set; ``?all=1`` every version, newest
    first."""

    @extend_schema(responses=ArtifactSerializer(many=True))
    def get(self, request: Request, profile_id: int) -> Response:
        profile = profile_get_for_user(user=request.user, profile_id=profile_id)
        if request.query_params.get("all") in ("1", "true", "yes"):
            rows = selectors.artifacts_history_of_profile(profile=profile)
        else:
            rows = selectors.artifacts_of_profile(profile=profile, version=_version_param(request))
        return Response(ArtifactSerializer(rows, many=True).data)


class ProfileArtifactsZipView(APIView):
    """One zip of one analysis's artifacts (latest, or ``?version=N``) with MANIFEST.json, as an
    attachment."""

    @extend_schema(responses={(200, "application/zip"): bytes})
    def get(self, request: Request, profile_id: int) -> FileResponse:
        profile = profile_get_for_user(user=request.user, profile_id=profile_id)
        rows = list(selectors.artifacts_of_profile(profile=profile, version=_version_param(request)))
        if not rows:
            raise NotFound("This analysis has no artifacts.")
        # The name is built from ids only: profile names are untrusted text.
        filename = f"profile-{profile.pk}-remedies-v{rows[0].version}.zip"
        response = attachment_response(io.BytesIO(artifact_set_zip(artifacts=rows)), filename)
        response["Content-Type"] = "application/zip"
        return response


class ArtifactDownloadView(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    def get(self, request: Request, artifact_id: int) -> FileResponse:
        artifact = selectors.artifact_get_for_user(user=request.user, artifact_id=artifact_id)
        response = attachment_response(artifact.file.open("rb"), artifact.name)
        suffix = artifact.name[artifact.name.rfind("."):] if "." in artifact.name else ""
        # Still an attachment with nosniff and a sandbox CSP: the type only tells tools what the file is.
        response["Content-Type"] = MEDIA_TYPES.get(suffix, "application/octet-stream")
        return response


class ComparisonCreateView(APIView):
    @extend_schema(request=ComparisonCreateSerializer, responses={201: ComparisonSerializer})
    def post(self, request: Request) -> Response:
        serializer = ComparisonCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        base = profile_get_for_user(user=request.user, profile_id=serializer.validated_data["base"])
        candidate = profile_get_for_user(user=request.user, profile_id=serializer.validated_data["candidate"])
        require_write(user=signed_in(request.user), project=base.project)
        try:
            comparison = comparison_create(user=signed_in(request.user), base=base, candidate=candidate)
        except DjangoValidationError as exc:
            raise ValidationError(exc.messages) from exc
        return Response(ComparisonSerializer(comparison).data, status=status.HTTP_201_CREATED)


class ComparisonDetailView(APIView):
    @extend_schema(responses=ComparisonSerializer)
    def get(self, request: Request, comparison_id: int) -> Response:
        comparison = selectors.comparison_get_for_user(user=request.user, comparison_id=comparison_id)
        data: dict[str, Any] = ComparisonSerializer(comparison, context={"request": request}).data
        data["verdicts"] = verdicts_of_comparison(comparison=comparison)  # a verification job's comparison
        return Response(data)


class ProjectFixesView(APIView):
    """The fix ledger: each finding's history across the project's profiles (found, verified, regressed)."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(user=request.user, project_id=project_id)
        return Response(fix_ledger(project=project))


class RegressionSerializer(serializers.ModelSerializer):
    comparison = serializers.IntegerField(source="pk", read_only=True)
    base_name = serializers.CharField(source="base.name", read_only=True)
    candidate_name = serializers.CharField(source="candidate.name", read_only=True)
    lines = serializers.JSONField(source="regression", read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = Comparison
        fields = ["comparison", "base", "base_name", "candidate", "candidate_name", "lines", "threshold_pct",
                  "created_at", "finished_at", "url"]

    def get_url(self, obj: Comparison) -> str:
        return reverse("api-comparison", args=[obj.pk])


class ProjectRegressionsView(APIView):
    """The profiles that regressed against the project's pinned baseline (automatic comparisons)."""

    @extend_schema(responses=RegressionSerializer(many=True))
    def get(self, request: Request, project_id: int) -> Response:
        project = project_get_for_user(user=request.user, project_id=project_id)
        return Response(RegressionSerializer(regressions_of_project(project=project), many=True).data)
