"""``torch_npu.npu`` part of the CPU test double (see the package docstring): runtime switches only."""

from __future__ import annotations

aoe_dump_paths: list[str] = []


def set_aoe(dump_path: str) -> None:
    """Real API enables AOE graph dumping to dump_path; the double records the call."""
    aoe_dump_paths.append(str(dump_path))
