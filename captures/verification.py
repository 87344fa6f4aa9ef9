"""Verify a fix (issue 21): from findings to a capture job that runs the same workload with their remedies
applied, then the automatic comparison with the original and a measured verdict on each finding.

* ``verification_create``: the remedies of the findings (the model-file diff of a patch, the finding's env
  settings, the AOE tuning config) that the chosen agent says it accepts, sent with the job; the rest are
  listed as left out with the reason; nothing the agent accepts, or an agent that cannot run the workload,
  is a named refusal. The agent checks everything again against its own config before anything runs.
* ``verification_compare_queue``: once the job's profile is ready, its comparison with the original.
* ``verdicts_record``: once that comparison is done, one ``FixVerification`` per finding
  (``pypto_core.fix_verdict``), which the fix ledger reads (``analysis.fix_ledger``).

The analysis below tells this module when a profile is ready and when a comparison is done
(``analysis.signals``; connected in ``captures/apps.py``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from analysis.artifact_services import artifact_content
from analysis.fix_ledger import verdicts_of_comparison
from analysis.models import Comparison, Finding, FixVerification, JobStatus
from analysis.pipeline.queue import TaskName, enqueue_on_commit
from analysis.selectors import artifacts_of_profile
from captures.models import Agent, CaptureJob
from captures.services import capture_create
from profiles.models import Profile, ProfileStatus
from profiles.services import require_write
from pypto_core.fix_verdict import verdict_of

MAX_FINDINGS = 20


class VerificationRefused(Exception):
    """No agent can run this verification: ``code`` names why (the API's 4xx body), ``detail`` says it."""

    def __init__(self, code: str, detail: str, left_out: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.code, self.detail, self.left_out = code, detail, left_out or []

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, "left_out": self.left_out}


# --- the remedies a finding brings -----------------------------------------------------------------


Remedy = dict[str, Any]  # {"kind", "name", "content", "sha256", "rule", "finding"}, or what was left out


def finding_remedies(*, profile: Profile, finding: Finding) -> tuple[list[Remedy], list[Remedy]]:
    """What can be sent to an agent for ``finding`` (from the latest remedies set), and what cannot."""
    found: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    artifacts = [a for a in artifacts_of_profile(profile=profile) if a.rule == finding.rule]
    for artifact in artifacts:
        if artifact.kind == "diff":
            kind = "patch"
        elif artifact.kind == "config" and artifact.name.startswith("aoe_"):
            kind = "aoe"
        else:
            continue
        content = artifact_content(artifact)
        if hashlib.sha256(content).hexdigest() != artifact.sha256:
            left_out.append(_left(artifact.name, kind, finding,
                                  _("its stored file changed since it was made")))
            continue
        found.append(_remedy(kind, artifact.name, content.decode("utf-8", "replace"), finding))
    if not any(r["kind"] == "patch" for r in found) and any(a.kind == "patch" for a in artifacts):
        patch = next(a.name for a in artifacts if a.kind == "patch")
        why = _("attach the model file to this profile: the patch is sent as a diff against it")
        left_out.append(_left(patch, "patch", finding, why))
    env = (finding.data.get("details") or {}).get("env")
    if isinstance(env, dict):  # one remedy per variable: an agent may allow one and not another
        for key, value in env.items():
            found.append(_remedy("env", f"{key}.env", f"{key}={value}\n", finding))
    return found, left_out


def _remedy(kind: str, name: str, content: str, finding: Finding) -> dict[str, Any]:
    return {"kind": kind, "name": name, "content": content,
            "sha256": hashlib.sha256(content.encode("utf-8")).hexdigest(), "rule": finding.rule,
            "finding": finding.pk}


def _left(name: str, kind: str, finding: Finding, reason: str) -> dict[str, Any]:
    return {"name": name, "kind": kind, "rule": finding.rule, "finding": finding.pk, "reason": reason}


def agent_accepts(*, agent: Agent, workload: str, remedy: dict[str, Any]) -> str | None:
    """None when the agent says it applies ``remedy`` for ``workload``, else the reason it would refuse.

    What the agent reported at registration; the agent checks again, against its own config, on the host."""
    policy = (agent.capabilities or {}).get("remedies") or {}
    kind = remedy["kind"]
    if kind not in (policy.get("kinds") or []):
        return _("agent %(agent)s does not apply %(kind)s remedies") % {"agent": agent.name, "kind": kind}
    if kind == "env":
        names = [line.split("=", 1)[0] for line in remedy["content"].splitlines() if "=" in line]
        refused = [n for n in names if n not in (policy.get("env") or [])]
        if refused:
            return _("agent %(agent)s does not let a job set %(names)s") % {"agent": agent.name,
                                                                             "names": ", ".join(refused)}
    if kind == "patch":
        info = next((w for w in agent.workloads if isinstance(w, dict) and w.get("name") == workload), {})
        if not info.get("patchable"):
            return _("workload %(workload)s declares no source folder on its agent") % {"workload": workload}
    if kind == "aoe" and not (agent.capabilities or {}).get("aoe"):
        return _("agent %(agent)s's host has no AOE") % {"agent": agent.name}
    return None


# --- services --------------------------------------------------------------------------------------


def verification_create(*, user: Account, profile: Profile, finding_ids: list[int],
                        agent_id: int | None = None, workload: str | None = None,
                        params: dict[str, Any] | None = None) -> CaptureJob:
    """A capture job that runs the workload again with the findings' remedies; ``VerificationRefused``
    when no agent can run it. A profile that came from a capture defaults to that job's agent, workload
    and params: the same workload with the same parameters."""
    require_write(user=user, project=profile.project)
    if profile.status != ProfileStatus.READY:
        raise VerificationRefused("profile_not_ready", _("The profile is not ready."))
    ids = list(dict.fromkeys(int(i) for i in finding_ids))[:MAX_FINDINGS]
    findings = list(Finding.objects.filter(profile=profile, pk__in=ids).order_by("order", "id"))
    if not ids or len(findings) != len(ids):
        raise VerificationRefused("unknown_findings", _("Name findings of this profile."))
    origin = CaptureJob.objects.filter(profile=profile).order_by("-id").first()
    if agent_id is None and origin is not None:
        agent_id = origin.agent_id
    if not workload and origin is not None:
        workload = origin.workload
    if params is None:
        params = dict(origin.params) if origin is not None else {}
    if agent_id is None or not workload:
        raise VerificationRefused("agent_needed", _("This profile did not come from a capture: choose an "
                                                   "agent and a workload."))
    agent = Agent.objects.filter(project=profile.project, pk=agent_id).first()
    if agent is None or agent.revoked:
        raise VerificationRefused("agent_unavailable", _("No such agent in this project, or its token was "
                                                         "revoked."))
    if workload not in agent.workload_names():
        raise VerificationRefused("workload_unknown", _("Agent %(agent)s does not offer a workload named "
                                                        "%(name)s.") % {"agent": agent.name,
                                                                        "name": repr(workload)})
    send: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for finding in findings:
        found, missing = finding_remedies(profile=profile, finding=finding)
        left_out += missing
        for remedy in found:
            reason = agent_accepts(agent=agent, workload=workload, remedy=remedy)
            if reason:
                left_out.append(_left(remedy["name"], remedy["kind"], finding, reason))
            else:
                send.append(remedy)
    if not send:
        raise VerificationRefused("no_applicable_remedy", _("Agent %(agent)s cannot apply any remedy of "
                                                            "these findings.") % {"agent": agent.name},
                                  left_out)
    with transaction.atomic():
        try:
            job = capture_create(project=profile.project, user=user, agent_id=agent.pk, workload=workload,
                                 params=params)
        except ValidationError as exc:
            raise VerificationRefused("params_refused", " ".join(exc.messages)) from exc
        job.verifies = profile
        job.verify_findings = [{"id": f.pk, "rule": f.rule, "title": f.title} for f in findings]
        job.remedies = send
        job.remedies_left_out = left_out
        job.save(update_fields=["verifies", "verify_findings", "remedies", "remedies_left_out", "updated_at"])
    return job


def verification_compare_queue(*, profile_id: int) -> Comparison | None:
    """Call in the transaction that makes a profile ready: when it is a verification job's output, make the
    comparison with the original (queued after the commit), once."""
    job = (CaptureJob.objects.select_for_update().filter(profile_id=profile_id, verifies__isnull=False,
                                                         comparison__isnull=True).first())
    if job is None or job.verifies_id is None or job.verifies_id == profile_id:
        return None
    comparison = Comparison.objects.create(project_id=job.project_id, base_id=job.verifies_id,
                                           candidate_id=profile_id, created_by=job.created_by)
    CaptureJob.objects.filter(pk=job.pk).update(comparison=comparison)
    enqueue_on_commit(TaskName.COMPARE, comparison.pk)
    return comparison


def verdicts_record(*, comparison_id: int) -> list[FixVerification]:
    """One verdict per verified finding, from the finished comparison of a verification job (idempotent)."""
    comparison = Comparison.objects.filter(pk=comparison_id, status=JobStatus.DONE).first()
    job = CaptureJob.objects.select_related("agent").filter(comparison_id=comparison_id).first()
    if comparison is None or job is None:
        return []
    backend = str((job.agent.capabilities or {}).get("backend") or "unknown")
    rows = []
    for item in job.verify_findings:
        rule = str(item.get("rule"))
        before = Finding.objects.filter(profile_id=comparison.base_id, rule=rule).first()
        after = Finding.objects.filter(profile_id=comparison.candidate_id, rule=rule).first()
        data = verdict_of(comparison.result or {}, rule, base_ops=_ops(before), new_ops=_ops(after))
        # times measured on a CPU or GPU host (a stand-in NPU, or another device) are not NPU figures
        data.update(measured_on=backend, npu_figure=backend == "npu", job=job.pk)
        finding = before if before is not None and before.pk == item.get("id") else None
        try:
            row, _created = FixVerification.objects.update_or_create(
                comparison=comparison, rule=data["rule"],
                defaults={"project_id": comparison.project_id, "finding": finding,
                          "title": str(item.get("title") or data["title"])[:300],
                          "base_id": comparison.base_id,
                          "candidate_id": comparison.candidate_id, "job": job, "verdict": data["verdict"],
                          "data": data})
        except IntegrityError:  # a concurrent run of this made it first
            row = FixVerification.objects.get(comparison=comparison, rule=data["rule"])
        rows.append(row)
    return rows


def _ops(finding: Finding | None) -> list[str] | None:
    ops = (finding.data or {}).get("ops") if finding is not None else None
    return [str(op) for op in ops] if isinstance(ops, list) else None


# --- selectors -------------------------------------------------------------------------------------


def verification_of_job(*, job: CaptureJob) -> dict[str, Any] | None:
    """What a verification job's page and API show: the findings, the comparison and its verdicts."""
    if job.verifies_id is None:
        return None
    comparison = Comparison.objects.filter(pk=job.comparison_id).first() if job.comparison_id else None
    return {
        "profile": job.verifies_id, "findings": job.verify_findings,
        "comparison": comparison.pk if comparison else None,
        "comparison_status": comparison.status if comparison else None,
        "verdicts": verdicts_of_comparison(comparison=comparison) if comparison else [],
    }


def verify_targets(*, profile: Profile) -> dict[str, Any]:
    """The profile page's "Verify on agent" choices: the capture it came from (the default), and every
    live agent's workloads."""
    origin = CaptureJob.objects.filter(profile=profile).select_related("agent").order_by("-id").first()
    targets = []
    live = Agent.objects.filter(project_id=profile.project_id, revoked_at__isnull=True).order_by("name")
    for agent in live:
        for name in agent.workload_names():
            targets.append({"value": f"{agent.pk}:{name}", "label": f"{agent.name} · {name}"})
    return {"origin": origin, "targets": targets}


# --- what the analysis tells (analysis.signals; connected in captures/apps.py) -----------------------


def on_profile_ready(*, profile_id: int, **kwargs: Any) -> None:
    verification_compare_queue(profile_id=profile_id)  # a verification job's run: compared with the original


def on_comparison_done(*, comparison_id: int, **kwargs: Any) -> None:
    verdicts_record(comparison_id=comparison_id)  # a verification job's comparison: a verdict per finding
