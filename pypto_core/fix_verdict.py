"""The verdict on a finding once its fix was run again (issue 21): fixed, persisting or worse, read from a
``compare`` result (docs/contract.md), with the measured saving beside the estimate and the noise
test's verdict.

* fixed: the rule no longer finds it in the new run, or the rule now flags only other kernels (the
  unfused RMSNorm chain gone, the fused norms that replaced it still waiting on a slow host: a different
  finding, named beside the verdict);
* worse: it is still found on the same kernels, and its kernels (the model blocks the rule declares,
  ``@rule(blocks=...)``, which the comparison measures) took longer;
* persisting: it is still found on the same kernels otherwise.

The noise verdict is the headline metric's (per-token latency, else the critical path) from the same
comparison: ``better`` / ``worse`` outside the noise, or ``within noise``, or ``not measured`` when neither
run has the samples. One function, used by the dashboard, the SDK and the CLI.
"""

from __future__ import annotations

from typing import Any

from pypto_core.rules.registry import rule_blocks

VERDICTS = ("fixed", "persisting", "worse")
NOISE_METRICS = ("per_token_latency_ms", "critical_path_ms", "step_time_ms")  # the first one measured


def noise_verdict(result: dict[str, Any]) -> dict[str, Any]:
    """The headline metric's change and whether it is outside the noise."""
    rows = {row.get("name"): row for row in result.get("metrics") or []}
    for name in NOISE_METRICS:
        row = rows.get(name)
        if row and row.get("base") is not None and row.get("new") is not None:
            if row.get("significant"):
                # a change outside the noise with no verdict (two workloads: different_work) measures no fix
                word = {True: "better", False: "worse"}.get(row.get("better"), "not measured")
            else:
                word = "within noise"
            return {"metric": name, "base": row["base"], "new": row["new"], "delta_pct": row.get("delta_pct"),
                    "significant": bool(row.get("significant")), "verdict": word}
    return {"metric": None, "significant": False, "verdict": "not measured"}


def verdict_of(result: dict[str, Any], rule: str, *, base_ops: list[str] | None = None,
               new_ops: list[str] | None = None) -> dict[str, Any]:
    """The verdict on ``rule``'s finding from a comparison of the run it was found in with the run fixed;
    ``base_ops`` / ``new_ops``: the op types the finding flagged in each run (``Finding.ops``), when known."""
    row = next((f for f in result.get("findings") or [] if f.get("rule") == rule), None)
    measured = row.get("measured_saving_us") if row else None
    other = sorted(set(new_ops or []) - set(base_ops or []))
    if row is None:
        # the base run's report did not have it: nothing to judge (reported as persisting, with the reason)
        verdict, reason = "persisting", "the comparison does not list this finding in the original run"
    elif row.get("status") == "fixed":
        verdict, reason = "fixed", "no longer found in the new run"
    elif base_ops and new_ops and not set(base_ops) & set(new_ops):
        verdict = "fixed"
        reason = "its kernels are gone; the rule now flags other kernels: " + ", ".join(other)
    elif measured is not None and measured < 0:
        verdict, reason = "worse", "still found, and its kernels took longer"
    else:
        verdict, reason = "persisting", "still found in the new run"
    blocks = _blocks_of(result, rule)
    messages = (row or {}).get("messages")  # the title in any language
    return {
        "rule": rule, "verdict": verdict, "reason": reason,
        "title": (row or {}).get("title", ""),
        **({"messages": messages} if messages else {}),
        "estimated_saving_us": (row or {}).get("estimated_saving_us"),
        "measured_saving_us": measured,
        "noise": noise_verdict(result),
        "flagged_before": list(base_ops or []), "flagged_after": list(new_ops or []),
        "kernels": blocks,  # the op types that served the finding's blocks before and after
        "normalisation": result.get("normalisation"),
    }


def _blocks_of(result: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    wanted = rule_blocks(rule)
    return [{"block": b.get("block"), "base_us": b.get("base_us"), "new_us": b.get("new_us"),
             "base_op_types": b.get("base_op_types", []), "new_op_types": b.get("new_op_types", [])}
            for b in result.get("blocks") or [] if b.get("block") in wanted]
