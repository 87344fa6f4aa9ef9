"""Print what was read from a profile (format, ranks, kernel count, time span, op types, warnings) as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import pyarrow.compute as pc

from pypto_core.profile import Profile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path",
                        help="profile folder, archive (.zip/.tar/.tar.gz/.tgz) or file "
                             "(.json/.json.gz/.csv/.db)")
    parser.add_argument("--top", type=int, default=20,
                        help="how many op types to list (by total device time)")


def profile_info(profile: Profile, top: int = 20) -> dict[str, Any]:
    """The summary of one rank, with the op types that took the most device time."""
    out = profile.summary()
    meta = profile.meta
    out.update({
        "device_id": meta.device_id, "cann_version": meta.cann_version,
        "torch_npu_version": meta.torch_npu_version, "profiler_level": meta.profiler_level,
        "aic_metrics": meta.aic_metrics, "api_call_count": profile.api_calls.num_rows,
        "flow_count": profile.flows.num_rows, "counter_samples": profile.counters.num_rows,
        "memory_samples": profile.memory.num_rows, "communication_ops": profile.communication.num_rows,
        "source_files": len(meta.source_files),
    })
    k = profile.kernels
    if k.num_rows:
        key = pc.coalesce(k["op_type"], k["name"])
        agg = (k.select(["dur_ns"]).append_column("op", key)
               .group_by("op", use_threads=False).aggregate([("dur_ns", "sum"), ("dur_ns", "count")])
               .sort_by([("dur_ns_sum", "descending")]))
        out["op_types"] = [
            {"op_type": r["op"], "count": r["dur_ns_count"], "total_us": (r["dur_ns_sum"] or 0) / 1000}
            for r in agg.slice(0, top).to_pylist()
        ]
        out["op_type_count"] = agg.num_rows
        core = k["core_type"].value_counts().to_pylist()
        out["core_types"] = {str(c["values"]): c["counts"] for c in core}
    return out


def run(args: argparse.Namespace) -> int:
    from pypto_core.formats import open_profiles
    from pypto_core.i18n import render

    group = open_profiles(args.path)
    doc = {
        "source": group.source,
        "ranks": group.ranks,
        "profiles": [profile_info(p, args.top)
                     for p in sorted(group.profiles, key=lambda p: (p.meta.rank is None, p.meta.rank or 0))],
        "warnings": [render(w) for w in group.warnings],
    }
    json.dump(doc, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0
