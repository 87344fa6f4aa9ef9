"""Fuzzing the wrappers an upload can come in (issue 17): archives, gzip headers and SQLite schemas.

Whatever hypothesis builds, reading it either works or raises ``InputError`` (a named reason, short, without
the folder it was unpacked in), and nothing runs past its limits: bytes written under the destination, rows
per table, files only inside the destination, no link created. Examples are few and small so that the run
stays quick on a busy machine.
"""

from __future__ import annotations

import gzip
import io
import os
import sqlite3
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pypto_core.archive import safe_extract
from pypto_core.errors import InputError
from pypto_core.formats import write_profiles
from pypto_core.limits import Limits, current_limits, use_limits
from pypto_core.profile import TABLE_NAMES, Profile

MAX_MEMBERS = 12
MAX_BYTES = 256 * 1024
MAX_ROWS = 500
FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture
def small_limits():  # type: ignore[no-untyped-def]
    before = current_limits()
    use_limits(Limits(max_members=MAX_MEMBERS, max_unpacked_bytes=MAX_BYTES, max_ratio=50,
                      max_table_rows=MAX_ROWS))
    yield
    use_limits(before)


def _fresh(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / f"{name}-{os.urandom(4).hex()}"
    folder.mkdir()
    return folder


def _written(root: Path) -> tuple[int, list[Path]]:
    total, links = 0, []
    for p in root.rglob("*"):
        if p.is_symlink():
            links.append(p)
        elif p.is_file():
            total += p.stat().st_size
    return total, links


def _check_refusal(exc: InputError, *hidden: Path) -> None:
    text = str(exc)
    assert len(text) < 4000, text[:300]
    for folder in hidden:
        assert f"{folder}/" not in exc.reason, text


# ------------------------------------------------------------------------------------------------ archives

_SEGMENT = st.one_of(
    st.sampled_from(["a", "b", "..", ".", "", "rank0", "x" * 300, "a\\b", "C:", "trace.json"]),
    st.text(min_size=1, max_size=12))
_NAME = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)
_DATA = st.one_of(st.binary(max_size=2048), st.integers(0, 300_000).map(lambda n: b" " * n))
_MEMBER = st.tuples(_NAME, _DATA, st.sampled_from(["file", "dir", "symlink", "hardlink", "fifo"]))


def _build(kind: str, members: list[tuple[str, bytes, str]], path: Path) -> Path:
    if kind == "zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data, what in members:
                info = zipfile.ZipInfo(name + ("/" if what == "dir" else ""))
                mode = {"symlink": 0o120777, "fifo": 0o010644}.get(what, 0o100644)
                info.external_attr = mode << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, b"" if what == "dir" else data)
        return path
    with tarfile.open(path, "w:gz" if kind == "tar.gz" else "w") as tf:
        for name, data, what in members:
            info = tarfile.TarInfo(name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                         "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[what]
            info.linkname = "/etc/passwd" if what in ("symlink", "hardlink") else ""
            payload = data if what == "file" else b""
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload) if payload else None)
    return path


@FUZZ
@given(kind=st.sampled_from(["zip", "tar", "tar.gz"]), members=st.lists(_MEMBER, max_size=14),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
       suffix=st.sampled_from([".zip", ".tar", ".json", ".csv", ".db"]))
def test_archives_never_run_past_their_limits(tmp_path, small_limits, kind, members, flips, suffix) -> None:
    work = _fresh(tmp_path, "a")
    archive = _build(kind, members, work / f"upload{suffix}")
    if flips:  # a corrupt copy: bytes changed anywhere
        data = bytearray(archive.read_bytes())
        for at, xor in flips:
            data[at % len(data)] ^= xor
        archive.write_bytes(bytes(data))
    dest = work / "out" / "inner"
    try:
        files = safe_extract(archive, dest)
        assert len(files) <= MAX_MEMBERS
    except InputError as exc:
        _check_refusal(exc, dest)
    total, links = _written(work / "out")
    assert total <= MAX_BYTES + 1024 * 1024  # at most one copy block past the limit before the refusal
    assert links == []
    beside = sorted(p.name for p in work.iterdir())  # nothing written next to the destination
    assert beside == sorted(["out", archive.name]) or beside == [archive.name]


# ------------------------------------------------------------------------------------------------- gzip

def _gzip_with_header(payload: bytes, flags: int, extra: bytes, name: bytes, comment: bytes, size: int | None,
                      method: int) -> bytes:
    head = struct.pack("<BBBBIBB", 0x1F, 0x8B, method, flags & 0x1E, 0, 0, 255)
    if flags & 4:
        head += struct.pack("<H", len(extra)) + extra
    if flags & 8:
        head += name.replace(b"\0", b"") + b"\0"
    if flags & 16:
        head += comment.replace(b"\0", b"") + b"\0"
    body = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = body.compress(payload) + body.flush()
    trailer = struct.pack("<II", zlib.crc32(payload), (len(payload) if size is None else size) & 0xFFFFFFFF)
    return head + deflated + trailer


