"""``ProfileComparer``: the before/after proof of a fix (CONTRACT.md ``compare --format json``).

Three views of the same two profiles:

* metrics: the seed's table (``graph.METRICS``: per-token latency, tokens/s, attention HBM time share, ...),
  with units, delta, whether the change is better, and whether it is outside the noise;
* ops: device time aligned by op type, by model block (so a kernel renamed by a fix, e.g. BatchMatMul +
  SoftmaxV2 -> IncreFlashAttention, is matched through the attention block it serves), and by shape;
* findings: each baseline finding marked fixed, persisting or new, its estimated saving set against the
  measured one.

Profiles of different lengths are compared per decode token where they have tokens (a rerun that decodes
more tokens is not "slower"), else over the whole run. Works across formats and devices: GPU/CPU Kineto
kernels get the same roles and blocks as Ascend ones (``op_roles``), as msprof-analyze's compare maps them.
"""

from __future__ import annotations

import csv
import io
from concurrent.futures import ThreadPoolExecutor
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pypto_core.graph import METRICS, OperatorCallGraph
from pypto_core.profile import Profile
from pypto_core.rules.finding import Report

COMPARE_SCHEMA_VERSION = 1
# The tables a comparison reads (through OperatorCallGraph): a saved profile can be loaded with only these
# (``Profile.load(path, tables=COMPARE_TABLES)``); api_calls, the largest of the rest, is never read.
COMPARE_TABLES: tuple[str, ...] = ("kernels", "steps", "host_ops", "flows")

# A single-valued metric (no per-step samples) changes "significantly" only beyond this relative tolerance:
# shares computed from the same kernels move by far less than 1% between two reads of one run [INFERRED].
SINGLE_VALUE_REL_TOLERANCE = 0.01
# With per-step samples: a delta is significant when it exceeds this many standard errors of the medians.
NOISE_Z = 3.0

# Which model block each rule's measured saving comes from (the blocks the rule's ops serve).
RULE_BLOCKS: dict[str, tuple[str, ...]] = {
    "matmul_tiling": ("matmul",),
    "attention_memory_bound": ("attention",),
    "kv_cache_layout": ("kv_layout", "kv_update"),
    "norm_launch_overhead": ("norm",),
    "unfused_rope": ("rope",),
    "unfused_swiglu": ("ffn_activation",),
}


@dataclass
class _Side:
    """What the comparison needs from one profile, computed once."""

    profile: Profile
    graph: OperatorCallGraph
    metrics: dict[str, float | None]
    tokens: int  # decode steps used for per-token normalisation (0: whole-run comparison)
    token_latency_ms: np.ndarray  # per decode step, for the noise test
    block: np.ndarray  # block name per kernel (object array of a few distinct strings)
    gap_ns: np.ndarray
    cache: dict[str, Any] = field(default_factory=dict)  # encodings computed once per side

    @classmethod
    def of(cls, profile: Profile, sku: str | None) -> "_Side":
        graph = OperatorCallGraph(profile, sku)
        t = graph.tokens
        return cls(profile=profile, graph=graph, metrics=graph.metrics(), tokens=int(len(t.latency_ns)),
                   token_latency_ms=t.latency_ns.astype(np.float64) / 1e6, block=kernel_blocks(graph),
                   gap_ns=graph.gap_before_ns)

    def scope_mask(self, per_token: bool) -> np.ndarray:
        g = self.graph
        return g.decode_kernel_mask if per_token else np.ones(g.n, bool)


def kernel_blocks(graph: OperatorCallGraph) -> np.ndarray:
    """The model block each kernel serves: attention, kv_layout, kv_update, norm, rope, matmul,
    ffn_activation, lm_head, communication, other."""
    out = np.full(graph.n, "other", dtype=object)
    if graph.n == 0:
        return out
    # later assignments win: specific chains and masks override the plain role
    out[graph.is_role("matmul")] = "matmul"
    out[graph.is_role("activation", "activation_piece") | graph.chain_mask("swiglu")] = "ffn_activation"
    out[graph.is_role("rope") | graph.chain_mask("rope")] = "rope"
    out[graph.is_role("norm") | graph.chain_mask("rms_norm")] = "norm"
    out[graph.is_role("kv_update")] = "kv_update"
    out[graph.kv_layout_mask] = "kv_layout"
    out[graph.attention_mask] = "attention"
    out[graph.lm_head_mask] = "lm_head"
    out[graph.is_role("communication")] = "communication"
    return out


_Codes = tuple[np.ndarray, list[str]]  # an integer code per kernel, and the text of each code


