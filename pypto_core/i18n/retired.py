"""Templates the engine no longer writes but that rows stored before still hold (a comparison's warnings, a
report's): listed here so that the catalog keeps their translations and those rows still read in every
language. Add a template here when a change retires it; never reuse one for a new meaning."""

from __future__ import annotations

from pypto_core.i18n.message import Message, msg

RETIRED: tuple[Message, ...] = (
    # compare, until op times were compared per profiler step where both runs have steps
    msg("no decode tokens found in one of the profiles: op times compare whole runs"),
    # dynamic_shape's title, until it stopped calling static kernels precompiled
    msg("No operator runs as a static (precompiled) kernel"),
    # host_bound_gaps' description, until it said which kernels already run from captured graphs
    msg("Between kernels the device sits idle while the host (Python, the framework, the launch path) "
        "prepares the next one.{decode}{outside} {advice}"),
    # slow_rank's title, until the spread was measured against the step time (as msprof-analyze's advisor)
    msg("Rank {rank} is the slow rank: {kind} time spread {pct:.0f}% above the mean"),
    # communication_not_overlapped's split of the collectives' time, until it said what Idle holds
    msg("of their {elapse_ms:.1f} ms, Transit is {transit_ms:.1f} ms, notify Wait {wait_ms:.1f} ms and Idle "
        "{idle_ms:.1f} ms (communication.json)"),
    # timeline lanes (index version 3), until a Kineto trace's collectives were named NCCL/RCCL
    msg("Communication (HCCL)"),
    msg("HCCL group {group}", group=""),
    # aicpu_operators' saving model, until its threshold and factor were named with their values
    msg("Each AI_CPU task over the duration threshold is assumed to run on the AI Core `aicore_speedup` "
        "times faster (configured, [INFERRED]): saving = time x (1 - 1/speedup)."),
)
