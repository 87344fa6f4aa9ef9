"""Simulated LLM-inference profiles in the real Ascend on-disk formats, each anti-pattern switchable.

``synthesize(out_dir, ...) -> Path`` writes one profile; ``synthesize_run`` also returns the ground truth
(``SynthRun.planted_cost_ns[rule]``); ``demo_pair(out_dir)`` writes the dashboard's before/after pair.
Layouts: torch_npu ``*_ascend_pt``, msprof ``PROF_*`` of CANN >= 8.0 and of CANN <= 7.0 (``msprof_legacy``);
``db=True`` adds the SQLite export (``profiler_db``), ``db="only"`` writes it alone.
Everything written is marked simulated (profiler_info / profiler_metadata / device_0/info.json.0 / the dbs'
META_DATA).
"""

from pypto_core.synth.model import FIXES, MODELS, RULES, SKUS, RunConfig
from pypto_core.synth.rows import VARIANTS
from pypto_core.synth.run import LAYOUTS, SynthRun, demo_pair, rule_costs_us, synthesize, synthesize_run

__all__ = ["FIXES", "LAYOUTS", "MODELS", "RULES", "SKUS", "VARIANTS", "RunConfig", "SynthRun", "demo_pair",
           "rule_costs_us", "synthesize", "synthesize_run"]
