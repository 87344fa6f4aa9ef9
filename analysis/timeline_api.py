"""API views of the timeline (window, event, search), the chrome-trace download, page data, and comparison
exports. Thin: membership check through the selectors, then one call into analysis.page_builds, pagedata or
the engine. Nothing is built here: while a worker builds the page views or the trace, these routes answer
202 with the build's state (409 once it failed)."""

from __future__ import annotations

import json
from typing import Any

from django.core.files.storage import default_storage
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import page_builds, selectors
from analysis.cluster import cluster_data
from analysis.models import JobStatus, PageBuild
from analysis.texts import request_language
from analysis.timeline_layout import lanes_with_layout, timeline_layout_get, timeline_layout_set
from profiles.api import attachment_response
from profiles.models import Profile, ProfileStatus
from profiles.selectors import profile_get_for_user
from pypto_core.compare import to_csv, to_markdown


class NotReady(APIException):
    status_code = 409
    default_detail = "The profile is not ready yet."
    default_code = "not_ready"


def _ready_profile(request: Request, profile_id: int) -> Profile:
    profile = profile_get_for_user(user=request.user, profile_id=profile_id)
    if profile.status != ProfileStatus.READY or not profile.parquet_prefix:
        raise NotReady(f"The profile is {profile.status}, not ready.")
    return profile


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationError({name: _("an integer")}) from None


def _lane_list(request: Request) -> list[int] | None:
    raw = request.query_params.get("lanes")
    if raw is None:
        return None
    try:
        return [int(x) for x in raw.split(",") if x.strip()][:5000]
    except ValueError:
        raise ValidationError({"lanes": _("comma-separated lane ids")}) from None


_BUILD_STATES = [page_builds.READY, page_builds.QUEUED, page_builds.RUNNING, page_builds.FAILED,
                 page_builds.ABSENT]
_PREPARING = inline_serializer("BuildPreparing", {
    "status": serializers.ChoiceField(
        [page_builds.QUEUED, page_builds.RUNNING],
        help_text=gettext_lazy("queued or running: ask again after Retry-After seconds")),
    "detail": serializers.CharField()})
_FAILED = inline_serializer("BuildFailed", {
    "status": serializers.ChoiceField([page_builds.FAILED]), "code": serializers.CharField(),
    "detail": serializers.CharField(help_text=gettext_lazy("why the build failed"))})
_STATE = inline_serializer("BuildState", {
    "status": serializers.ChoiceField(_BUILD_STATES), "error": serializers.CharField(),
    "error_localized": serializers.CharField()})
_BUILT_RESPONSES: dict[Any, Any] = {200: dict, 202: _PREPARING, 409: _FAILED}
RETRY_AFTER_S = "3"


def _build_answer(kind: str, state: page_builds.BuildState) -> Response | None:
    """202 while a worker builds the output (``Retry-After``), 409 once its build failed (the reason); None
    when there is nothing to build (no parsed tables)."""
    trace = kind == PageBuild.Kind.TRACE
    if state.status == page_builds.FAILED:
        lead = _("The Chrome trace could not be exported:") if trace else \
            _("The page data and timeline index could not be built:")
        return Response({"status": state.status, "code": "build_failed",
                         "detail": f"{lead} {state.localized_error()}"}, status=409)
    if not state.preparing:
        return None
    detail = _("The Chrome trace is being exported by a worker; try again in a few seconds.") if trace else \
        _("The page data and timeline index are being built by a worker; try again in a few seconds.")
    return Response({"status": state.status, "detail": detail}, status=202,
                    headers={"Retry-After": RETRY_AFTER_S})


class _BuiltView(APIView):
    """A route that reads what a worker builds: ``page_builds.NotPrepared`` becomes the build's state."""

    kind = PageBuild.Kind.VIEWS

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, page_builds.NotPrepared):
            answer = _build_answer(self.kind, exc.state)
            if answer is not None:
                return answer
            exc = NotReady(_("The profile has no parsed tables."))
        return super().handle_exception(exc)


class TimelineWindowView(_BuiltView):
    """One window (``TimelineIndex.window``); ``lanes`` limits the tracks to those lanes, and the lanes say
    ``hidden`` as this user left them (``analysis.timeline_layout``), named in the page's language."""

    @extend_schema(parameters=[OpenApiParameter("start_ns", int), OpenApiParameter("end_ns", int),
                               OpenApiParameter("width_px", int), OpenApiParameter("lanes", str)],
                   responses=_BUILT_RESPONSES)
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        index = page_builds.timeline_index_or_build(profile=profile)
        answer = index.window(_int(request, "start_ns"), _int(request, "end_ns"),
                              _int(request, "width_px", 1000) or 1000, lanes=_lane_list(request))
        layout = timeline_layout_get(user=request.user, profile=profile)
        lanes = index.lane_dicts(request_language(request))
        return Response({**answer, "lanes": lanes_with_layout(lanes, layout), "layout": layout})


class TimelineLayoutView(APIView):
    """GET / PUT ``{"hidden": [lane ids], "shown": [lane ids], "collapsed": [group names]}``."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = profile_get_for_user(user=request.user, profile_id=profile_id)
        return Response(timeline_layout_get(user=request.user, profile=profile))

    @extend_schema(request=dict, responses={200: dict})
    def put(self, request: Request, profile_id: int) -> Response:
        profile = profile_get_for_user(user=request.user, profile_id=profile_id)
        data = request.data if isinstance(request.data, dict) else {}
        try:
            return Response(timeline_layout_set(
                user=request.user, profile=profile, hidden=data.get("hidden", []),
                shown=data.get("shown", []), collapsed=data.get("collapsed", [])))
        except ValueError as exc:
            raise ValidationError({"layout": str(exc)}) from None


class TimelineRunView(_BuiltView):
    """A merged run's members (``TimelineIndex.run``): count, busy time, top names by count and by time."""

    @extend_schema(parameters=[OpenApiParameter("lane", int), OpenApiParameter("depth", int),
                               OpenApiParameter("start_ns", int), OpenApiParameter("end_ns", int)],
                   responses=_BUILT_RESPONSES)
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        args = {k: _int(request, k) for k in ("lane", "depth", "start_ns", "end_ns")}
        missing = [k for k, v in args.items() if v is None]
        if missing:
            raise ValidationError({k: _("required") for k in missing})
        index = page_builds.timeline_index_or_build(profile=profile)
        try:
            return Response(index.run(**args, language=request_language(request)))
        except KeyError as exc:
            raise NotFound(str(exc)) from None


