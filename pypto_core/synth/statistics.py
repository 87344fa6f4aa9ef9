"""Running aggregates for op_statistic and api_statistic (a few rows; kept in memory while kernels stream)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto_core.synth.schedule import Placed, StepColumns

if TYPE_CHECKING:
    from pypto_core.synth.table import KernelTable


@dataclass(slots=True)
class _Agg:
    count: int = 0
    total: float = 0.0
    sq: float = 0.0
    lo: float = float("inf")
    hi: float = 0.0

    def add(self, us: float) -> None:
        self.count += 1
        self.total += us
        self.sq += us * us
        self.lo = min(self.lo, us)
        self.hi = max(self.hi, us)

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    @property
    def variance(self) -> float:
        return max(0.0, self.sq / self.count - self.avg**2) if self.count else 0.0


def _r(x: float) -> str:
    return str(round(x, 3))


@dataclass
class Statistics:
    ops: dict[tuple[str, str], _Agg] = field(default_factory=dict)
    apis: dict[tuple[str, str], _Agg] = field(default_factory=dict)

    def add(self, p: Placed) -> None:
        k = p.kernel
        self.ops.setdefault((k.op_type, k.core), _Agg()).add(p.dur_ns / 1000)
        self.apis.setdefault(("acl", k.api), _Agg()).add(p.launch_dur_ns / 1000)
        self.apis.setdefault(("node", "launch"), _Agg()).add(p.launch_dur_ns / 2000)

    def add_columns(self, table: KernelTable, cols: StepColumns) -> None:
        """One step at once: group the step's kernels by key with numpy, then merge a few sums."""
        dur = cols.dur_ns / 1000
        launch = cols.launch_dur_ns / 1000
        _merge(self.ops, table.op_keys, dur)
        _merge(self.apis, [("acl", a) for a in table.api_names], launch)
        _merge(self.apis, [("node", "launch")] * table.n, launch / 2)

    def op_statistic_rows(self, device_id: str) -> list[list[str]]:
        """``Device_id,OP Type,Core Type,Count,Total Time(us),Min
        Time(us),Avg Time(us),Max Time(us),Ratio(%)``"""
        total = sum(a.total for a in self.ops.values()) or 1.0
        rows = sorted(self.ops.items(), key=lambda kv: -kv[1].total)
        return [[device_id, op, core, str(a.count), _r(a.total), _r(a.lo), _r(a.avg), _r(a.hi),
                 _r(a.total / total * 100)] for (op, core), a in rows]

    def api_statistic_rows(self) -> list[list[str]]:
        """``Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance`` (Device_id = host)."""
        rows = sorted(self.apis.items(), key=lambda kv: -kv[1].total)
        return [["host", level, name, _r(a.total), str(a.count), _r(a.avg), _r(a.lo), _r(a.hi),
                 _r(a.variance)]
                for (level, name), a in rows]


def _merge(aggs: dict[Any, _Agg], keys: list[Any], values: np.ndarray) -> None:
    index: dict[Any, int] = {}
    codes = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int64)
    m = len(index)
    count = np.bincount(codes, minlength=m)
    total = np.bincount(codes, weights=values, minlength=m)
    sq = np.bincount(codes, weights=values * values, minlength=m)
    lo = np.full(m, np.inf)
    hi = np.zeros(m)
    np.minimum.at(lo, codes, values)
    np.maximum.at(hi, codes, values)
    for key, i in index.items():
        a = aggs.setdefault(key, _Agg())
        a.count += int(count[i])
        a.total += float(total[i])
        a.sq += float(sq[i])
        a.lo = min(a.lo, float(lo[i]))
        a.hi = max(a.hi, float(hi[i]))


OP_STATISTIC_HEADER = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                       "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
API_STATISTIC_HEADER = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)",
                        "Max(us)", "Variance"]
