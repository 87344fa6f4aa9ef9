"""A profile's status moves only along ``profiles.models.TRANSITIONS``, by one conditional UPDATE
(``ProfileQuerySet.transition``); its summary is one typed, versioned record (``analysis.summary``) whose
headline figures are columns, filled for the rows stored before the columns existed."""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.core.files.base import ContentFile
from django.utils import timezone

from analysis.summary import SUMMARY_VERSION, ProfileSummary, summary_fields, summary_of
from profiles.models import FINISHED, IN_PIPELINE, TRANSITIONS, InvalidTransition, Profile, ProfileStatus
from tests.web.helpers import project_with

pytestmark = pytest.mark.django_db

# A summary as stored before it had a version (version 1): no "version" key, a key this version does not
# know, and the report of a decode run.
V1_SUMMARY = {
    "format": "ascend_pt", "files": 12, "kernel_count": 340, "steps": 3, "duration_ns": 5_000_000,
    "rank_folders": ["rank_0"], "warnings": ["w"], "some_future_key": {"kept": True},
    "report": {"profile": {"decode": {"per_token_ms_p50": 21.5, "tokens_per_s": 46.5}, "simulated": True},
               "estimated_combined_speedup": 1.3},
}


def _profile(owner: Any, **fields: Any) -> Profile:
    profile = Profile(project=project_with(owner), name="p", original_filename="p.zip", upload_kind="zip",
                      created_by=owner, **fields)
    profile.archive.save("p.zip", ContentFile(b"PK\x05\x06" + b"\0" * 18), save=False)
    profile.save()
    return profile


def test_every_status_is_in_the_table_and_either_in_the_pipeline_or_finished() -> None:
    assert set(TRANSITIONS) == set(ProfileStatus.values)
    assert set(IN_PIPELINE) | set(FINISHED) == set(ProfileStatus.values)
    assert not set(IN_PIPELINE) & set(FINISHED)
    assert all(targets <= set(ProfileStatus.values) for targets in TRANSITIONS.values())


def test_a_transition_outside_the_table_is_refused(make_user: Any) -> None:
    profile = _profile(make_user("owner"), status=ProfileStatus.READY)
    with pytest.raises(InvalidTransition):
        Profile.objects.filter(pk=profile.pk).transition(ProfileStatus.ANALYZING,
                                                         among=(ProfileStatus.READY,))
    # without ``among``: every status the table lets reach ANALYZING, which READY is not
    assert Profile.objects.filter(pk=profile.pk).transition(ProfileStatus.ANALYZING) == 0
    profile.refresh_from_db()
    assert profile.status == ProfileStatus.READY


def test_a_claim_is_taken_once(make_user: Any) -> None:
    """Two workers claiming the same queued profile: one conditional UPDATE each, one wins."""
    profile = _profile(make_user("owner"), status=ProfileStatus.QUEUED)
    rows = Profile.objects.filter(pk=profile.pk)
    lease = timezone.now() + timedelta(minutes=5)
    claimable = (ProfileStatus.QUEUED, ProfileStatus.PARSING)
    first = rows.unleased().transition(ProfileStatus.PARSING, among=claimable, lease_until=lease)
    second = rows.unleased().transition(ProfileStatus.PARSING, among=claimable, lease_until=lease)
    assert (first, second) == (1, 0)
    # once the lease ran out (the worker died), a redelivered message takes it over
    rows.update(lease_until=timezone.now() - timedelta(seconds=1))
    assert rows.unleased().transition(ProfileStatus.PARSING, among=claimable, lease_until=lease) == 1


def test_an_old_summary_reads_as_the_current_version_and_keeps_what_it_does_not_know() -> None:
    summary = ProfileSummary.from_dict(V1_SUMMARY)
    assert summary.version == SUMMARY_VERSION
    assert (summary.format, summary.kernel_count, summary.rank_folders) == ("ascend_pt", 340, ["rank_0"])
    assert (summary.per_token_ms, summary.tokens_per_s, summary.is_simulated) == (21.5, 46.5, True)
    stored = summary.to_dict()
    assert stored["version"] == SUMMARY_VERSION and stored["some_future_key"] == {"kept": True}
    assert ProfileSummary.from_dict(stored) == summary  # written back and read again: the same record
    # an empty summary (a profile not parsed yet) is readable too, and says nothing it does not know
    empty = ProfileSummary.from_dict({})
    assert (empty.format, empty.kernel_count, empty.report, empty.per_token_ms) == (None, None, None, None)


def test_the_headline_columns_are_written_with_the_summary(make_user: Any) -> None:
    profile = _profile(make_user("owner"), status=ProfileStatus.READY)
    Profile.objects.filter(pk=profile.pk).update(**summary_fields(ProfileSummary.from_dict(V1_SUMMARY)))
    profile.refresh_from_db()
    assert (profile.per_token_ms, profile.tokens_per_s, profile.simulated) == (21.5, 46.5, True)
    assert summary_of(profile).kernel_count == 340


def test_the_migration_fills_the_headline_columns_of_rows_stored_before_them(make_user: Any) -> None:
    owner = make_user("owner")
    old = _profile(owner, status=ProfileStatus.READY, summary=V1_SUMMARY)
    measured = _profile(owner, status=ProfileStatus.READY, summary={"simulated": False, "report": {
        "profile": {"decode": {"per_token_ms_p50": 30.0}}}})
    never_parsed = _profile(owner, status=ProfileStatus.FAILED, summary={})
    migration = importlib.import_module("profiles.migrations.0003_profile_headline_columns")
    migration.fill(apps, None)
    for p in (old, measured, never_parsed):
        p.refresh_from_db()
    assert (old.per_token_ms, old.tokens_per_s, old.simulated) == (21.5, 46.5, True)
    assert (measured.per_token_ms, measured.tokens_per_s, measured.simulated) == (30.0, None, False)
    assert (never_parsed.per_token_ms, never_parsed.simulated) == (None, False)