def _encode(values: np.ndarray | pa.Array | pa.ChunkedArray) -> _Codes:
    """Dictionary-encode a text column (Arrow's hash table in C++, not np.unique over Python strings)."""
    arr = pa.array(values, type=pa.string()) if isinstance(values, np.ndarray) else values
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.string())
    enc = arr.dictionary_encode()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def shapes_text(shapes: pa.Array | pa.ChunkedArray) -> pa.Array:
    """list<list<int64>> shapes as the profilers write them: dims joined by ',', inputs by ';'."""
    arr = shapes.combine_chunks() if isinstance(shapes, pa.ChunkedArray) else shapes
    s = arr.cast(pa.list_(pa.list_(pa.string())))
    inner = pc.binary_join(s.flatten(), ",")
    outer = pa.ListArray.from_arrays(s.offsets, inner, mask=s.is_null())
    return pc.binary_join(outer, ";")


def _median_se(samples: np.ndarray) -> tuple[float, float]:
    """Median and its standard error (1.253·σ/√n, σ from the MAD so one outlier step does not dominate)."""
    med = float(np.median(samples))
    sigma = 1.4826 * float(np.median(np.abs(samples - med)))
    return med, 1.253 * sigma / math.sqrt(len(samples))


@dataclass
class ComparisonResult:
    metrics: list[dict[str, Any]]
    ops: list[dict[str, Any]]
    blocks: list[dict[str, Any]]
    shapes: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    base: dict[str, Any]
    new: dict[str, Any]
    normalisation: str  # per_token | whole_run
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": COMPARE_SCHEMA_VERSION, "normalisation": self.normalisation,
                "base": self.base, "new": self.new, "metrics": self.metrics, "ops": self.ops,
                "blocks": self.blocks, "shapes": self.shapes, "findings": self.findings,
                "warnings": self.warnings}

    def metric(self, name: str) -> dict[str, Any]:
        for row in self.metrics:
            if row["name"] == name:
                return row
        raise KeyError(name)


