"""What each evidence key means, in words: the one mapping the profile page, the findings API's readers and
the reports use to show ``flagged_time_us`` as "Time of the flagged kernels (µs)". The JSON keeps the ids;
a key with no label here is shown as its id.

Units follow the key's suffix: ``_us`` microseconds, ``_pct`` percent, ``_share`` / ``_ratio`` a fraction.
"""

from __future__ import annotations

import re
from typing import Any

from pypto_core.durations import format_duration
from pypto_core.i18n import DEFAULT_LANGUAGE, Message, msg, render
from pypto_core.rules.kv_cache_layout import PROXY
from pypto_core.rules.slow_rank import RANK_TIME_KINDS

EVIDENCE_LABELS: dict[str, Message] = {
    # kernels and time
    "flagged_kernels": msg("Flagged kernels"),
    "flagged_time_us": msg("Time of the flagged kernels (µs)"),
    "kernels": msg("Kernels"),
    "time_us": msg("Time (µs)"),
    "time_share": msg("Share of the run's time"),
    "share_of_step": msg("Share of the step time"),
    "busy_share": msg("Busy share of the device"),
    "idle_us": msg("Idle time (µs)"),
    "compute_us": msg("Compute time (µs)"),
    "min_dur_us": msg("Shortest kernel (µs)"),
    "threshold": msg("Threshold"),
    "threshold_share": msg("Threshold (share of the run)"),
    "threshold_us": msg("Threshold (µs)"),
    "threshold_efficiency_pct": msg("Threshold: roofline efficiency (%)"),
    "steps": msg("Steps"),
    "samples": msg("Samples"),
    "per_token": msg("Per token"),
    # roofline
    "roofline_efficiency_pct": msg("Roofline efficiency (%)"),
    "achieved_tflops": msg("Achieved TFLOP/s"),
    "peak_tflops": msg("Peak TFLOP/s"),
    "achieved_bandwidth_gbps": msg("Achieved bandwidth (GB/s)"),
    "peak_bandwidth_gbps": msg("Peak HBM bandwidth (GB/s)"),
    "target_efficiency_compute_pct": msg("Target efficiency, compute-bound shapes (%)"),
    "target_efficiency_memory_pct": msg("Target efficiency, memory-bound shapes (%)"),
    "mix_aic_kernels": msg("Mixed AI Core (MIX_AIC) kernels"),
    "fused_bandwidth_efficiency_pct": msg("Assumed bandwidth efficiency of the fused kernel (%)"),
    # attention, chains, fusion
    "unfused_chains": msg("Unfused chains"),
    "unfused_chains_in_decode": msg("Unfused chains in decode"),
    "chains": msg("Chains"),
    "chains_per_token": msg("Chains per token"),
    "kernels_per_chain": msg("Kernels per chain"),
    "chain_time_us": msg("Chain time (µs)"),
    "chains_per_step": msg("Chains per step"),
    "chain_kernels": msg("Kernels in the chains"),
    "fused_time_bound_us": msg("Fused time at least, each chain's longest kernel (µs)"),
    "chain_patterns": msg("Most costly chain patterns (chains, time)"),
    "chain_launch_gap_us": msg("Launch gaps before the chains (µs)"),
    "mte2_bound_fused_kernels": msg("Fused kernels bound by data movement (MTE2)"),
    "mte2_share": msg("MTE2 share of the cycles"),
    "mte2_threshold": msg("Threshold: MTE2 share"),
    "attention_time_us": msg("Attention time (µs)"),
    "attention_launch_gap_us": msg("Launch gaps before attention (µs)"),
    "fused_us_assumed": msg("Fused kernel time, assumed (µs)"),
    "assumed_aicore_speedup": msg("Assumed AI Core speedup"),
    # normalisation and launch overhead
    "norm_kernel_time_us": msg("Norm kernel time (µs)"),
    "norm_launch_gap_us": msg("Launch gaps before norm kernels (µs)"),
    "median_norm_kernel_us": msg("Median norm kernel (µs)"),
    "fused_norm_us_assumed": msg("Fused norm time, assumed (µs)"),
    "host_waiting_fused_norms": msg("Fused norms waiting for the host"),
    "host_launch_bound_us": msg("Host launch bound time (µs)"),
    "host_launch_bound_share": msg("Host launch bound share"),
    "gap_over_compute": msg("Gaps over compute time"),
    "gaps_over_min": msg("Gaps longer than the minimum"),
    "longest_gap_us": msg("Longest gap (µs)"),
    "outside_kernel_gaps_us": msg("Host launch bound time outside the gaps between kernels (µs)"),
    "before_first_kernel_us": msg("Host launch bound time before each step's first kernel (µs)"),
    "graph_launched_share": msg("Share of kernels launched from captured graphs"),
    "graph_launches": msg("Captured-graph launches"),
    # KV cache layout, format conversion, copies
    "layout_copies": msg("Layout copies"),
    "copies_per_token": msg("Copies per token"),
    "copy_time_us": msg("Copy time (µs)"),
    "copy_launch_gap_us": msg("Launch gaps before the copies (µs)"),
    "layout_tax_vs_attention": msg("Copy time over attention time"),
    "kv_cache_noncontiguous_share": msg("KV cache non-contiguous share (proxy)"),
    "proxy": msg("Measured as"),
    "in_place_cache_update_kernels": msg("In-place cache update kernels"),
    "conversions": msg("Format conversions (TransData)"),
    "conversion_time_us": msg("Format conversion time (µs)"),
    "memcpy_split_us": msg("Memory copy time by kind (µs)"),
    "pageable_us": msg("Copies from pageable host memory (µs)"),
    "graph_input_copies_us": msg("Copies into captured graphs' inputs before each replay (µs)"),
    # communication
    "collectives": msg("Collectives"),
    "collective_time_us": msg("Collective time (µs)"),
    "communication_time_us": msg("Communication time (µs)"),
    "communication_not_overlapped_us": msg("Communication not overlapped (µs)"),
    "communication_overlapped_us": msg("Communication overlapped with compute (µs)"),
    "transit_us": msg("Transit time (µs)"),
    "wait_time_us": msg("Wait time (µs)"),
    "wait_us": msg("Wait time (µs)"),
    "wait_share": msg("Wait share"),
    "wait_time_ratio": msg("Wait time ratio"),
    "waiting_share": msg("Share spent waiting for peers"),
    "p2p_wait_share": msg("Share of the wait in point-to-point send/receive (pipeline stages)"),
    "transit_from_links_us": msg("Transit taken from the links' bandwidth info (µs)"),
    "wait_for_other_ranks_us": msg("Wait for other ranks (µs)"),
    "synchronization_time_us": msg("Synchronisation time (µs)"),
    "size_mb": msg("Data size (MB)"),
    # ranks
    "kind": msg("Kind"),
    "slow_rank": msg("Slow rank"),
    "gap_vs_mean": msg("Spread above the mean"),
    "spread_us": msg("Spread between the ranks, max - min (µs)"),
    "step_time_us": msg("Mean step time of the ranks (µs)"),
    "spread_vs_step": msg("Spread between the ranks over the step time"),
    "ranks_compared": msg("Ranks compared"),
    "world_size": msg("Ranks in the job (world size)"),
    "ranks_in_profile": msg("Ranks in the profile"),
    # AI CPU, dynamic shapes, sync, frequency, cores
    "aicpu_tasks": msg("AI CPU tasks"),
    "aicpu_time_us": msg("AI CPU time (µs)"),
    "dynamic_op_share": msg("Share of dynamic-shape operators"),
    "compile_api_calls": msg("Operator compilations"),
    "compile_call_threshold": msg("Threshold: compilations"),
    "compile_time_us": msg("Compilation time (µs)"),
    "compile_time_share": msg("Compilation share of the run"),
    "sync_calls": msg("Synchronisation calls"),
    "stall_us_total": msg("Total stall (µs)"),
    "rated_mhz": msg("Rated AI Core clock (MHz)"),
    "min_mhz": msg("Lowest AI Core clock (MHz)"),
    "mean_mhz": msg("Mean AI Core clock (MHz)"),
    "drop_ratio": msg("AI Core clock drop ratio"),
    "ai_cores": msg("AI Cores"),
    "vector_cores": msg("Vector cores"),
    "mean_occupancy_pct": msg("Mean core occupancy (%)"),
    "vendor": msg("Vendor"),
    # the time buckets a bucket rule reports (pypto_core.attribution)
    "data_loading_us": msg("Data loading time (µs)"),
    "data_loading_share": msg("Data loading share"),
    "memcpy_us": msg("Memory copy time (µs)"),
    "memcpy_share": msg("Memory copy share"),
    "sync_wait_us": msg("Sync wait time (µs)"),
    "sync_wait_share": msg("Sync wait share"),
}

