"""Page routes. Each area's views live in frontend/views/<area>.py; add new areas below."""

from django.urls import path

from frontend.views import (
    accounts,
    api_reference,
    compare_pages,
    language,
    profile_pages,
    profiles,
    projects,
    site,
)

urlpatterns = [
    path("login/", accounts.LoginView.as_view(), name="login"),
    path("logout/", accounts.LogoutView.as_view(), name="logout"),
    path("signup/", accounts.signup, name="signup"),
    path("language/", language.set_language, name="set-language"),
    path("api/docs/", api_reference.api_reference, name="api-reference"),
    path("favicon.ico", site.favicon, name="favicon"),
    path("", projects.project_list, name="projects"),
    path("invitations/<int:invitation_id>/accept/", projects.invitation_answer, {"action": "accept"},
         name="invitation-accept"),
    path("invitations/<int:invitation_id>/decline/", projects.invitation_answer, {"action": "decline"},
         name="invitation-decline"),
    path("projects/<int:project_id>/", projects.project_detail, name="project"),
    path("projects/<int:project_id>/invite/", projects.project_invite, name="project-invite"),
    path("projects/<int:project_id>/upload/", projects.project_upload, name="project-upload"),
    path("profiles/<int:profile_id>/", profiles.profile_detail, name="profile"),
    path("profiles/<int:profile_id>/rerun/", profiles.profile_rerun, name="profile-rerun"),
    path("profiles/<int:profile_id>/delete/", profiles.profile_delete, name="profile-delete"),
    # issue 7: timeline and comparison pages
    path("profiles/<int:profile_id>/timeline/", profile_pages.profile_timeline, name="profile-timeline"),
    path("profiles/<int:profile_id>/trace/", profile_pages.profile_trace, name="profile-trace"),
    path("profiles/<int:profile_id>/cluster/", profile_pages.profile_cluster, name="profile-cluster"),
    path("projects/<int:project_id>/compare/", compare_pages.compare_new, name="compare-new"),
    path("projects/<int:project_id>/compare/profiles/", compare_pages.compare_profile_search,
         name="compare-profile-search"),
    path("comparisons/<int:comparison_id>/", compare_pages.comparison_detail, name="comparison"),
]
