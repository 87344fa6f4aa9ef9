"""What a remedy generator is given: one finding, the profile it came from, and the user's model file if
any."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pypto_core.profile import ProfileMeta
from pypto_core.rules.finding import Finding


@dataclass(frozen=True)
class FlaggedOp:
    """One group of operators a finding points at (one op type, input shapes, dtypes and formats), as the
    rules put it in ``Finding.details["ops"]`` (pypto_core.rules._flagged_ops)."""

    name: str  # the kernel name with the most time ("" when the profile names none)
    op_type: str
    input_shapes: tuple[tuple[int, ...], ...] = ()
    count: int = 0
    names: tuple[str, ...] = ()  # every kernel name of the group, most time first
    input_dtypes: tuple[str, ...] = ()
    input_formats: tuple[str, ...] = ()
    total_us: float = 0.0
    # names unflagged kernels carry too (tuning by them touches other shapes)
    shared_names: tuple[str, ...] = ()
    output_shapes: tuple[tuple[int, ...], ...] = ()
    output_dtypes: tuple[str, ...] = ()
    output_formats: tuple[str, ...] = ()

    @property
    def exclusive_names(self) -> tuple[str, ...]:
        """The names only the flagged kernels carry: what AOE can be given without touching other shapes."""
        return tuple(n for n in self.names if n not in self.shared_names)

    def shapes_text(self) -> str:
        """``[16, 4096] x [4096, 11008]``; empty when the profile recorded no shapes."""
        return " x ".join(str(list(s)) for s in self.input_shapes)


@dataclass(frozen=True)
class RemedyContext:
    finding: Finding
    profile_meta: dict[str, Any] = field(default_factory=dict)
    model_source: str | None = None  # the user's model file (optional upload), for diffs
    model_filename: str | None = None

    @property
    def rule(self) -> str:
        return self.finding.rule

    def flagged_ops(self) -> list[FlaggedOp]:
        """Ops from ``details["ops"]``; when the rule gave none, ``Finding.ops`` entries as op types."""
        ops: list[FlaggedOp] = []
        for raw in self.finding.details.get("ops") or []:
            if not isinstance(raw, dict):
                continue
            names = tuple(str(n) for n in raw.get("names") or [] if n)
            name = str(raw.get("name") or (names[0] if names else ""))
            op_type = str(raw.get("op_type") or raw.get("type") or "")
            if not (name or op_type):
                continue
            ops.append(FlaggedOp(name=name, op_type=op_type, input_shapes=_shapes(raw.get("input_shapes")),
                                 count=_int(raw.get("count")), names=names or ((name,) if name else ()),
                                 input_dtypes=_texts(raw.get("input_dtypes")),
                                 input_formats=_texts(raw.get("input_formats")),
                                 total_us=_float(raw.get("total_us")),
                                 shared_names=_texts(raw.get("shared_names")),
                                 output_shapes=_shapes(raw.get("output_shapes")),
                                 output_dtypes=_texts(raw.get("output_dtypes")),
                                 output_formats=_texts(raw.get("output_formats"))))
        if not ops:
            ops = [FlaggedOp(name="", op_type=str(o)) for o in self.finding.ops if str(o)]
        return ops


def profile_meta_dict(profile_meta: Any) -> dict[str, Any]:
    """Accept a ``ProfileMeta``, a dict (e.g. a report's ``profile`` block) or None."""
    if profile_meta is None:
        return {}
    if isinstance(profile_meta, ProfileMeta):
        return profile_meta.to_dict()  # its warnings may be messages
    if dataclasses.is_dataclass(profile_meta) and not isinstance(profile_meta, type):
        return dataclasses.asdict(profile_meta)
    if isinstance(profile_meta, dict):
        return dict(profile_meta)
    raise TypeError(f"profile_meta must be a ProfileMeta or a dict, not {type(profile_meta).__name__}")


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


def _shapes(value: Any) -> tuple[tuple[int, ...], ...]:
    """Keep only well-formed shapes (lists of non-negative ints); anything else from a profile is dropped."""
    shapes = []
    for shape in value or []:
        if isinstance(shape, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                    for d in shape):
            shapes.append(tuple(shape))
        else:
            shapes.append(())
    return tuple(shapes)
