"""Diagnose: the rules (``pypto_core.rules.diagnose``) and remedies on a parsed profile's tables, then its
page views; findings and the artifact set replace the previous ones at once, and the profile is ready. A
profile that becomes ready is compared with its project's baseline (``regressions``), and the apps above are
told
(``signals.profile_ready``: a verification job compares it with the original).

Also the what-if replay of the profile page, which runs the rules the same way in a request.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from analysis import pagedata, signals
from analysis.artifact_services import (
    artifact_profile_meta,
    artifact_set_store,
    model_source_of,
    remedies_generate,
)
from analysis.models import AnalysisRun, Finding
from analysis.pipeline.steps import ProfileStep, run_step
from analysis.regressions import comparison_auto_queue
from analysis.storage import ProfileStore
from analysis.summary import summary_fields, summary_of
from analysis.texts import localized
from analysis.workdirs import make_workdir
from profiles.models import Profile, ProfileStatus
from pypto_core.errors import InputError
from pypto_core.graph import OperatorCallGraph
from pypto_core.i18n import msg
from pypto_core.profile import Profile as CoreProfile
from pypto_core.profile import ProfileGroup
from pypto_core.remedies.artifact import Artifact as CoreArtifact
from pypto_core.rules import Report, diagnose
from pypto_core.rules.diagnose import GROUP_TABLES, diagnosis_step_columns
from pypto_core.rules.registry import discover

log = logging.getLogger(__name__)


def pipeline_diagnose(*, profile_id: int) -> None:
    run_step(DiagnoseStep(profile_id))


def load_for_diagnosis(profile: Profile, dest: Path) -> tuple[CoreProfile, ProfileGroup | None, Path]:
    """The primary rank, the whole group when the upload had several ranks (cross-rank rules), and the
    folder the primary rank's tables were fetched to.

    The primary rank's tables as the rules, page data and the timeline index read them
    (``diagnosis_step_columns``: every column but the kernels' PMU counters no rule reads, which the index's
    event details take from the folder); of the other ranks only what the group-scope rules read, so that a
    group never holds every rank's full tables. Text stays dictionary-encoded and the kernels' shape cells
    coded."""
    store = ProfileStore(profile)
    folders = store.rank_folders()
    columns = diagnosis_step_columns()
    if len(folders) <= 1:
        return store.load(dest, columns=columns), None, store.local_folder(dest)
    ranks = [store.load(dest, folder=folder, tables=GROUP_TABLES, columns=columns) for folder in folders]
    group = ProfileGroup(profiles=ranks, source=profile.original_filename)
    at = next(i for i, p in enumerate(ranks) if p is group.primary())
    group.profiles[at] = CoreProfile.load(dest / folders[at], columns=columns)  # already fetched there
    return group.profiles[at], group, dest / folders[at]


class DiagnoseStep(ProfileStep):
    kind = "diagnose"
    internal_error_reason = gettext_noop("{subject}: internal error while diagnosing ({error}: {detail})")
    claim_from = (ProfileStatus.ANALYZING,)
    holding = ProfileStatus.ANALYZING
    release_to = ProfileStatus.ANALYZING

    def work(self, workdir: Path) -> None:
        profile = self.profile
        self.progress(65, msg(gettext_noop("diagnosing")))
        report: Report | None = None
        artifacts: list[CoreArtifact] = []
        if not profile.parquet_prefix:
            self.log(msg(gettext_noop("skipping diagnosis: no parsed tables")))
        else:
            with self.timed("load_s"):
                core, group, saved = load_for_diagnosis(profile, workdir)
            with self.timed("rules_s"):
                # one call graph for the rules, the page data and the timeline index: one attribution
                graph = OperatorCallGraph(core, profile.sku or None)
                report = diagnose(core, sku=profile.sku or None, group=group, graph=graph)
            self.progress(80, msg(gettext_noop("{n} findings"), n=len(report.findings)))
            with self.timed("remedies_s"):
                model_source, model_filename = model_source_of(profile)
                artifacts = remedies_generate(report=report,
                                              profile_meta=artifact_profile_meta(profile, core.meta),
                                              model_source=model_source, model_filename=model_filename)
            self.progress(90, msg(gettext_noop("{n} artifacts"), n=len(artifacts)))
            try:  # page data and the timeline index; never at the cost of the findings
                self.timings.update(pagedata.views_build(profile=profile, core=core, workdir=workdir,
                                                         graph=graph, saved=saved))
                self.progress(95, msg(gettext_noop("page data and timeline index built")))
            except Exception as exc:
                log.exception("views of profile %s not built", profile.pk)
                self.log(msg(gettext_noop("views not built ({error}: {detail}); they are built on first "
                                          "view"), error=type(exc).__name__, detail=str(exc)))
        report_dict = report.to_dict() if report is not None else None
        findings: list[dict[str, Any]] = list((report_dict or {}).get("findings", []))
        with transaction.atomic():
            # Replace, never append: a step that runs twice leaves one set of findings. A finding found again
            # keeps its row (its id is stable across re-runs: verifications and the fix ledger point at it).
            rows = finding_rows_replace(profile=profile, run=self.run, findings=findings,
                                        schema_version=(report_dict or {}).get("schema_version", 1))
            # The whole set is the profile's next artifact version; older versions are kept.
            artifact_set_store(profile=profile, run=self.run, artifacts=artifacts,
                               findings_by_rule={row.rule: row for row in rows})
            summary = summary_of(profile)
            if report_dict is not None:
                summary.report = {k: v for k, v in report_dict.items() if k != "findings"}
                summary.finding_count = len(findings)
            if self.finish(ProfileStatus.READY, progress=100, **summary_fields(summary)):
                comparison_auto_queue(profile_id=profile.pk)  # regression tracking: vs the pinned baseline
                signals.profile_ready.send(sender=Profile, profile_id=profile.pk)
        self.log(msg(gettext_noop("done, timings {timings}"), timings=str(self.timings)))


def finding_rows_replace(*, profile: Profile, run: AnalysisRun, findings: list[dict[str, Any]],
                         schema_version: int) -> list[Finding]:
    """The profile's findings become ``findings``: a rule found again updates its row in place (one row per
    rule and profile), rows of rules no longer found go, new rules get new rows. Call in a transaction."""
    kept = {row.rule: row for row in profile.findings.select_for_update().order_by("id")}
    rows: list[Finding] = []
    for i, f in enumerate(findings):
        fields = {"run": run, "rule": str(f.get("rule", ""))[:64], "severity": str(f.get("severity", ""))[:8],
                  "title": str(f.get("title", ""))[:300], "order": i, "data": f,
                  "schema_version": schema_version}
        row = kept.pop(str(fields["rule"]), None)
        if row is None:
            rows.append(Finding.objects.create(profile=profile, **fields))
            continue
        for name, value in fields.items():
            setattr(row, name, value)
        row.save(update_fields=list(fields))
        rows.append(row)
    Finding.objects.filter(pk__in=[row.pk for row in kept.values()]).delete()
    return rows


# --- the what-if replay of the profile page --------------------------------------------------------------

WHAT_IF_MAX_KERNELS = 2_000_000  # a replay in a request; larger runs: pypto analyze --what-if [INFERRED]


def profile_what_if(*, profile: Profile, rules: list[str], language: str | None = None) -> dict[str, Any]:
    """The run replayed with the listed findings fixed together (pypto_core.replay), for the profile page's
    "replay the ticked findings"; the same numbers as ``pypto analyze --what-if``."""
    unknown = sorted(set(rules) - set(discover()))
    if not rules or unknown:
        raise InputError(profile.name, _("unknown rules: %(rules)s") % {"rules": ", ".join(unknown) or "-"})
    if (summary_of(profile).kernel_count or 0) > WHAT_IF_MAX_KERNELS:
        raise InputError(profile.name, _("too many tasks to replay here (more than %(n)s): use pypto analyze "
                                         "--what-if") % {"n": WHAT_IF_MAX_KERNELS})
    workdir = make_workdir(profile.pk, "what-if")
    try:
        core, group, _folder = load_for_diagnosis(profile, workdir)
        report = diagnose(core, sku=profile.sku or None, group=group, what_if=list(rules))
        result = dict(report.what_if or {})
        if result.get("note"):  # in the page's language (the engine's message), beside the English note
            result["note_localized"] = localized(result["note"], result.get("note_message"), language)
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
