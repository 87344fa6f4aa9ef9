"""One tiny hostile archive per way an upload can attack the unpacker, built on the fly.

Shared by the engine test (tests/core/test_archive.py, with ``LIMITS``) and the web pipeline test (the
test worker runs with ``WORKER_ENV``, the same limits).
"""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_MEMBERS = 50
MAX_UNPACKED_BYTES = 40 * 1024**2  # above the 35 MB the Kineto .json.gz sample inflates to
MAX_RATIO = 200
LIMITS = {"max_members": MAX_MEMBERS, "max_unpacked_bytes": MAX_UNPACKED_BYTES, "max_ratio": MAX_RATIO}
WORKER_ENV = {
    "PYPTO_MAX_ARCHIVE_MEMBERS": str(MAX_MEMBERS),
    "PYPTO_MAX_UNPACKED_BYTES": str(MAX_UNPACKED_BYTES),
    "PYPTO_MAX_COMPRESSION_RATIO": str(MAX_RATIO),
}


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], Path]
    expect: tuple[str, ...]  # substrings of the refusal message: the member and the reason


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return path


def _info(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def traversal(d: Path) -> Path:
    p = d / "traversal.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("ok.csv", "a\n")
        zf.writestr("../../etc/evil.csv", "x\n")
    return p


def absolute(d: Path) -> Path:
    return _tar(d / "absolute.tar", [(_info("/tmp/pypto-evil.csv"), b"x\n")])


def symlink(d: Path) -> Path:
    return _tar(d / "symlink.tar.gz", [(_info("rank0/link", tarfile.SYMTYPE, "/etc/passwd"), None)], "w:gz")


def hardlink(d: Path) -> Path:
    return _tar(d / "hardlink.tar", [(_info("rank0/hard", tarfile.LNKTYPE, "/etc/passwd"), None)])


def device(d: Path) -> Path:
    dev = _info("rank0/sda", tarfile.CHRTYPE)
    dev.devmajor, dev.devminor = 8, 0
    return _tar(d / "device.tar", [(dev, None)])


def too_many(d: Path) -> Path:
    p = d / "many.zip"
    with zipfile.ZipFile(p, "w") as zf:
        for i in range(MAX_MEMBERS + 5):
            zf.writestr(f"f{i:03d}.csv", "a\n")
    return p


def too_large(d: Path) -> Path:
    # Incompressible bytes: the ratio stays ~1, so only the size limit can refuse it.
    p = d / "large.tar"
    blob = os.urandom(MAX_UNPACKED_BYTES + 1024)
    return _tar(p, [(_info("big.bin"), blob)])


def zip_bomb(d: Path) -> Path:
    p = d / "bomb.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("zeros.csv", b"\0" * (MAX_UNPACKED_BYTES - 1024))  # ~1000:1 under deflate
    return p


def corrupt(d: Path) -> Path:
    good = d / "good.zip"
    with zipfile.ZipFile(good, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("kernel_details.csv",
                    "Name,Duration(us)\n" + "".join(f"MatMulV2,{i * 7919 % 10007}\n" for i in range(5000)))
    data = bytearray(good.read_bytes())
    good.unlink()
    # Flip bytes inside the deflate stream, keep the central directory: the CRC or inflate fails.
    for i in range(100, 400):
        data[i] ^= 0x5A
    p = d / "corrupt.zip"
    p.write_bytes(bytes(data))
    return p


def truncated(d: Path) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = os.urandom(200_000)
        info = _info("kernel_details.csv")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    p = d / "truncated.tar.gz"
    p.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    return p


def file_then_folder(d: Path) -> Path:
    # "a" is a file, then "a/b" needs it to be a folder (was an internal error naming the worker's path).
    return _tar(d / "file_then_folder.tar", [(_info("a"), b"x\n"), (_info("a/b"), b"y\n")])


def long_name(d: Path) -> Path:
    p = d / "long_name.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("rank0/" + "n" * 300 + ".csv", "a\n")
    return p


def zip_named_json(d: Path) -> Path:
    # A zip bomb under a .json name: the reader unpacks it by its magic bytes, with the deployment's limits.
    p = d / "bomb_named.json"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("zeros.json", b" " * (MAX_UNPACKED_BYTES - 1024))
    return p


CASES: list[Case] = [
    Case("traversal", traversal, ("'../../etc/evil.csv'", "path traversal")),
    Case("absolute", absolute, ("'/tmp/pypto-evil.csv'", "absolute path")),
    Case("symlink", symlink, ("'rank0/link'", "symbolic link refused")),
    Case("hardlink", hardlink, ("'rank0/hard'", "hard link refused")),
    Case("device", device, ("'rank0/sda'", "special file")),
    Case("too_many", too_many, (f"'f{MAX_MEMBERS:03d}.csv'", "too many members")),
    Case("too_large", too_large, ("'big.bin'", "unpacked size exceeds")),
    Case("zip_bomb", zip_bomb, ("'zeros.csv'", "compression ratio above", "zip bomb")),
    Case("corrupt", corrupt, ("'kernel_details.csv'", "corrupt")),
    Case("truncated", truncated, ("'kernel_details.csv'", "corrupt or truncated")),
    Case("file_then_folder", file_then_folder, ("'a/b'", "a folder in its path is a file in the archive")),
    Case("long_name", long_name, ("'rank0/nnnn", "longer than 255 bytes")),
    Case("zip_named_json", zip_named_json, ("'zeros.json'", "compression ratio above")),
]
