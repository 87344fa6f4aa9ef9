"""API routes of projects, members, invitations, chunked uploads and archives (mounted under /api/); the
rest of the profiles' routes are in analysis/urls.py."""

from django.urls import path

from profiles import api

urlpatterns = [
    path("auth/token/", api.TokenView.as_view(), name="api-token"),
    path("projects/", api.ProjectListView.as_view(), name="api-projects"),
    path("projects/<int:project_id>/", api.ProjectDetailView.as_view(), name="api-project"),
    path(
        "projects/<int:project_id>/baseline/", api.ProjectBaselineView.as_view(), name="api-project-baseline"
    ),
    path("projects/<int:project_id>/members/", api.ProjectMembersView.as_view(), name="api-project-members"),
    path(
        "projects/<int:project_id>/invitations/",
        api.ProjectInvitationsView.as_view(),
        name="api-project-invitations",
    ),
    path("projects/<int:project_id>/uploads/", api.UploadStartView.as_view(), name="api-upload-start"),
    path("uploads/<uuid:upload_id>/", api.UploadView.as_view(), name="api-upload"),
    path("invitations/", api.MyInvitationsView.as_view(), name="api-invitations"),
    path(
        "invitations/<int:invitation_id>/accept/",
        api.InvitationAnswerView.as_view(accept=True),
        name="api-invitation-accept",
    ),
    path(
        "invitations/<int:invitation_id>/decline/",
        api.InvitationAnswerView.as_view(accept=False),
        name="api-invitation-decline",
    ),
    path("profiles/<int:profile_id>/archive/", api.ProfileArchiveView.as_view(), name="api-profile-archive"),
]
