"""API routes of analysis results (mounted under /api/). Add timeline/trace/export routes here."""

from django.urls import path

from analysis import api

urlpatterns = [
    path("profiles/<int:profile_id>/findings/", api.ProfileFindingsView.as_view(), name="api-profile-findings"),
    path("profiles/<int:profile_id>/artifacts/", api.ProfileArtifactsView.as_view(), name="api-profile-artifacts"),
    path("artifacts/<int:artifact_id>/download/", api.ArtifactDownloadView.as_view(), name="api-artifact-download"),
    path("comparisons/", api.ComparisonCreateView.as_view(), name="api-comparisons"),
    path("comparisons/<int:comparison_id>/", api.ComparisonDetailView.as_view(), name="api-comparison"),
]