# Keys built from data (slow_rank): "rank_3_computing_us", "communication_spread_vs_step" (and
# "communication_gap_vs_mean" in reports made before the spread was measured against the step).
_KINDS = RANK_TIME_KINDS
_RANK_TIME = re.compile(r"rank_(?P<rank>\d+)_(?P<kind>computing|communication|free)_us")
_KIND_GAP = re.compile(r"(?P<kind>computing|communication|free)_gap_vs_mean")
_KIND_SPREAD = re.compile(r"(?P<kind>computing|communication|free)_spread_vs_step")

# Evidence values that are engine text rather than data: translated when shown.
_TEXT_VALUES: dict[str, Message] = {
    **_KINDS,
    PROXY.template: PROXY,
}


def evidence_label(key: str, language: str = DEFAULT_LANGUAGE) -> str:
    """``flagged_time_us`` -> "Time of the flagged kernels (µs)" (or its translation); an unknown key:
    itself."""
    label = EVIDENCE_LABELS.get(key)
    if label is not None:
        return render(label, language)
    m = _RANK_TIME.fullmatch(key)
    if m:
        return render(msg("Rank {rank}: {kind} time (µs)", rank=m["rank"], kind=_KINDS[m["kind"]]), language)
    m = _KIND_GAP.fullmatch(key)
    if m:
        return render(msg("Spread of {kind} time above the mean", kind=_KINDS[m["kind"]]), language)
    m = _KIND_SPREAD.fullmatch(key)
    if m:
        return render(msg("Spread of {kind} time between the ranks over the step time",
                          kind=_KINDS[m["kind"]]), language)
    return key


