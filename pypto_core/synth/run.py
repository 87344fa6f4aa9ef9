"""Drives one simulated run: builds each step's kernels, places them in time, streams them to a writer, and
accounts for what each planted anti-pattern costs.

A rule's cost is ``time(step with the rule planted) - time(step with the rule fixed)``, every other rule as
configured, from the nominal (jitter-free) kernels. Kernels of different rules never share a segment, so the
costs add up: all-planted minus all-fixed equals the sum of the four (up to the ~1% jitter).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pypto_core.synth.kernels import StepBuilder, nominal_step_us
from pypto_core.synth.model import RULES, RunConfig, resolve_model, resolve_sku
from pypto_core.synth.profiler_db import ProfilerDbWriter, write_analysis_db
from pypto_core.synth.rows import VARIANTS
from pypto_core.synth.schedule import Scheduler
from pypto_core.synth.table import DecodePlan, KernelTable
from pypto_core.synth.writers_ascend_pt import AscendPtWriter
from pypto_core.synth.writers_msprof import MsprofWriter
from pypto_core.synth.writers_msprof_legacy import MsprofLegacyWriter

LAYOUTS = ("ascend_pt", "msprof", "msprof_legacy")  # msprof_legacy: CANN <= 7.0 device_N/summary|timeline
LEGACY_VARIANT = "cann70"  # what a msprof_legacy run records as its variant (its columns are of that era)
DB_MODES = (False, True, "only")  # no db; db beside the text export; db export only
BASE_EPOCH_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z: a fixed start keeps runs byte-identical
DEMO_TOKENS = 2
DEMO_PROMPT = 512


@dataclass
class SynthRun:
    """What a simulated run wrote, and the ground truth a diagnosis can be checked against."""

    path: Path
    config: RunConfig
    layout: str
    variant: str
    decode_tokens: int
    kernel_count: int
    kernels_per_step: list[int]
    step_ids: list[int]
    decode_step_ns: list[int]  # device time of each decode step (kernels + idle gaps), as written
    rule_cost_per_token_ns: dict[str, int]  # mean decode-step cost of planting each rule (all four rules)
    planted_cost_ns: dict[str, int]  # whole-run cost of each planted rule (prefill + decode)
    planted_cost_per_token_ns: dict[str, int]  # mean per decode step, planted rules only
    bytes_written: int = 0
    export_type: list[str] = field(default_factory=lambda: ["text"])  # torch_npu's _export_type: text / db
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def per_token_ms(self) -> float:
        return sum(self.decode_step_ns) / len(self.decode_step_ns) / 1e6 if self.decode_step_ns else 0.0

    def summary(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "simulated": True,
            "generator": "pypto synth",
            "model": cfg.model.name, "sku": cfg.sku.name, "batch": cfg.batch, "dtype": cfg.dtype,
            "prompt_tokens": cfg.prompt_tokens, "decode_tokens": self.decode_tokens, "seed": cfg.seed,
            "layout": self.layout, "variant": self.variant, "export_type": self.export_type,
            "planted": list(cfg.planted_rules), "fixed": sorted(cfg.fixed),
            "kernel_count": self.kernel_count,
            "per_token_ms": round(self.per_token_ms, 4),
            "rule_cost_per_token_us": {r: round(v / 1000, 3) for r, v in self.rule_cost_per_token_ns.items()},
            "planted_cost_us": {r: round(v / 1000, 3) for r, v in self.planted_cost_ns.items()},
            "planted_cost_per_token_us": {r: round(v / 1000, 3)
                                          for r, v in self.planted_cost_per_token_ns.items()},
        }


def rule_costs_us(cfg: RunConfig, s: int, cache_len: int) -> dict[str, float]:
    """Cost of each rule in one step: planted minus fixed, the other rules as ``cfg`` has them."""
    out: dict[str, float] = {}
    for rule in RULES:
        planted = dataclasses.replace(cfg, fixed=cfg.fixed - {rule})
        fixed = dataclasses.replace(cfg, fixed=cfg.fixed | {rule})
        out[rule] = (nominal_step_us(StepBuilder(planted).step(s, cache_len))
                     - nominal_step_us(StepBuilder(fixed).step(s, cache_len)))
    return out


def synthesize_run(out_dir: str | Path, *, model: str = "llama2-7b", sku: str = "910B3", tokens: int = 8,
                   prompt_tokens: int = 512, batch: int = 1, dtype: str = "fp16", layout: str = "ascend_pt",
                   variant: str = "cann83", fixed: frozenset[str] | set[str] | tuple[str, ...] = frozenset(),
                   size_mb: float | None = None, seed: int = 0, db: bool | str = False) -> SynthRun:
    """Write one simulated profile under ``out_dir`` and return what was written. With ``size_mb`` the run
    keeps adding decode steps until the kernel table and timeline reach that many MB (``tokens`` is then a
    minimum), written as a stream. ``db=True`` also writes the SQLite export of the same run (ascend_pt:
    ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db + analysis.db; msprof: PROF_*/msprof_{ts}.db),
    ``db="only"`` the SQLite export alone (as ``export_type=db`` / ``msprof --type=db`` do).
    ``layout="msprof_legacy"`` writes the CANN <= 7.0 layout and columns (``variant`` is then ignored)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    if db not in DB_MODES:
        raise ValueError(f"db must be one of {DB_MODES}, not {db!r}")
    if db and layout == "msprof_legacy":
        raise ValueError("the CANN <= 7.0 layout has no db export here (msprof_*.db came with CANN 8.0)")
    cfg = RunConfig(resolve_model(model), resolve_sku(sku), tokens=tokens, prompt_tokens=prompt_tokens,
                    batch=batch, dtype=dtype, fixed=frozenset(fixed), seed=seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base_ns = BASE_EPOCH_NS + seed * 1_000_000_000
    meta: dict[str, Any] = {}
    writer: AscendPtWriter | MsprofWriter
    dbw: ProfilerDbWriter | None = None
    if layout == "ascend_pt":
        writer = AscendPtWriter(out, cfg, variant=variant, base_ns=base_ns, synth_meta=meta)
        if db:
            dbw = ProfilerDbWriter(writer.out / "ascend_pytorch_profiler_0.db", cfg, variant=variant,
                                   base_ns=base_ns, pytorch=True, synth_meta=meta)
    elif layout == "msprof":
        writer = MsprofWriter(out, cfg, variant=variant, base_ns=base_ns, synth_meta=meta, seed=seed)
        if db:
            dbw = ProfilerDbWriter(writer.root / f"msprof_{writer.ts14}.db", cfg, variant=variant,
                                   base_ns=base_ns, pytorch=False, synth_meta=meta)
    else:
        variant = LEGACY_VARIANT
        writer = MsprofLegacyWriter(out, cfg, variant="cann83", base_ns=base_ns, synth_meta=meta, seed=seed)
    scheduler = Scheduler(seed=seed, base_ns=base_ns)
    builder = StepBuilder(cfg)
    target_bytes = int(size_mb * 1e6) if size_mb else 0

    # Prefill (step 0), then one step per decode token.
    prefill_costs = rule_costs_us(cfg, prompt_tokens, prompt_tokens)
    prefill = KernelTable.from_kernels(builder.step(prompt_tokens, prompt_tokens), prompt_tokens)
    cols, rec = scheduler.place(0, prefill, prompt_tokens)
    writer.write_step(prefill, cols, rec, prompt_tokens)
    if dbw:
        dbw.write_step(prefill, cols, rec, prompt_tokens)
    kernels_per_step = [prefill.n]
    decode_step_ns: list[int] = []
    # Decode costs are affine in the context length (every decode duration is affine in bytes): two samples.
    c0 = rule_costs_us(cfg, 1, prompt_tokens + 1)
    c1 = rule_costs_us(cfg, 1, prompt_tokens + 2)
    decode_cost_us = {r: 0.0 for r in RULES}
    step = 0
    plan = DecodePlan(builder)
    while step < tokens or (target_bytes and writer.bytes_written < target_bytes):
        step += 1
        cache_len = prompt_tokens + step
        table = plan.table(cache_len)
        start_ns = scheduler.device_end_ns
        cols, rec = scheduler.place(step, table, cache_len)
        writer.write_step(table, cols, rec, cache_len)
        if dbw:
            dbw.write_step(table, cols, rec, cache_len)
        kernels_per_step.append(table.n)
        decode_step_ns.append(rec.last_kernel_end_ns - start_ns)
        for r in RULES:
            decode_cost_us[r] += c0[r] + (c1[r] - c0[r]) * (step - 1)
    decode_tokens = step
    per_token = {r: int(round(decode_cost_us[r] / max(1, decode_tokens) * 1000)) for r in RULES}
    planted = cfg.planted_rules
    run = SynthRun(
        path=writer.root, config=cfg, layout=layout, variant=variant, decode_tokens=decode_tokens,
        kernel_count=writer.kernel_count, kernels_per_step=kernels_per_step, step_ids=list(range(step + 1)),
        decode_step_ns=decode_step_ns, rule_cost_per_token_ns=per_token,
        planted_cost_ns={r: int(round((prefill_costs[r] + decode_cost_us[r]) * 1000)) for r in planted},
        planted_cost_per_token_ns={r: per_token[r] for r in planted},
        export_type={False: ["text"], True: ["text", "db"], "only": ["db"]}[db],
    )
    meta.update(run.summary())
    root = writer.close(rec.end_ns)
    if dbw:
        dbw.close(rec.end_ns)
        _finish_db(writer, layout, db)
    run.bytes_written = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return run


def synthesize(out_dir: str | Path, *, model: str = "llama2-7b", sku: str = "910B3", tokens: int = 8,
               prompt_tokens: int = 512, batch: int = 1, dtype: str = "fp16", layout: str = "ascend_pt",
               variant: str = "cann83", fixed: frozenset[str] | set[str] | tuple[str, ...] = frozenset(),
               size_mb: float | None = None, seed: int = 0, db: bool | str = False) -> Path:
    """Write one simulated profile under ``out_dir``; return the ``*_ascend_pt`` or ``PROF_*`` folder."""
    return synthesize_run(out_dir, model=model, sku=sku, tokens=tokens, prompt_tokens=prompt_tokens,
                          batch=batch, dtype=dtype, layout=layout, variant=variant, fixed=fixed,
                          size_mb=size_mb, seed=seed, db=db).path


def _finish_db(writer: AscendPtWriter | MsprofWriter, layout: str, db: bool | str) -> None:
    """After the db export: torch_npu's analysis.db and ``_export_type``; for ``db="only"`` remove the text
    export (a db-only torch_npu folder holds profiler_info, profiler_metadata and the two dbs; a db-only
    msprof folder the msprof_*.db beside device_0/info.json.0)."""
    if layout == "ascend_pt":
        write_analysis_db(writer.out / "analysis.db", writer.steps)
        info_path = writer.root / "profiler_info_0.json"
        info = json.loads(info_path.read_text(encoding="utf-8"))
        info["config"]["experimental_config"]["_export_type"] = ["db"] if db == "only" else ["text", "db"]
        info_path.write_text(json.dumps(info, indent=4), encoding="utf-8")
        if db == "only":
            for p in writer.out.iterdir():
                if p.suffix in (".csv", ".json"):
                    p.unlink()
    elif db == "only":
        shutil.rmtree(writer.out)


def demo_pair(out_dir: str | Path, *, layout: str = "ascend_pt", seed: int = 0) -> tuple[Path, Path]:
    """The dashboard demo: llama2-7b on 910B3 with all four anti-patterns planted (before) and all fixed
    (after), a few MB each. Returns (before, after)."""
    root = Path(out_dir)
    before = synthesize(root / "before", tokens=DEMO_TOKENS, prompt_tokens=DEMO_PROMPT, layout=layout,
                        seed=seed)
    after = synthesize(root / "after", tokens=DEMO_TOKENS, prompt_tokens=DEMO_PROMPT, layout=layout,
                       fixed=frozenset(RULES), seed=seed)
    return before, after
