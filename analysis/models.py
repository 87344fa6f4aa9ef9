"""Analysis results and job state: runs (with progress and log), findings, artifacts, comparisons.

Job state lives here, never in Celery's result backend (docs/architecture.md, house rules).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from profiles.models import Profile, Project


class JobStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    DONE = "done", _("Done")
    FAILED = "failed", _("Failed")


class AnalysisRun(models.Model):
    """One pipeline step (ingest or diagnose) of one profile; a redelivered task reuses its row."""

    class Kind(models.TextChoices):
        INGEST = "ingest", _("Ingest")
        DIAGNOSE = "diagnose", _("Diagnose")
        # remedies made again for the latest analysis (a model file came)
        REMEDIES = "remedies", _("Remedies")

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)  # how many times a worker started it
    log = models.TextField(blank=True, default="")
    # ``log``'s lines as messages, {"at": "HH:MM:SS", "msgid", "params"} each (analysis.texts): the page shows
    # them in its language; a run logged before they were kept shows ``log``
    log_messages = models.JSONField(default=list, blank=True)
    timings = models.JSONField(default=dict, blank=True)  # phase -> seconds
    error = models.TextField(blank=True, default="")
    # ``error`` as its message (analysis.texts): a page shows it in its own language
    error_message = models.JSONField(null=True, blank=True, default=None)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The artifact version this run stored (possibly an empty set); None while it has stored none.
    artifact_version = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]


class Finding(models.Model):
    """One ``pypto_core.rules.finding.Finding``, stored whole as JSON with a few columns to query by."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="findings")
    run = models.ForeignKey(AnalysisRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    rule = models.CharField(max_length=64, db_index=True)
    severity = models.CharField(max_length=8)
    title = models.CharField(max_length=300)
    order = models.PositiveIntegerField(default=0)
    data = models.JSONField(default=dict)  # Finding.to_dict()
    schema_version = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["profile_id", "order", "id"]


def artifact_upload_to(instance: Artifact, filename: str) -> str:
    project_id, profile_id = instance.profile.project_id, instance.profile_id
    return f"projects/{project_id}/artifacts/{profile_id}/{uuid.uuid4().hex}/{filename}"


class Artifact(models.Model):
    """A generated tuning config, script or patch. Every run that makes remedies stores its whole set as the
    profile's next version (all artifacts of one run share it); older versions are kept."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="artifacts")
    finding = models.ForeignKey(Finding, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="artifacts")
    run = models.ForeignKey(AnalysisRun, null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="artifacts")
    rule = models.CharField(max_length=64, blank=True, default="")  # kept when the finding row is replaced
    # the engine's Artifact.header (pypto_core.remedies.artifact): finding, profile, shapes
    header = models.JSONField(default=dict, blank=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)  # config | script | patch | report | ...
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    file = models.FileField(upload_to=artifact_upload_to, max_length=500)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["profile_id", "name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "name", "version"], name="one_artifact_version")
        ]


class Comparison(models.Model):
    """Before/after comparison of two profiles of one project, computed by a task."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="comparisons")
    base = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    result = models.JSONField(default=dict, blank=True)  # the ``compare --format json`` shape
    error = models.TextField(blank=True, default="")
    # ``error`` as its message (analysis.texts): a page shows it in its own language
    error_message = models.JSONField(null=True, blank=True, default=None)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Regression tracking (issue 8): made automatically against the project's pinned baseline.
    auto = models.BooleanField(default=False)
    # ``pypto_core.compare.regression`` lines at the project's threshold when the comparison finished.
    regression = models.JSONField(default=list, blank=True)
    # each line's message (``pypto_core.i18n.stored_texts``), rendered in the reader's language by the pages
    regression_messages = models.JSONField(default=list, blank=True)
    is_regression = models.BooleanField(default=False, db_index=True)
    threshold_pct = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["base", "candidate"], condition=models.Q(auto=True),
                                    name="one_auto_comparison_per_pair")
        ]



class Verdict(models.TextChoices):
    FIXED = "fixed", _("Fixed")
    PERSISTING = "persisting", _("Persisting")
    WORSE = "worse", _("Worse")


class FixVerification(models.Model):
    """The measured verdict on one finding after its remedies ran (a verification job, issue 21): the fix
    ledger of a project is these rows beside the findings of its profiles."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="fix_verifications")
    finding = models.ForeignKey(Finding, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="verifications")
    rule = models.CharField(max_length=64, db_index=True)  # kept when the finding row goes
    title = models.CharField(max_length=300, blank=True, default="")
    # where the finding was found
    base = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")  # the run with the fix
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="verdicts")
    job = models.ForeignKey("captures.CaptureJob", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="verdicts")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    data = models.JSONField(default=dict)  # pypto_core.fix_verdict.verdict_of(): estimate, measured, noise
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["comparison", "rule"], name="one_verdict_per_rule")]


class TimelineLayout(models.Model):
    """How one user arranged one profile's timeline: lanes hidden or shown against their defaults (constant
    counters start hidden) and groups folded. Remembered server-side so that it follows the user around."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="+")
    hidden = models.JSONField(default=list, blank=True)  # lane ids hidden by the user
    shown = models.JSONField(default=list, blank=True)  # lane ids hidden by default that the user shows
    collapsed = models.JSONField(default=list, blank=True)  # group headings folded
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "profile"],
                                               name="one_timeline_layout_per_user")]


class PageBuild(models.Model):
    """What a worker builds for the pages of one parse of a profile, on demand (analysis/page_builds.py): the
    page views (page data and timeline index) of a profile analysed before they existed, or the chrome-trace
    export. One row per profile and kind: a request that finds the output missing queues its build with one
    conditional UPDATE, so a storm of refreshes queues one build; the row says why a build failed."""

    class Kind(models.TextChoices):
        VIEWS = "views", _("Page data and timeline index")
        TRACE = "trace", _("Chrome trace")

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="page_builds")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    source = models.CharField(max_length=500)  # the parse (Profile.parquet_prefix) this build is of
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    # Queued: until then no request queues it again (a lost message is sent again after it). Running: the
    # worker's claim, outliving the task's hard time limit, so only a dead worker's build is taken over.
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)  # how many times a worker started it
    error = models.TextField(blank=True, default="")  # the reason a build failed, as the user may read it
    # ``error`` as its message (analysis.texts): a page shows it in its own language
    error_message = models.JSONField(null=True, blank=True, default=None)
    requested_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile", "kind"], name="one_page_build_per_kind")]
