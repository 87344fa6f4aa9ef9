"""Running aggregates for op_statistic and api_statistic (a few rows; kept in memory while kernels stream)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pypto_core.synth.schedule import Placed


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

    def op_statistic_rows(self, device_id: str) -> list[list[str]]:
        """``Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)``"""
        total = sum(a.total for a in self.ops.values()) or 1.0
        rows = sorted(self.ops.items(), key=lambda kv: -kv[1].total)
        return [[device_id, op, core, str(a.count), _r(a.total), _r(a.lo), _r(a.avg), _r(a.hi),
                 _r(a.total / total * 100)] for (op, core), a in rows]

    def api_statistic_rows(self) -> list[list[str]]:
        """``Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance`` (Device_id = host)."""
        rows = sorted(self.apis.items(), key=lambda kv: -kv[1].total)
        return [["host", level, name, _r(a.total), str(a.count), _r(a.avg), _r(a.lo), _r(a.hi), _r(a.variance)]
                for (level, name), a in rows]


OP_STATISTIC_HEADER = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                       "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
API_STATISTIC_HEADER = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)",
                        "Variance"]
