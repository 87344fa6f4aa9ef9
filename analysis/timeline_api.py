"""API views of the timeline (window, event, search), the chrome-trace download, page data, and comparison
exports. Thin: membership check through the selectors, then one call into analysis.pagedata or the engine."""

from __future__ import annotations

import json
from typing import Any

from django.utils.translation import get_language
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import pagedata, selectors
from analysis.cluster import cluster_data
from analysis.models import JobStatus
from analysis.timeline_layout import lanes_with_layout, timeline_layout_get, timeline_layout_set
from profiles.api import attachment_response
from profiles.models import Profile, ProfileStatus
from profiles.selectors import profile_get_for_user
from pypto_core.compare import to_csv, to_markdown
from pypto_core.i18n import pick_language


class NotReady(APIException):
    status_code = 409
    default_detail = "The profile is not ready yet."
    default_code = "not_ready"


def _ready_profile(request: Request, profile_id: int) -> Profile:
    profile = profile_get_for_user(user=request.user, profile_id=profile_id)
    if profile.status != ProfileStatus.READY or not profile.parquet_prefix:
        raise NotReady(f"The profile is {profile.status}, not ready.")
    return profile


def _language(request: Request) -> str:
    """``?lang=``, else the page's language (LocaleMiddleware: the user's choice or Accept-Language)."""
    return pick_language(request.query_params.get("lang"), get_language())


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


class TimelineWindowView(APIView):
    """One window (``TimelineIndex.window``); ``lanes`` limits the tracks to those lanes, and the lanes say
    ``hidden`` as this user left them (``analysis.timeline_layout``), named in the page's language."""

    @extend_schema(parameters=[OpenApiParameter("start_ns", int), OpenApiParameter("end_ns", int),
                               OpenApiParameter("width_px", int), OpenApiParameter("lanes", str)],
                   responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        index = pagedata.timeline_index(profile=profile)
        answer = index.window(_int(request, "start_ns"), _int(request, "end_ns"),
                              _int(request, "width_px", 1000) or 1000, lanes=_lane_list(request))
        layout = timeline_layout_get(user=request.user, profile=profile)
        lanes = index.lane_dicts(_language(request))
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


class TimelineRunView(APIView):
    """A merged run's members (``TimelineIndex.run``): count, busy time, top names by count and by time."""

    @extend_schema(parameters=[OpenApiParameter("lane", int), OpenApiParameter("depth", int),
                               OpenApiParameter("start_ns", int), OpenApiParameter("end_ns", int)],
                   responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        args = {k: _int(request, k) for k in ("lane", "depth", "start_ns", "end_ns")}
        missing = [k for k, v in args.items() if v is None]
        if missing:
            raise ValidationError({k: _("required") for k in missing})
        try:
            return Response(pagedata.timeline_index(profile=profile).run(**args, language=_language(request)))
        except KeyError as exc:
            raise NotFound(str(exc)) from None


class TimelineCriticalView(APIView):
    """The critical path of each step in a window (``TimelineIndex.critical``, from the replay's graph)."""

    @extend_schema(parameters=[OpenApiParameter("start_ns", int), OpenApiParameter("end_ns", int),
                               OpenApiParameter("width_px", int)], responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        return Response(pagedata.timeline_index(profile=profile).critical(
            _int(request, "start_ns"), _int(request, "end_ns"), _int(request, "width_px", 1000) or 1000))


class TimelineEventView(APIView):
    @extend_schema(parameters=[OpenApiParameter("lane", int), OpenApiParameter("idx", int)],
                   responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        idx = _int(request, "idx")
        if idx is None:
            raise ValidationError({"idx": _("required")})
        try:
            return Response(pagedata.timeline_index(profile=profile).event(_int(request, "lane"), idx,
                                                                           language=_language(request)))
        except KeyError as exc:
            raise NotFound(str(exc)) from None


class TimelineSearchView(APIView):
    @extend_schema(parameters=[OpenApiParameter("q", str), OpenApiParameter("limit", int)],
                   responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        limit = max(0, min(_int(request, "limit", 100) or 0, 1000))
        query = request.query_params.get("q", "")[:200]
        return Response(pagedata.timeline_index(profile=profile).search(query, limit))


class TraceDownloadView(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    def get(self, request: Request, profile_id: int) -> Any:
        profile = _ready_profile(request, profile_id)
        path = pagedata.chrome_trace_path(profile=profile)
        return attachment_response(open(path, "rb"), f"profile-{profile.pk}.trace.json")


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


class PageDataView(APIView):
    """The profile page's charts and tables as JSON (``pypto_core.pagedata``)."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, profile_id: int) -> Response:
        profile = _ready_profile(request, profile_id)
        data = pagedata.page_data(profile=profile)
        if data is None:
            raise NotFound("No page data for this profile.")
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
