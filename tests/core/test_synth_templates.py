"""pypto_core.synth's fast path: whole-step templates and decode tables write what the per-row reference
writes.

The reference (``rows.kernel_cells`` + csv, ``trace_events.kernel_events`` + json) formats one placed kernel
at a time; the step templates format a whole step from columns. For the same placed numbers both must give
the same bytes, and a decode table moved to context L must hold the kernels ``StepBuilder`` builds at L.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from pypto_core.synth.kernels import StepBuilder
from pypto_core.synth.model import RunConfig, resolve_model, resolve_sku
from pypto_core.synth.rows import kernel_cells
from pypto_core.synth.schedule import Scheduler
from pypto_core.synth.table import DecodePlan, KernelTable, decode_table
from pypto_core.synth.templates import STEP_CELL, StepText, round3
from pypto_core.synth.trace_events import kernel_events

PROMPT = 160
CASES = [("910B3", "fp16", frozenset()),
         ("310P3", "bf16", frozenset({"kv_cache_layout", "attention_memory_bound"})),
         ("910B4", "fp16", frozenset({"matmul_tiling", "norm_launch_overhead"}))]


def reference(placed, prev_end: int, *, python: bool, dtype: str, freq: int,
              coupled: bool) -> tuple[str, str]:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n" if python else "\n")
    events = []
    for p in placed:
        w.writerow(([str(p.step)] if python else []) + ["0"]
                   + kernel_cells(p, device_id=0, freq_mhz=freq, coupled=coupled))
        events += [", " + json.dumps(e) for e in kernel_events(p, prev_end, python=python, dtype=dtype)]
        prev_end = p.start_ns + p.dur_ns
    return buf.getvalue(), "".join(events)


@pytest.mark.parametrize("sku,dtype,fixed", CASES)
def test_step_templates_write_the_reference_bytes(sku, dtype, fixed) -> None:
    cfg = RunConfig(resolve_model("llama3-8b"), resolve_sku(sku), prompt_tokens=PROMPT, dtype=dtype,
                    fixed=fixed)
    builder = StepBuilder(cfg)
    decode = decode_table(builder, PROMPT + 1, PROMPT + 9)
    assert decode is not None and decode.moving, "decode steps move with the context"
    sched = Scheduler(seed=3, base_ns=1_767_225_600_000_000_000)
    prefill = KernelTable.from_kernels(builder.step(PROMPT, PROMPT), PROMPT)
    for length, table in ((PROMPT, prefill), (PROMPT + 1, decode), (PROMPT + 9, decode)):
        cols, _ = sched.place(length - PROMPT, table, length)
        kernels = table.kernels if table is prefill else builder.step(1, length)
        placed = cols.placed(kernels)
        ins, outs, dims = table.shape_cells(length)
        for python, prefix in ((True, [STEP_CELL, "0"]), (False, ["0"])):
            text = StepText(table, prefix=prefix, lineterminator="\r\n" if python else "\n", python=python,
                            dtype=dtype, coupled=cfg.sku.coupled, freq_mhz=cfg.sku.freq_mhz)
            rows, events = reference(placed, cols.prev_end_ns, python=python, dtype=dtype,
                                     freq=cfg.sku.freq_mhz, coupled=cfg.sku.coupled)
            assert text.rows(table, cols, ins, outs) == rows
            assert text.events(cols, dims) == events


def test_decode_plan_tracks_block_dim_thresholds() -> None:
    """Short contexts cross a vector Block Dim threshold every few tokens; the plan's tables still give
    exactly the built kernels' Block Dims, shapes and durations."""
    cfg = RunConfig(resolve_model("llama2-7b"), resolve_sku("910B3"), prompt_tokens=16)
    builder = StepBuilder(cfg)
    plan = DecodePlan(builder)
    for length in range(17, 60):
        table = plan.table(length)
        built = builder.step(1, length)
        assert table.block_dims(length).tolist() == [k.block_dim for k in built]
        np.testing.assert_allclose(table.durations_us(length), [k.dur_us for k in built], rtol=1e-9)
        ins, _, _ = table.shape_cells(length)
        assert ins == [('"""' + ";".join(",".join(map(str, t.shape)) for t in k.inputs) + '"""')
                       for k in built]


def test_round3_rounds_like_python() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.random(20000) * 200, np.arange(0, 20, 0.0005) * 0.95, [7.6095, 0.0005, 2.5e-4]])
    assert round3(x).tolist() == [round(v, 3) for v in x.tolist()]
