"""Capture routes: the API under /api/ and the pages (agents, capture form, job)."""

from django.urls import path

from captures import api, views

urlpatterns = [
    path("api/projects/<int:project_id>/agents/", api.ProjectAgentsView.as_view(), name="api-project-agents"),
    path("api/agents/<int:agent_id>/revoke/", api.AgentRevokeView.as_view(), name="api-agent-revoke"),
    path("api/projects/<int:project_id>/captures/", api.ProjectCapturesView.as_view(),
         name="api-project-captures"),
    path("api/captures/<int:job_id>/", api.CaptureDetailView.as_view(), name="api-capture"),
    path("api/captures/<int:job_id>/cancel/", api.CaptureCancelView.as_view(), name="api-capture-cancel"),
    # verifying a fix (captures/verification.py)
    path("api/findings/<int:finding_id>/verify/", api.FindingVerifyView.as_view(), name="api-finding-verify"),
    path("api/profiles/<int:profile_id>/verify/", api.ProfileVerifyView.as_view(), name="api-profile-verify"),
    path("api/agent/register/", api.AgentRegisterView.as_view(), name="api-agent-register"),
    path("api/agent/heartbeat/", api.AgentHeartbeatView.as_view(), name="api-agent-heartbeat"),
    path("api/agent/jobs/next/", api.AgentNextJobView.as_view(), name="api-agent-next"),
    path("api/agent/jobs/<int:job_id>/status/", api.AgentJobStatusView.as_view(),
         name="api-agent-job-status"),
    path("api/agent/jobs/<int:job_id>/log/", api.AgentJobLogView.as_view(), name="api-agent-job-log"),
    path("api/agent/jobs/<int:job_id>/upload/", api.AgentJobUploadView.as_view(),
         name="api-agent-job-upload"),
    path("api/agent/uploads/<uuid:upload_id>/", api.AgentUploadView.as_view(), name="api-agent-upload"),
    path("api/agent/uploads/<uuid:upload_id>/complete/", api.AgentUploadCompleteView.as_view(),
         name="api-agent-upload-complete"),
    path("projects/<int:project_id>/agents/", views.agents_page, name="project-agents"),
    path("projects/<int:project_id>/capture/", views.capture_form, name="project-capture"),
    path("captures/<int:job_id>/", views.job_page, name="capture-job"),
    path("profiles/<int:profile_id>/verify/", views.profile_verify, name="profile-verify"),
    path("captures/<int:job_id>/cancel/", views.job_cancel, name="capture-job-cancel"),
    path("agents/<int:agent_id>/revoke/", views.agent_revoke, name="agent-revoke"),
]