def evidence_value(value: Any, language: str = DEFAULT_LANGUAGE) -> Any:
    """A value as shown: engine words (a rank's kind, what a proxy measures) translated; data as it is."""
    if isinstance(value, str) and value in _TEXT_VALUES:
        return render(_TEXT_VALUES[value], language)
    return value


def evidence_rows(evidence: dict[str, Any], language: str = DEFAULT_LANGUAGE) -> list[dict[str, Any]]:
    """``[{"key", "label", "value"}]`` in key order: what a page or a report prints for a finding's
    evidence."""
    return [{"key": k, "label": evidence_label(k, language), "value": evidence_value(v, language)}
            for k, v in sorted(evidence.items())]


_US_SUFFIXES = (" (µs)", "（µs）")
_US_KEY = re.compile(r"_us(_|$)")  # stall_us_total, flagged_time_us: a time in µs


def _is_time_key(key: str) -> bool:
    return bool(_US_KEY.search(key))


def _is_share_key(key: str) -> bool:
    """A fraction of a whole, shown as a percent: ``time_share``, ``share_of_step``."""
    return key.endswith("_share") or key.startswith("share_of_")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _evidence_text(key: str, value: Any) -> str:
    """A structured evidence value in words: ``{"d2d": 4096.9, "h2d": 2.8}`` under a key in µs reads
    "d2d 4.10 ms · h2d 2.8 µs"; ``{"aten::item": {"count": 4, "stall_us": 557.0}}`` reads
    "aten::item (4×, 557 µs)"; a list reads its items joined. Never a Python dict's repr."""
    def scalar(k: str, v: Any) -> str:
        if _is_number(v) and _is_time_key(k):
            return format_duration(v, "us")
        if _is_number(v) and _is_share_key(k) and 0 <= v <= 1:
            return f"{100 * v:.1f}%"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    def inner_item(k: str, x: Any) -> str:
        # a count reads "4×", a time its duration: words in no language, so no language is left out
        if k == "count" and _is_number(x):
            return f"{x}×"
        return scalar(k, x) if _is_time_key(k) else f"{k} {scalar(k, x)}"

    if isinstance(value, dict):
        parts = []
        for name, v in _most_time_first(value):
            if isinstance(v, dict):
                inner = ", ".join(inner_item(k, x) for k, x in v.items())
                parts.append(f"{name} ({inner})")
            else:
                parts.append(f"{name} {scalar(key, v)}")
        return " · ".join(parts)
    if isinstance(value, (list, tuple)):
        return ", ".join(_evidence_text(key, v) if isinstance(v, (dict, list, tuple)) else scalar(key, v)
                         for v in value)
    return scalar(key, value)


def _most_time_first(value: dict[str, Any]) -> list[tuple[str, Any]]:
    """A dict of named figures, the one with the most time first where each holds a time (sync calls by
    their stall, chain patterns by their time): PostgreSQL's jsonb keeps an object's keys in its own order
    (shortest first), not the engine's."""
    items = list(value.items())
    times = [next((float(x) for k, x in v.items() if _is_time_key(k) and _is_number(x)), None)
             if isinstance(v, dict) else None for _, v in items]
    known = [t for t in times if t is not None]
    if not items or len(known) < len(items):
        return items
    order = sorted(range(len(items)), key=lambda i: -known[i])
    return [items[i] for i in order]


def shown_evidence(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A finding's evidence rows (``evidence_rows``) as the pages and the Markdown/HTML reports print them: a
    time in µs (its key ends in ``_us`` or holds ``_us_``) as "92.1 ms", its label without the "(µs)" the
    engine's labels carry; a share (``_share``, ``share_of_``) as a percent; structured values in words
    (``_evidence_text``); other values as they are."""
    out = []
    for row in rows:
        key, value, label = str(row.get("key", "")), row.get("value"), str(row.get("label", ""))
        if _is_time_key(key) and (_is_number(value) or isinstance(value, dict)):
            for suffix in _US_SUFFIXES:
                label = label.removesuffix(suffix)
        share = _is_share_key(key) and _is_number(value)
        if (_is_time_key(key) and _is_number(value)) or share or isinstance(value, (dict, list, tuple)):
            row = {**row, "label": label, "value": _evidence_text(key, value)}
        out.append(row)
    return out


def shown_evidence_rows(evidence: dict[str, Any], language: str = DEFAULT_LANGUAGE) -> list[dict[str, Any]]:
    """A finding's evidence as the page and the reports print it: ``shown_evidence(evidence_rows(...))``."""
    return shown_evidence(evidence_rows(evidence, language))