_PAYLOAD = st.one_of(
    st.integers(0, 3_000_000).map(lambda n: b"[" + b" " * n + b"]"),
    st.integers(0, 2000).map(lambda n: b'{"traceEvents": [' + b",".join(
        b'{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": %d, "dur": 1, "cat": "cpu_op"}' % i
        for i in range(n)) + b"]}"),
    st.binary(max_size=512),
)


@FUZZ
@given(payload=_PAYLOAD, flags=st.integers(0, 31), extra=st.binary(max_size=64), name=st.binary(max_size=64),
       comment=st.binary(max_size=64), size=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
       method=st.sampled_from([8, 8, 8, 0, 9]), cut=st.one_of(st.none(), st.integers(1, 4096)),
       twice=st.booleans())
def test_gzip_headers_never_run_past_their_limits(tmp_path, small_limits, payload, flags, extra, name,
                                                  comment, size, method, cut, twice) -> None:
    work = _fresh(tmp_path, "g")
    data = _gzip_with_header(payload, flags, extra, name, comment, size, method)
    if twice:  # concatenated members
        data += gzip.compress(payload[: len(payload) // 2])
    if cut is not None:
        data = data[: max(1, len(data) - cut)]
    trace = work / "trace.json.gz"
    trace.write_bytes(data)
    out = work / "out"
    try:
        saved = write_profiles(trace, out)
    except InputError as exc:
        _check_refusal(exc, out)
        assert not any(out.iterdir())
        return
    for folder, _meta in saved.ranks:
        profile = Profile.load(out / folder)
        assert all(profile.table(t).num_rows <= MAX_ROWS for t in TABLE_NAMES)


# ------------------------------------------------------------------------------------------------ SQLite

_READER_TABLES = ["TASK", "COMPUTE_TASK_INFO", "STRING_IDS", "PYTORCH_API", "CANN_API", "COMMUNICATION_OP",
                  "TASK_PMU_INFO", "META_DATA", "STEP_TIME", "CONNECTION_IDS", "ENUM_API_TYPE"]
_COLUMNS = ["startNs", "endNs", "globalTaskId", "name", "opType", "taskType", "connectionId", "streamId",
            "taskId", "deviceId", "id", "value", "apiName", "type", "globalTid", "opName", "sequenceNumber"]


@st.composite
def _schema(draw):  # type: ignore[no-untyped-def]
    statements = []
    for table in draw(st.lists(st.sampled_from(_READER_TABLES), unique=True, min_size=1, max_size=7)):
        cols = draw(st.lists(st.sampled_from(_COLUMNS), unique=True, min_size=1, max_size=8))
        how = draw(st.sampled_from(["table", "table", "view", "recursive_view"]))
        if how == "table":
            rows = draw(st.integers(0, 40))
            statements.append(f"create table {table} ({', '.join(cols)})")
            values = draw(st.lists(st.one_of(st.integers(-5, 10**12), st.text(max_size=8), st.none()),
                                   min_size=len(cols), max_size=len(cols)))
            statements.extend([(f"insert into {table} values ({', '.join('?' * len(cols))})", values)] * rows)
        elif how == "view":
            statements.append(f"create view {table} as select " + ", ".join(f"1 as {c}" for c in cols))
        else:
            statements.append(
                f"create view {table} as with recursive r(n) as (select 1 union all select n + 1 from r "
                f"where n < 5000000) select " + ", ".join(f"n as {c}" for c in cols) + " from r")
    if draw(st.booleans()):
        statements.append("create table T2 (x); create trigger tr after insert on T2 begin select 1; end")
    return statements


@FUZZ
@given(statements=_schema(), name=st.sampled_from(["ascend_pytorch_profiler_0.db", "msprof_0.db"]))
def test_sqlite_schemas_never_run_past_their_limits(tmp_path, small_limits, statements, name) -> None:
    work = _fresh(tmp_path, "s")
    db = work / name
    conn = sqlite3.connect(db)
    for statement in statements:
        if isinstance(statement, tuple):
            conn.execute(*statement)
        else:
            conn.executescript(statement)
    conn.commit()
    conn.close()
    out = work / "out"
    try:
        saved = write_profiles(db, out)
    except InputError as exc:
        _check_refusal(exc, out)
        return
    for folder, _meta in saved.ranks:
        profile = Profile.load(out / folder)
        # views are never read: every row comes from a stored table, at most 40 of them each
        assert all(profile.table(t).num_rows <= 40 * 7 for t in TABLE_NAMES)
