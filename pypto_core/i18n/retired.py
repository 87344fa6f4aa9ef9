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
    # timeline lanes (index version 3), until a Kineto trace's collectives were named NCCL/RCCL
    msg("Communication (HCCL)"),
    msg("HCCL group {group}", group=""),
)