class TimelineCriticalView(_BuiltView):
    """The critical path of each step in a window (``TimelineIndex.critical``, from the replay's graph)."""

    @extend_schema(parameters=[OpenApiParameter("start_ns", int), OpenApiParameter("end_ns", int),
                               OpenApiParameter("width_px", int)], responses=_BUILT_RESPONSES)
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        index = page_builds.timeline_index_or_build(profile=profile)
        return Response(index.critical(
            _int(request, "start_ns"), _int(request, "end_ns"), _int(request, "width_px", 1000) or 1000))


class TimelineEventView(_BuiltView):
    @extend_schema(parameters=[OpenApiParameter("lane", int), OpenApiParameter("idx", int)],
                   responses=_BUILT_RESPONSES)
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        idx = _int(request, "idx")
        if idx is None:
            raise ValidationError({"idx": _("required")})
        index = page_builds.timeline_index_or_build(profile=profile)
        try:
            return Response(index.event(_int(request, "lane"), idx, language=request_language(request)))
        except KeyError as exc:
            raise NotFound(str(exc)) from None


class TimelineSearchView(_BuiltView):
    @extend_schema(parameters=[OpenApiParameter("q", str), OpenApiParameter("limit", int)],
                   responses=_BUILT_RESPONSES)
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        limit = max(0, min(_int(request, "limit", 100) or 0, 1000))
        index = page_builds.timeline_index_or_build(profile=profile)
        return Response(index.search(request.query_params.get("q", "")[:200], limit))


class TraceDownloadView(_BuiltView):
    """The chrome trace, exported by a worker on the first request: 202 with its state until it exists."""

    kind = PageBuild.Kind.TRACE

    @extend_schema(responses={(200, "application/octet-stream"): bytes, 202: _PREPARING, 409: _FAILED})
    def get(self, request: Request, profile_id: int) -> Any:
        profile = _ready_profile(request, profile_id)
        name = page_builds.trace_or_build(profile=profile)
        return attachment_response(default_storage.open(name, "rb"), f"profile-{profile.pk}.trace.json")


class BuildsView(APIView):
    """Where the worker-built outputs of a ready profile stand; starts no build (keeps an asked-for one
    alive). The pages poll it while they show "being prepared"."""

    @extend_schema(responses={200: inline_serializer("ProfileBuilds", {"views": _STATE, "trace": _STATE})})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        language = request_language(request)
        return Response({kind: _state_dict(page_builds.prepared(profile=profile, kind=kind, request=False),
                                           language)
                         for kind in (PageBuild.Kind.VIEWS.value, PageBuild.Kind.TRACE.value)})


def _state_dict(state: page_builds.BuildState, language: str) -> dict[str, str]:
    """``error`` in English, as always; ``error_localized`` in the request's language."""
    return {"status": state.status, "error": state.error, "error_localized": state.localized_error(language)}


class ClusterView(APIView):
    """Every rank on one page (``analysis.cluster``): aligned step rows, per-rank breakdowns, links, the
    slowest link and the slow-rank finding's evidence. 404 when the profile has one rank and no matrix."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        data = cluster_data(profile=profile)
        if data is None:
            raise NotFound("This profile has one rank and no communication matrix.")
        return Response(data)


class PageDataView(_BuiltView):
    """The profile page's charts and tables as JSON (``pypto_core.pagedata``); 202 while a worker builds
    them."""

    @extend_schema(responses=_BUILT_RESPONSES)
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        data, state = page_builds.page_data_or_build(profile=profile)
        if data is None:
            raise page_builds.NotPrepared(state)
        return Response(data)


class _TextRenderer(BaseRenderer):
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Any = None) -> bytes:
        return data.encode("utf-8") if isinstance(data, str) else json.dumps(data).encode("utf-8")


class MarkdownRenderer(_TextRenderer):
    media_type = "text/markdown"
    format = "md"


class CsvRenderer(_TextRenderer):
    media_type = "text/csv"
    format = "csv"


class ComparisonExportView(APIView):
    """``?format=md|csv`` (DRF's format override picks the renderer; another format is a 404)."""

    renderer_classes = [MarkdownRenderer, CsvRenderer]

    @extend_schema(parameters=[OpenApiParameter("format", str, enum=["md", "csv"])],
                   responses={(200, "text/markdown"): str, (200, "text/csv"): str})
    def get(self, request: Request, comparison_id: int, format: str | None = None) -> Response:
        comparison = selectors.comparison_get_for_user(user=request.user, comparison_id=comparison_id)
        fmt = request.accepted_renderer.format
        if comparison.status != JobStatus.DONE:
            raise NotReady(f"The comparison is {comparison.status}.")
        text = to_markdown(comparison.result) if fmt == "md" else to_csv(comparison.result)
        response = Response(text)
        response["Content-Disposition"] = f'attachment; filename="comparison-{comparison.pk}.{fmt}"'
        response["X-Content-Type-Options"] = "nosniff"
        return response
