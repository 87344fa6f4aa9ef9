"""REST API of profiles as the analysis sees them (docs/contract.md): a project's profiles, an upload (stored
and queued), a completed chunked upload, one profile (with its regression against the baseline), its
deletion, a re-run, and a model file. The rest of the profiles' API (projects, members, the chunks of an
upload, the archive) is ``profiles.api``. Thin: validate, call a service or selector, serialise.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import profile_services
from analysis.regressions import regression_of_profile, regressions_by_candidate
from analysis.summary import summary_of
from analysis.texts import localized, request_language
from profiles import selectors
from profiles.api import service_errors
from profiles.models import Profile
from profiles.selectors import signed_in
from profiles.services import require_write


class ProfileSerializer(serializers.ModelSerializer):
    project = serializers.IntegerField(source="project_id", read_only=True)
    error = serializers.SerializerMethodField()
    error_message = serializers.JSONField(read_only=True, help_text=gettext_lazy(
        "The failure's reason as its message: its English template (msgid) and parameters, or null."))
    error_localized = serializers.SerializerMethodField(help_text=gettext_lazy(
        "The failure's reason in the request's language (?lang=, or Accept-Language), or null."))
    summary = serializers.SerializerMethodField(help_text=gettext_lazy(
        "What the analysis found out: the upload's files, the tables' counts and span, the ranks, the "
        "report."))
    archive_url = serializers.SerializerMethodField()
    regression = serializers.SerializerMethodField(help_text=gettext_lazy(
        "The automatic comparison with the project's baseline (comparison, is_regression, lines)."))

    class Meta:
        model = Profile
        fields = [
            "id", "project", "name", "sku", "tags", "status", "progress", "error", "error_message",
            "error_localized", "summary",
            "original_filename", "upload_kind", "size", "sha256", "detected_format", "rank", "group",
            "created_at", "updated_at", "archive_url", "regression",
        ]
        read_only_fields = fields

    def get_error(self, obj: Profile) -> str | None:
        return obj.error or None

    def get_error_localized(self, obj: Profile) -> str | None:
        request = self.context.get("request")
        return localized(obj.error, obj.error_message, request_language(request) if request else None) or None

    def get_summary(self, obj: Profile) -> dict[str, Any]:
        return summary_of(obj).to_dict()

    def get_regression(self, obj: Profile) -> dict[str, Any] | None:
        """The automatic comparison with the project's baseline: ``{"comparison", "is_regression", "lines",
        ...}``."""
        known = self.context.get("regressions")  # a list view fetched them all at once
        if known is not None:
            return known.get(obj.pk)
        return regression_of_profile(profile=obj)

    def get_archive_url(self, obj: Profile) -> str:
        return reverse("api-profile-archive", args=[obj.pk])


class UploadFormSerializer(serializers.Serializer):
    file = serializers.FileField()
    name = serializers.CharField(required=False, allow_blank=True, default="")
    sku = serializers.CharField(required=False, allow_blank=True, default="")
    tags = serializers.CharField(required=False, allow_blank=True, default="",
                                 help_text=gettext_lazy("comma-separated"))
    model_file = serializers.FileField(required=False, allow_null=True, default=None,
                                       help_text=gettext_lazy(
                                           "optional: your model's .py file, for diffs against it"))


class ModelFileSerializer(serializers.Serializer):
    file = serializers.FileField(help_text=gettext_lazy("your model's .py file (e.g. modeling_llama.py)"))


class ProjectProfilesView(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(responses=ProfileSerializer(many=True))
    def get(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(user=request.user, project_id=project_id)
        profiles = list(selectors.profiles_of_project(project=project))
        regressions = regressions_by_candidate(profile_ids=[p.pk for p in profiles])
        return Response(ProfileSerializer(profiles, many=True,
                                          context={"regressions": regressions, "request": request}).data)

    @extend_schema(request={"multipart/form-data": UploadFormSerializer}, responses={201: ProfileSerializer})
    def post(self, request: Request, project_id: int) -> Response:
        project = selectors.project_get_for_user(user=request.user, project_id=project_id)
        require_write(user=signed_in(request.user), project=project)
        serializer = UploadFormSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        with service_errors():
            profile = profile_services.profile_upload(
                project=project, user=signed_in(request.user), file=data["file"], filename=data["file"].name,
                name=data["name"], sku=data["sku"], tags=data["tags"], model_file=data.get("model_file"),
            )
        return Response(ProfileSerializer(profile).data, status=status.HTTP_201_CREATED)


class UploadCompleteView(APIView):
    @extend_schema(request=None, responses={201: ProfileSerializer})
    def post(self, request: Request, upload_id: Any) -> Response:
        session = selectors.upload_session_get_for_user(user=request.user, session_id=upload_id)
        with service_errors():
            profile = profile_services.upload_complete(session=session, user=signed_in(request.user))
        return Response(ProfileSerializer(profile).data, status=status.HTTP_201_CREATED)


class ProfileDetailView(APIView):
    @extend_schema(responses=ProfileSerializer)
    def get(self, request: Request, profile_id: int) -> Response:
        profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
        return Response(ProfileSerializer(profile, context={"request": request}).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, profile_id: int) -> Response:
        profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
        profile_services.profile_delete(profile=profile, user=signed_in(request.user))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProfileRerunView(APIView):
    @extend_schema(request=None, responses={202: ProfileSerializer})
    def post(self, request: Request, profile_id: int) -> Response:
        profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
        with service_errors():
            profile = profile_services.profile_rerun(profile=profile, user=signed_in(request.user))
        return Response(ProfileSerializer(profile).data, status=status.HTTP_202_ACCEPTED)


class ProfileModelFileView(APIView):
    """``POST`` multipart ``file``: attach the model file; the remedies are made again with diffs against
    it."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": ModelFileSerializer}, responses={202: dict})
    def post(self, request: Request, profile_id: int) -> Response:
        profile = selectors.profile_get_for_user(user=request.user, profile_id=profile_id)
        require_write(user=signed_in(request.user), project=profile.project)
        serializer = ModelFileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        with service_errors():
            run = profile_services.profile_model_file_attach(profile=profile, user=signed_in(request.user),
                                                             file=upload, filename=upload.name)
        return Response(
            {"profile": profile.pk, "model_file": (profile.model_file.name or "").rsplit("/", 1)[-1],
             "run": run.pk if run else None,
             "artifacts_url": reverse("api-profile-artifacts", args=[profile.pk])},
            status=status.HTTP_202_ACCEPTED,
        )
