"""API routes of profiles and their analysis (mounted under /api/): the profiles (analysis/profile_api.py),
findings, artifacts, comparisons, fixes, regressions, and the timeline, trace, page data and exports."""

from django.urls import path

from analysis import api, profile_api, timeline_api

urlpatterns = [
    # profiles (analysis/profile_api.py)
    path("projects/<int:project_id>/profiles/", profile_api.ProjectProfilesView.as_view(),
         name="api-project-profiles"),
    path("uploads/<uuid:upload_id>/complete/", profile_api.UploadCompleteView.as_view(),
         name="api-upload-complete"),
    path("profiles/<int:profile_id>/", profile_api.ProfileDetailView.as_view(), name="api-profile"),
    path("profiles/<int:profile_id>/rerun/", profile_api.ProfileRerunView.as_view(),
         name="api-profile-rerun"),
    path("profiles/<int:profile_id>/model-file/", profile_api.ProfileModelFileView.as_view(),
         name="api-profile-model-file"),
    # results (analysis/api.py)
    path("profiles/<int:profile_id>/findings/", api.ProfileFindingsView.as_view(),
         name="api-profile-findings"),
    path("profiles/<int:profile_id>/what-if/", api.ProfileWhatIfView.as_view(), name="api-profile-what-if"),
    path("profiles/<int:profile_id>/artifacts/", api.ProfileArtifactsView.as_view(),
         name="api-profile-artifacts"),
    path("profiles/<int:profile_id>/artifacts/zip/", api.ProfileArtifactsZipView.as_view(),
         name="api-profile-artifacts-zip"),
    path("artifacts/<int:artifact_id>/download/", api.ArtifactDownloadView.as_view(),
         name="api-artifact-download"),
    path("comparisons/", api.ComparisonCreateView.as_view(), name="api-comparisons"),
    path("comparisons/<int:comparison_id>/", api.ComparisonDetailView.as_view(), name="api-comparison"),
    path("projects/<int:project_id>/fixes/", api.ProjectFixesView.as_view(), name="api-project-fixes"),
    path("projects/<int:project_id>/regressions/", api.ProjectRegressionsView.as_view(),
         name="api-project-regressions"),
    # timeline, trace, page data, exports (analysis/timeline_api.py)
    path("profiles/<int:profile_id>/timeline/", timeline_api.TimelineWindowView.as_view(),
         name="api-timeline"),
    path("profiles/<int:profile_id>/timeline/event/", timeline_api.TimelineEventView.as_view(),
         name="api-timeline-event"),
    path("profiles/<int:profile_id>/timeline/search/", timeline_api.TimelineSearchView.as_view(),
         name="api-timeline-search"),
    path("profiles/<int:profile_id>/timeline/run/", timeline_api.TimelineRunView.as_view(),
         name="api-timeline-run"),
    path("profiles/<int:profile_id>/timeline/critical/", timeline_api.TimelineCriticalView.as_view(),
         name="api-timeline-critical"),
    path("profiles/<int:profile_id>/timeline/layout/", timeline_api.TimelineLayoutView.as_view(),
         name="api-timeline-layout"),
    path("profiles/<int:profile_id>/trace/", timeline_api.TraceDownloadView.as_view(),
         name="api-profile-trace"),
    path("profiles/<int:profile_id>/builds/", timeline_api.BuildsView.as_view(),
         name="api-profile-builds"),
    path("profiles/<int:profile_id>/cluster/", timeline_api.ClusterView.as_view(),
         name="api-profile-cluster"),
    path("profiles/<int:profile_id>/pagedata/", timeline_api.PageDataView.as_view(),
         name="api-profile-pagedata"),
    path("comparisons/<int:comparison_id>/export/", timeline_api.ComparisonExportView.as_view(),
         name="api-comparison-export"),
]
