"""communication.json (torch_npu ASCEND_PROFILER_OUTPUT, msprof analyze/) → ``communication`` rows.

Layout (docs/formats.md §2.6): ``{"step13": {"p2p"|"collective": {"hcom_op@group": INFO, "Total Op Info":
...}}}``;
start timestamps in epoch µs, durations in ms, sizes in MB (MiB, as msprof-analyze computes them) and
bandwidth in GB/s (= MB/ms). The timestamp is read from its decimal text, never through a float.
"""

from __future__ import annotations

import os
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyarrow as pa

from pypto_core.errors import InputError
from pypto_core.formats.csvtable import to_ns
from pypto_core.formats.jsonfile import load_json
from pypto_core.i18n import Text, msg
from pypto_core.profile import conform

# SDMA aggregates the on-node links (HCCS, PCIE, SIO) in msprof-analyze's output; RDMA is the network.
_ON_NODE = ("HCCS", "PCIE", "SIO")
_MIB = 1024 * 1024


def _num(value: Any) -> Decimal | None:
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    try:
        d = Decimal(str(value))
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


def _ms_to_ns(value: Any) -> int | None:
    d = _num(value)
    return None if d is None else int((d * 1_000_000).to_integral_value())


def _step_id(key: str) -> int | None:
    digits = key[4:] if key.lower().startswith("step") else key
    return int(digits) if digits.isdigit() else None


def read_communication(path: str | os.PathLike[str], warnings: list[Text]) -> pa.Table:
    """Every op of every step (the per-step ``Total Op Info`` aggregates are left out)."""
    doc = load_json(path, exact=True)
    name = Path(path).name
    if not isinstance(doc, dict):
        raise InputError(str(path), msg("not a communication.json document (expected an object keyed by "
                                        "step)"))
    rows: dict[str, list[Any]] = {k: [] for k in (
        "name", "group", "step_id", "start_text", "elapse_ns", "transit_ns", "wait_ns", "synchronization_ns",
        "idle_ns", "size_bytes", "bandwidth_gbps", "kind", "transport",
    )}
    odd = 0
    for step_key, step in doc.items():
        if not isinstance(step, dict):
            odd += 1
            continue
        for kind in ("p2p", "collective"):
            ops = step.get(kind) or {}
            if not isinstance(ops, dict):
                odd += 1
                continue
            for op_key, info in ops.items():
                if op_key == "Total Op Info":
                    continue
                if not isinstance(info, dict):
                    odd += 1
                    continue
                op_name, _, group = op_key.partition("@")
                t = info.get("Communication Time Info") or {}
                bw = info.get("Communication Bandwidth Info") or {}
                size_mb, time_ms, transport = _transfer(bw)
                rows["name"].append(op_name)
                rows["group"].append(group or None)
                rows["step_id"].append(_step_id(step_key))
                start = t.get("Start Timestamp(us)") if isinstance(t, dict) else None
                rows["start_text"].append(str(start) if start is not None else None)
                for col, field in (("elapse_ns", "Elapse Time(ms)"), ("transit_ns", "Transit Time(ms)"),
                                   ("wait_ns", "Wait Time(ms)"),
                                   ("synchronization_ns", "Synchronization Time(ms)"),
                                   ("idle_ns", "Idle Time(ms)")):
                    rows[col].append(_ms_to_ns(t.get(field)) if isinstance(t, dict) else None)
                rows["size_bytes"].append(int((size_mb * _MIB).to_integral_value()) if size_mb is not None
                                          else None)
                rows["bandwidth_gbps"].append(float(size_mb / time_ms) if size_mb is not None and time_ms
                                              else None)
                rows["kind"].append(kind)
                rows["transport"].append(transport)
    if odd:
        warnings.append(msg("{file}: {n} entr(y/ies) not in the expected layout were skipped",
                            file=name, n=odd))
    start_ns = to_ns(pa.array(rows.pop("start_text"), pa.string()))
    table = pa.table({**rows, "start_ns": start_ns})
    return conform("communication", table)


def _transfer(bw: Any) -> tuple[Decimal | None, Decimal | None, str | None]:
    """Total transit size (MB) and time (ms) over the links, and the link that carried the most."""
    if not isinstance(bw, dict) or not bw:
        return None, None, None
    sizes: dict[str, tuple[Decimal, Decimal]] = {}
    for link, info in bw.items():
        if isinstance(info, dict):
            s = _num(info.get("Transit Size(MB)")) or Decimal(0)
            t = _num(info.get("Transit Time(ms)")) or Decimal(0)
            sizes[link] = (s, t)
    if not sizes:
        return None, None, None
    links = [k for k in sizes if k not in _ON_NODE] if "SDMA" in sizes else list(sizes)
    size = sum((sizes[k][0] for k in links), Decimal(0))
    time = sum((sizes[k][1] for k in links), Decimal(0))
    busiest = max(links, key=lambda k: sizes[k][0]) if size > 0 else None
    return size, time, busiest
