"""``torch_npu.npu`` of the CPU stand-in: the device "exists" (it is the CPU); AOE switches are recorded."""

from __future__ import annotations

aoe_dump_paths: list[str] = []


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def set_aoe(dump_path: str) -> None:
    aoe_dump_paths.append(str(dump_path))