class ProfileComparer:
    """Compare a baseline and a candidate profile; optionally with their diagnosis reports."""

    def __init__(self, base: Profile, candidate: Profile, *, sku: str | None = None,
                 base_report: Report | dict[str, Any] | None = None,
                 candidate_report: Report | dict[str, Any] | None = None) -> None:
        # numpy and Arrow release the GIL in the heavy parts: the two call graphs build side by side
        with ThreadPoolExecutor(max_workers=2) as pool:
            base_side, new_side = pool.submit(_Side.of, base, sku), pool.submit(_Side.of, candidate, sku)
            self.base, self.new = base_side.result(), new_side.result()
        self.base_report = _report_dict(base_report)
        self.new_report = _report_dict(candidate_report)

    @property
    def per_token(self) -> bool:
        return self.base.tokens > 0 and self.new.tokens > 0

    def compare(self, *, top_shapes: int = 30) -> ComparisonResult:
        warnings: list[str] = []
        b, n = self.base, self.new
        if b.graph.sku.name != n.graph.sku.name:
            warnings.append(f"different devices: {b.graph.sku.name} vs {n.graph.sku.name}; shares and "
                            "utilisations are each relative to their own device's peaks")
        if not self.per_token:
            warnings.append("no decode tokens found in one of the profiles: op times compare whole runs")
        return ComparisonResult(
            metrics=self._metrics(), ops=self._ops(), blocks=self._blocks(), shapes=self._shapes(top_shapes),
            findings=self._findings(), base=_side_summary(b), new=_side_summary(n),
            normalisation="per_token" if self.per_token else "whole_run", warnings=warnings)

    # -- metrics ------------------------------------------------------------------------------------
    def _metrics(self) -> list[dict[str, Any]]:
        rows = []
        for name, (unit, higher_better) in METRICS.items():
            bv, nv = self.base.metrics.get(name), self.new.metrics.get(name)
            row: dict[str, Any] = {"name": name, "unit": unit, "base": bv, "new": nv, "delta": None,
                                   "delta_pct": None, "better": None, "significant": None}
            if bv is not None and nv is not None:
                delta = nv - bv
                row["delta"] = delta
                row["delta_pct"] = (delta / bv * 100.0) if bv else (0.0 if delta == 0 else None)
                row["significant"], row["spread"] = self._significance(name, bv, nv)
                row["better"] = (delta > 0) == higher_better if delta != 0 and row["significant"] else None
                if delta != 0 and not row["significant"]:
                    row["better"] = None  # inside the noise: neither better nor worse
            rows.append(row)
        return rows

    def _significance(self, name: str, bv: float, nv: float) -> tuple[bool, dict[str, float] | None]:
        if name in ("per_token_latency_ms", "tokens_per_s", "critical_path_ms") and self.per_token \
                and len(self.base.token_latency_ms) >= 3 and len(self.new.token_latency_ms) >= 3:
            bm, bse = _median_se(self.base.token_latency_ms)
            nm, nse = _median_se(self.new.token_latency_ms)
            noise = NOISE_Z * math.hypot(bse, nse)
            spread = {"base_median_ms": bm, "new_median_ms": nm, "noise_ms": noise,
                      "base_steps": len(self.base.token_latency_ms), "new_steps": len(self.new.token_latency_ms)}
            return abs(nm - bm) > noise, spread
        scale = max(abs(bv), abs(nv))
        return (abs(nv - bv) > SINGLE_VALUE_REL_TOLERANCE * scale) if scale else False, None

    # -- op-level diff ------------------------------------------------------------------------------
    def _per_unit(self, side: _Side) -> float:
        """Divide a side's times by this to compare like with like: its decode tokens, or 1."""
        return float(side.tokens) if self.per_token else 1.0

    def _grouped(self, side: _Side, keys: np.ndarray | _Codes) -> dict[Any, tuple[float, int]]:
        mask = side.scope_mask(self.per_token)
        if not mask.any():
            return {}
        codes, labels = keys if isinstance(keys, tuple) else _encode(keys)
        k = codes[mask]
        dur = side.graph.dur[mask].astype(np.float64)
        total = np.bincount(k, weights=dur, minlength=len(labels))
        count = np.bincount(k, minlength=len(labels))
        unit = self._per_unit(side)
        return {labels[i]: (float(total[i]) / unit / 1000.0, int(count[i])) for i in np.flatnonzero(count)}

    def _diff_rows(self, key_name: str, base: dict[Any, tuple[float, int]],
                   new: dict[Any, tuple[float, int]]) -> list[dict[str, Any]]:
        rows = []
        for key in set(base) | set(new):
            bu, bc = base.get(key, (0.0, 0))
            nu, nc = new.get(key, (0.0, 0))
            rows.append({key_name: key, "base_us": bu, "new_us": nu, "delta_us": nu - bu,
                         "base_count": bc, "new_count": nc,
                         "status": "removed" if nc == 0 else "added" if bc == 0 else "changed"})
        rows.sort(key=lambda r: -abs(r["delta_us"]))
        return rows

    def _op_types(self, side: _Side) -> _Codes:
        """Op type (else kernel name) per kernel, dictionary-encoded once per side: codes and labels."""
        cached = side.cache.get("op_types")
        if cached is None:
            k = side.profile.kernels
            cached = _encode(pc.coalesce(k["op_type"], k["name"], pa.scalar("?")))
            side.cache["op_types"] = cached
        return cached

    def _ops(self) -> list[dict[str, Any]]:
        return self._diff_rows("op_type", self._grouped(self.base, self._op_types(self.base)),
                               self._grouped(self.new, self._op_types(self.new)))

    def _blocks(self) -> list[dict[str, Any]]:
        rows = self._diff_rows("block", self._grouped(self.base, self.base.block),
                               self._grouped(self.new, self.new.block))
        for row in rows:  # which op types served the block on each side: how a renamed kernel is matched
            row["base_op_types"] = self._block_ops(self.base, row["block"])
            row["new_op_types"] = self._block_ops(self.new, row["block"])
        return rows

    def _block_ops(self, side: _Side, block: str) -> list[str]:
        block_codes, block_labels = side.cache.get("blocks") or side.cache.setdefault("blocks", _encode(side.block))
        if block not in block_labels:
            return []
        mask = side.scope_mask(self.per_token) & (block_codes == block_labels.index(block))
        if not mask.any():
            return []
        codes, labels = self._op_types(side)
        counts = np.bincount(codes[mask], minlength=len(labels))
        present = sorted(np.flatnonzero(counts).tolist(), key=lambda i: labels[i])
        order = np.argsort(-counts[present], kind="stable")
        return [labels[present[i]] for i in order[:8]]

    def _shape_keys(self, side: _Side) -> _Codes:
        """"op shape" per kernel as codes: op codes and shape-text codes paired as integers, and text built
        only for the distinct pairs (not one Python string per kernel)."""
        ops, op_labels = self._op_types(side)
        k = side.profile.kernels
        if not k.num_rows:
            return ops, op_labels
        shapes, shape_labels = _encode(pc.fill_null(shapes_text(k["input_shapes"]), ""))
        pair = ops.astype(np.int64) * max(1, len(shape_labels)) + shapes
        uniq, codes = np.unique(pair, return_inverse=True)
        width = max(1, len(shape_labels))
        labels = [op_labels[int(u) // width] + " " + shape_labels[int(u) % width] for u in uniq]
        return codes.reshape(-1), labels

    def _shapes(self, top: int) -> list[dict[str, Any]]:
        rows = self._diff_rows("op_shape", self._grouped(self.base, self._shape_keys(self.base)),
                               self._grouped(self.new, self._shape_keys(self.new)))
        return rows[:top]

    # -- findings -----------------------------------------------------------------------------------
    def _block_time_ns(self, side: _Side, blocks: tuple[str, ...], scope: np.ndarray) -> float:
        """Kernel time of ``blocks`` within ``scope``, plus the device idle gap each launch left before it
        (a removed kernel also removes that gap)."""
        mask = scope & np.isin(side.block, blocks)
        return float(side.graph.dur[mask].sum() + side.gap_ns[mask].sum())

    def _measured_saving_us(self, blocks: tuple[str, ...]) -> float:
        """What the fix saved, on the baseline's scale (the same scope as the rules' estimates: the whole run).

        Decode time is compared per token and scaled by the baseline's token count, so a rerun that decoded a
        different number of tokens is still compared fairly; the rest of the run (prefill) is compared as is.
        """
        b, n = self.base, self.new
        if not self.per_token:
            every_b, every_n = np.ones(b.graph.n, bool), np.ones(n.graph.n, bool)
            return (self._block_time_ns(b, blocks, every_b) - self._block_time_ns(n, blocks, every_n)) / 1000.0
        b_dec, n_dec = b.graph.decode_kernel_mask, n.graph.decode_kernel_mask
        decode = (self._block_time_ns(b, blocks, b_dec) / b.tokens
                  - self._block_time_ns(n, blocks, n_dec) / n.tokens) * b.tokens
        rest = self._block_time_ns(b, blocks, ~b_dec) - self._block_time_ns(n, blocks, ~n_dec)
        return (decode + rest) / 1000.0

    def _findings(self) -> list[dict[str, Any]]:
        if self.base_report is None:
            return []
        base = {f["rule"]: f for f in self.base_report.get("findings", [])}
        new = {f["rule"]: f for f in (self.new_report or {}).get("findings", [])}
        rows = []
        for rule, f in base.items():
            status = "persisting" if rule in new else "fixed"
            row: dict[str, Any] = {"rule": rule, "status": status, "title": f.get("title", ""),
                                   **_title_message(f), "estimated_saving_us": f.get("estimated_saving_us"),
                                   "measured_saving_us": None}
            blocks = RULE_BLOCKS.get(rule)
            if blocks:
                measured = self._measured_saving_us(blocks)
                row["measured_saving_us"] = measured
                est = f.get("estimated_saving_us")
                if est and measured:
                    row["estimate_error_pct"] = (est - measured) / abs(measured) * 100.0
            rows.append(row)
        for rule, f in new.items():
            if rule not in base:
                rows.append({"rule": rule, "status": "new", "title": f.get("title", ""), **_title_message(f),
                             "estimated_saving_us": f.get("estimated_saving_us"), "measured_saving_us": None})
        return rows


def _title_message(finding: dict[str, Any]) -> dict[str, Any]:
    """The title's template and parameters, for a page or report in any language (pypto_core.i18n)."""
    title = (finding.get("messages") or {}).get("title")
    return {"messages": {"title": title}} if title else {}


def _report_dict(report: Report | dict[str, Any] | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return report.to_dict() if isinstance(report, Report) else report


def _side_summary(side: _Side) -> dict[str, Any]:
    meta = side.profile.meta
    return {"format": meta.format, "source": meta.source, "device": side.graph.sku.name,
            "cann_version": meta.cann_version, "simulated": meta.simulated,
            "kernel_count": side.graph.n, "decode_steps": side.tokens}


def compare_profiles(base: Profile, candidate: Profile, *, sku: str | None = None,
                     with_findings: bool = True) -> ComparisonResult:
    """Diagnose both profiles (for the findings' status) and compare them."""
    base_report = candidate_report = None
    if with_findings:
        from pypto_core.rules import diagnose

        base_report, candidate_report = diagnose(base, sku=sku), diagnose(candidate, sku=sku)
    return ProfileComparer(base, candidate, sku=sku, base_report=base_report,
                           candidate_report=candidate_report).compare()


# -- exports ----------------------------------------------------------------------------------------
def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if unit == "share":
            return f"{value * 100:.1f}%"
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


def _md_cell(text: Any) -> str:
    """Op names are untrusted: keep them from breaking the table or injecting markup."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def to_markdown(result: ComparisonResult | dict[str, Any]) -> str:
    """The seed's table, ready for a pull request."""
    data = result.to_dict() if isinstance(result, ComparisonResult) else result
    lines = ["| Metric | Unit | Before | After | Δ | Better |", "|---|---|---:|---:|---:|:---:|"]
    for m in data["metrics"]:
        if m["base"] is None and m["new"] is None:
            continue
        delta = "n/a" if m["delta_pct"] is None else f"{m['delta_pct']:+.1f}%"
        if m.get("significant") is False and m["delta"]:
            delta += " (noise)"
        better = {True: "✅", False: "❌", None: "—"}[m["better"]]
        lines.append(f"| {m['name']} | {m['unit']} | {_fmt(m['base'], m['unit'])} | {_fmt(m['new'], m['unit'])} "
                     f"| {delta} | {better} |")
    unit = "µs per token" if data["normalisation"] == "per_token" else "µs"
    lines += ["", f"**Model blocks** ({unit})", "", "| Block | Before | After | Δ | Before ops | After ops |",
              "|---|---:|---:|---:|---|---|"]
    for b in data["blocks"]:
        lines.append(f"| {b['block']} | {b['base_us']:,.1f} | {b['new_us']:,.1f} | {b['delta_us']:+,.1f} "
                     f"| {_md_cell(', '.join(b['base_op_types']))} | {_md_cell(', '.join(b['new_op_types']))} |")
    lines += ["", f"**Op types** ({unit}, largest changes)", "",
              "| Op type | Before | After | Δ | Count before | Count after |", "|---|---:|---:|---:|---:|---:|"]
    for o in data["ops"][:20]:
        lines.append(f"| {_md_cell(o['op_type'])} | {o['base_us']:,.1f} | {o['new_us']:,.1f} | {o['delta_us']:+,.1f} "
                     f"| {o['base_count']} | {o['new_count']} |")
    if data["findings"]:
        lines += ["", "**Findings**", "", "| Rule | Status | Estimated saving (µs) | Measured saving (µs) |",
                  "|---|---|---:|---:|"]
        for f in data["findings"]:
            lines.append(f"| {f['rule']} | {f['status']} | {_fmt(f.get('estimated_saving_us'))} "
                         f"| {_fmt(f.get('measured_saving_us'))} |")
    for w in data.get("warnings", []):
        lines.append(f"\n> {_md_cell(w)}")
    return "\n".join(lines) + "\n"


def to_csv(result: ComparisonResult | dict[str, Any]) -> str:
    """One table: metric rows then op-type rows, with a `section` column."""
    data = result.to_dict() if isinstance(result, ComparisonResult) else result
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "name", "unit", "base", "new", "delta", "delta_pct", "better", "significant",
                "base_count", "new_count"])
    for m in data["metrics"]:
        w.writerow(["metric", m["name"], m["unit"], m["base"], m["new"], m["delta"], m["delta_pct"], m["better"],
                    m.get("significant"), "", ""])
    for section, key in (("block", "block"), ("op_type", "op_type")):
        for o in data["blocks" if section == "block" else "ops"]:
            w.writerow([section, _csv_safe(o[key]), "us", o["base_us"], o["new_us"], o["delta_us"], "", "", "",
                        o["base_count"], o["new_count"]])
    for f in data["findings"]:
        w.writerow(["finding", f["rule"], "us", f.get("estimated_saving_us"), f.get("measured_saving_us"), "",
                    "", "", "", f["status"], ""])
    return buf.getvalue()


def _csv_safe(text: Any) -> str:
    """Spreadsheet formula injection: a cell starting with = + - @ is data, not a formula."""
    s = str(text)
    return "'" + s if s[:1] in ("=", "+", "-", "@") else s


def regression(result: ComparisonResult | dict[str, Any], max_regression_pct: float) -> list[str]:
    """The headline metrics that got worse by more than ``max_regression_pct`` and outside the noise."""
    data = result.to_dict() if isinstance(result, ComparisonResult) else result
    worse = []
    for m in data["metrics"]:
        if m["name"] not in ("per_token_latency_ms", "tokens_per_s", "prefill_ms"):
            continue
        if m["better"] is False and m["delta_pct"] is not None and abs(m["delta_pct"]) > max_regression_pct:
            worse.append(f"{m['name']}: {_fmt(m['base'])} -> {_fmt(m['new'])} {m['unit']} "
                         f"({m['delta_pct']:+.1f}%, limit {max_regression_pct:g}%)")
    return worse
