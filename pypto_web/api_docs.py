"""What each API operation does, in the user's language: one summary per operation id and one label per tag.

drf-spectacular writes them into the OpenAPI schema (``add_summaries``, a postprocessing hook), so the YAML
download and the browsable reference (frontend/api_reference.py) say the same thing. A test fails when an
operation has no summary here.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

TAG_LABELS = {
    "projects": _("Projects"), "profiles": _("Profiles"), "uploads": _("Chunked uploads"),
    "comparisons": _("Comparisons"), "findings": _("Findings"), "artifacts": _("Remedies"),
    "invitations": _("Invitations"), "auth": _("Authentication"), "captures": _("Captures"),
    "agents": _("Agents"), "agent": _("Agent endpoints (called by the host agent)"),
}

SUMMARIES = {
    # projects
    "projects_list": _("List the projects you are a member of."),
    "projects_create": _("Create a project; you become its owner."),
    "projects_retrieve": _("One project, with its baseline and your role."),
    "projects_baseline_create": _("Pin the baseline that new profiles are compared with (profile id, or null "
                                  "to "
                                  "unpin) and the regression threshold in percent."),
    "projects_members_list": _("The project's members and their roles."),
    "projects_invitations_list": _("The project's invitations."),
    "projects_invitations_create": _("Invite a user to the project with a role."),
    "projects_profiles_list": _("The project's profiles, newest first."),
    "projects_profiles_create": _("Upload a profiling archive in one request (multipart); the pipeline "
                                  "parses and analyses it."),
    "projects_uploads_create": _("Start a chunked upload of a profiling archive (resumable)."),
    "projects_fixes_retrieve": _("The fix ledger: each finding's history across the project's profiles "
                                 "(found, verified, regressed)."),
    "projects_regressions_list": _("The profiles that regressed against the project's pinned baseline "
                                   "(automatic comparisons)."),
    "projects_agents_list": _("The host agents registered to the project."),
    "projects_agents_create": _("Create an agent registration token (shown once)."),
    "projects_captures_list": _("The project's capture jobs."),
    "projects_captures_create": _("Ask an agent to capture a profile of a workload."),
    # uploads
    "uploads_retrieve": _("How many bytes of the chunked upload the server holds (to resume)."),
    "uploads_update": _("Send the next chunk of the archive (Content-Range)."),
    "uploads_complete_create": _("Finish the chunked upload: the archive becomes a profile and is queued."),
    # profiles
    "profiles_retrieve": _("One profile: status, progress, summary and the archive's details."),
    "profiles_destroy": _("Delete the profile and its archive."),
    "profiles_rerun_create": _("Run the pipeline again from the kept archive."),
    "profiles_archive_retrieve": _("The original upload, byte for byte, as an attachment."),
    "profiles_artifacts_list": _("The latest analysis's remedies; ?version=N one older set, ?all=1 every "
                                 "version, newest first."),
    "profiles_artifacts_zip_retrieve": _("One zip of one analysis's remedies (latest, or ?version=N) with "
                                         "MANIFEST.json."),
    "profiles_findings_retrieve": _("The findings as the CLI's analyze JSON; ?lang= or Accept-Language (en, "
                                    "zh-Hans) picks the language of their text, never their ids or numbers."),
    "profiles_model_file_create": _("Attach the model's source file (multipart); the remedies are made again "
                                    "as diffs against it."),
    "profiles_pagedata_retrieve": _("The profile page's charts and tables as JSON (202 while a worker builds "
                                    "them)."),
    "profiles_timeline_retrieve": _("The timeline between start_ns and end_ns, summarised for width_px "
                                    "pixels."),
    "profiles_timeline_event_retrieve": _("The details of one timeline slice (lane and index)."),
    "profiles_timeline_search_retrieve": _("Find slices whose name contains q (at most limit)."),
    "profiles_timeline_run_retrieve": _("What a merged run holds: its top names by count and by time."),
    "profiles_timeline_critical_retrieve": _("Each step's critical path in the window, from the what-if "
                                             "replay's dependency graph."),
    "profiles_timeline_layout_retrieve": _("Your lane layout of this timeline: hidden lanes and folded "
                                           "groups."),
    "profiles_timeline_layout_update": _("Save your lane layout of this timeline."),
    "profiles_cluster_retrieve": _("Every rank on one axis: step rows, per-rank breakdowns, links and the "
                                   "slowest link and rank."),
    "profiles_trace_retrieve": _("The profile as a Chrome trace JSON file, for Perfetto. A worker exports it "
                                 "on the first request: 202 with its state until the file exists, 409 if the "
                                 "export failed."),
    "profiles_builds_retrieve": _("Where the page views and the Chrome trace a worker builds stand: ready, "
                                  "queued, running, failed (with the reason) or absent."),
    "profiles_verify_create": _("Run the workload again on an agent with the remedies of the chosen "
                                "findings, then compare (202: the capture job)."),
    "profiles_what_if_create": _("Replay the run with the given findings fixed together (what-if)."),
    # comparisons, findings, artifacts
    "comparisons_create": _("Compare two profiles of the same project (base and candidate)."),
    "comparisons_retrieve": _("One comparison: status, metrics, op changes and finding verdicts."),
    "comparisons_export_retrieve": _("The comparison as Markdown or CSV (?format=md or csv)."),
    "findings_verify_create": _("Run the workload again on an agent with this finding's remedies, then "
                                "compare (202: the capture job)."),
    "artifacts_download_retrieve": _("Download one remedy file."),
    # invitations, auth
    "invitations_list": _("Your pending invitations."),
    "invitations_accept_create": _("Accept an invitation: you join the project."),
    "invitations_decline_create": _("Decline an invitation."),
    "auth_token_create": _("Exchange a username and password for an API token."),
    # captures and agents (members)
    "captures_retrieve": _("One capture job: status, log and the profile it produced."),
    "captures_cancel_create": _("Cancel a capture job."),
    "agents_revoke_create": _("Revoke an agent: its token stops working."),
    # the endpoints the host agent calls (Authorization: Agent <token>)
    "agent_register_create": _("The agent registers itself with its one-time token and describes its host."),
    "agent_heartbeat_create": _("The agent reports that it is alive."),
    "agent_jobs_next_create": _("The agent claims the next capture job, if any."),
    "agent_jobs_status_create": _("The agent reports a job's status."),
    "agent_jobs_log_create": _("The agent appends lines to a job's log."),
    "agent_jobs_upload_create": _("The agent starts the chunked upload of a job's profile."),
    "agent_uploads_retrieve": _("How many bytes of the agent's upload the server holds (to resume)."),
    "agent_uploads_update": _("The agent sends the next chunk of the profile."),
    "agent_uploads_destroy": _("Abort the job's open upload (the agent's answer to a cancel)."),
    "agent_uploads_complete_create": _("The agent finishes the upload: the profile is queued."),
}


def add_summaries(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: each operation's summary and each tag's label, rendered in the
    language active while the schema is generated."""
    for operations in (result.get("paths") or {}).values():
        for operation in operations.values():
            summary = SUMMARIES.get(operation.get("operationId", ""))
            if summary is not None:
                operation["summary"] = str(summary)
    tags = sorted({t for ops in (result.get("paths") or {}).values() for op in ops.values()
                   for t in op.get("tags") or []})
    result["tags"] = [{"name": t, "description": str(TAG_LABELS.get(t, t))} for t in tags]
    return result
