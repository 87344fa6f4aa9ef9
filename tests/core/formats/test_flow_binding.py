"""Flow binding out of core (``flow_binding``): bucket by bucket, what one in-memory pass gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pypto_core.formats import flow_binding
from pypto_core.formats.chrome_trace import read_trace_view, write_trace_view
from pypto_core.formats.flow_binding import (
    NO_START,
    NO_TS,
    SPAN,
    BucketedSpans,
    RowOrder,
    SpillDir,
    TimeSample,
    bind_on_lanes,
    first_rows,
    hash_part,
)
from tests.paths import SAMPLES

TRACE_VIEWS = sorted(SAMPLES.glob("ascend_pt/**/trace_view.json"))
KINETO = sorted(SAMPLES.glob("kineto/**/*.json*"))


def _bucketed(tmp_path: Path, lane, start, dur, end_lane, end_ts, bounds, at=None) -> np.ndarray:
    """bind_on_lanes run bucket by bucket over spilled spans (the spill path, on disk)."""
    spills = SpillDir(tmp_path)
    spans = spills.spill(SPAN)
    rec = np.empty(len(lane), SPAN)
    rec["lane"], rec["start"], rec["dur"] = lane, start, dur
    spans.add(rec)
    n_late = 0 if at is None else len(at)
    rows = RowOrder(len(lane) - n_late, np.asarray([] if at is None else at, np.int64))
    bounds = np.asarray(bounds, np.int64)
    on = BucketedSpans(spans, rows, bounds, spills)
    out = np.full(len(end_lane), -1, np.int64)
    bucket = np.searchsorted(bounds, end_ts, side="right")
    for k in range(len(bounds) + 1):
        sel = np.flatnonzero(bucket == k)
        out[sel] = on.bind(k, end_lane[sel], end_ts[sel])
    on.remove()
    spills.remove()
    assert not spills.path.exists()
    return out


def test_bucket_boundaries_keep_the_innermost_rule(tmp_path: Path) -> None:
    # lane 0: a long parent crossing every boundary, two children starting together (the shorter wins),
    # an end exactly at a slice start; lane 1: the same times, other rows
    lane = np.array([0, 0, 0, 0, 1, 1], np.int32)
    start = np.array([0, 100, 100, 250, 100, NO_START], np.int64)
    dur = np.array([1000, 50, 20, 10, 500, 0], np.int64)
    end_lane = np.array([0, 0, 0, 0, 0, 1, 1, -1, 0, 2], np.int32)
    end_ts = np.array([100, 110, 140, 250, 999, 100, 50, 100, NO_TS, 100], np.int64)
    want = bind_on_lanes(end_lane, end_ts, lane, start, dur)
    assert want.tolist() == [2, 2, 1, 3, 0, 4, -1, -1, -1, -1]
    for bounds in ([], [100], [101, 120], [50, 100, 110, 130, 250, 251, 600], list(range(10, 1000, 7))):
        got = _bucketed(tmp_path, lane, start, dur, end_lane, end_ts, bounds)
        assert got.tolist() == want.tolist(), bounds


def test_walk_back_limit_is_the_same_in_buckets(tmp_path: Path) -> None:
    # a parent, then more ended siblings than the walk back steps over: over the whole lane the end after
    # them is not bound (the limit), and a bucket boundary must not make it bound
    n = flow_binding._WALK_BACK + 4
    lane = np.zeros(n + 1, np.int32)
    start = np.array([0] + [10 + 10 * i for i in range(n)], np.int64)
    dur = np.array([10_000] + [5] * n, np.int64)
    end_ts = np.array([10 * n + 9, 10 * n + 3, 12], np.int64)
    end_lane = np.zeros(3, np.int32)
    want = bind_on_lanes(end_lane, end_ts, lane, start, dur)
    assert want.tolist() == [-1, n, 1]
    for bounds in ([10 * n], [10 * n + 5], [100, 10 * n], [10 * (n - 3)]):
        got = _bucketed(tmp_path, lane, start, dur, end_lane, end_ts, bounds)
        assert got.tolist() == want.tolist(), bounds


@pytest.mark.parametrize("seed", range(20))
def test_random_slices_bind_alike_in_any_buckets(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    lane = rng.integers(0, 3, n).astype(np.int32)
    start = rng.integers(0, 300, n).astype(np.int64)  # many equal starts, and equal slices
    dur = rng.integers(0, 60, n).astype(np.int64) * rng.integers(0, 2, n)
    start[rng.random(n) < 0.02] = NO_START
    late = int(rng.integers(0, 5))  # the last rows came late: their final rows are before streamed ones
    at = np.sort(rng.integers(0, n - late + 1, late)) if late < n else None
    m = 300
    end_lane = rng.integers(-1, 4, m).astype(np.int32)
    end_ts = rng.integers(-5, 380, m).astype(np.int64)
    # the in-memory truth: the spans in their final row order
    rows = RowOrder(n - (len(at) if at is not None else 0), at if at is not None else np.empty(0, np.int64))
    final = rows.final(np.arange(n))
    inv = np.argsort(final)
    got_rows = bind_on_lanes(end_lane, end_ts, lane[inv], start[inv], dur[inv])
    want = np.where(got_rows >= 0, final[inv][np.maximum(got_rows, 0)], -1)
    bounds = np.unique(rng.integers(0, 380, int(rng.integers(0, 12))))
    assert _bucketed(tmp_path, lane, start, dur, end_lane, end_ts, bounds, at).tolist() == want.tolist()


def test_time_sample_bounds_split_evenly() -> None:
    sample = TimeSample(cap=64)
    for i in range(100):
        sample.add(np.arange(i * 1000, (i + 1) * 1000, dtype=np.int64))
    b = sample.bounds(4)
    assert len(b) == 3 and np.all(np.abs(b - np.array([25_000, 50_000, 75_000])) < 3_000), b
    assert len(TimeSample().bounds(4)) == 0


def test_first_rows_and_hash_parts() -> None:
    assert first_rows(np.array([3, 1, 9]), np.array([1, 3, 3, 1])).tolist() == [1, 0, -1]
    keys = np.arange(1000, dtype=np.int64)
    part = hash_part(7, keys, keys * 3)
    assert part.min() == 0 and part.max() == 6
    assert (hash_part(7, keys, keys * 3) == part).all()


# ---------------------------------------------------------------------------------------------- readers


@pytest.fixture
def tiny_buckets(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Buckets of a few hundred rows, so that the samples take the spill path; records the bucket counts."""
    counts: list[int] = []
    real = SpillDir.buckets

    def buckets(self: SpillDir, rows: int) -> int:
        counts.append(real(self, rows))
        return counts[-1]

    monkeypatch.setattr(flow_binding, "BUCKET_ROWS", 300)
    monkeypatch.setattr(flow_binding, "CHUNK_ROWS", 1000)
    monkeypatch.setattr(SpillDir, "buckets", buckets)
    return counts


@pytest.mark.parametrize("path", TRACE_VIEWS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_trace_view_out_of_core_equals_in_memory(path: Path, tmp_path: Path, tiny_buckets: list[int]) -> None:
    from tests.core.formats.test_chrome_trace import _same_tables

    whole = read_trace_view(path)
    meta = write_trace_view(path, tmp_path / "p")
    assert meta.extra["unbound_flows"] == whole.hints["unbound_flows"]
    if whole.flows.num_rows:
        assert max(tiny_buckets) > 1  # the spill path ran
    _same_tables(path, tmp_path / "p", whole)
    assert not list((tmp_path / "p").glob(".spill-*"))  # spills removed


def test_text_and_long_ids_pair_out_of_core(tmp_path: Path, tiny_buckets: list[int],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from pypto_core.profile import Profile

    monkeypatch.setattr(flow_binding, "BUCKET_ROWS", 4)
    ev = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "CANN"}},
    ]
    for i in range(40):  # ids: 20 digits, text, "007"-like, and integers; some API ts do not match
        t = 1000 * i
        fid = [f"4000688286911063{i:04d}", f"x{i}", f"00{i}", i][i % 4]
        cat = "HostToDevice" if i % 2 else "async_npu"
        src = (3, 3) if i % 2 else (1, 1)
        ev += [
            {"ph": "X", "name": f"op{i}", "pid": 1, "tid": 1, "ts": f"{t}.000", "dur": 500},
            {"ph": "X", "name": f"inner{i}", "pid": 1, "tid": 1, "ts": f"{t}.000", "dur": 5},
            {"ph": "X", "name": f"api{i}", "pid": 3, "tid": 3, "ts": f"{t}.000", "dur": 5,
             "args": {"connection_id": fid}},
            {"ph": "X", "name": f"k{i}", "pid": 2, "tid": 7 + i % 3, "ts": f"{t + 300}.000", "dur": 1},
            {"ph": "s", "cat": cat, "id": fid, "pid": src[0], "tid": src[1],
             "ts": f"{t + (7 if i % 5 == 1 else 0)}.000"},  # some off the API's start: bound by connection_id
            {"ph": "f", "cat": cat, "id": fid, "pid": 2, "tid": 7 + i % 3, "ts": f"{t + 300}.000", "bp": "e"},
        ]
    src_path = tmp_path / "trace_view.json"
    src_path.write_text(json.dumps(ev))
    whole = read_trace_view(src_path)
    assert whole.flows.num_rows == 40
    meta = write_trace_view(src_path, tmp_path / "p")
    assert meta.extra["unbound_flows"] == whole.hints["unbound_flows"]
    assert max(tiny_buckets) > 4
    loaded = Profile.load(tmp_path / "p")
    assert loaded.flows.equals(whole.flows)
    assert whole.flows.num_rows == 40


@pytest.mark.parametrize("path", KINETO, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_kineto_out_of_core_equals_in_memory(path: Path, tmp_path: Path, tiny_buckets: list[int]) -> None:
    from pypto_core.formats.kineto import read_kineto, write_kineto
    from pypto_core.profile import Profile

    whole = read_kineto(path)
    write_kineto(path, tmp_path / "p")
    if whole.kernels.num_rows > 300:
        assert max(tiny_buckets) > 1  # the spill path ran
    loaded = Profile.load(tmp_path / "p")
    for name in ("kernels", "host_ops", "api_calls", "flows", "counters", "steps", "communication"):
        assert loaded.table(name).equals(whole.table(name)), name
    assert not list((tmp_path / "p").glob(".spill-*"))


def test_connection_ids_match_alike_packed_or_not() -> None:
    # ids that fit one int64 take a sort and a binary search; an API id of 20 digits sends the partition
    # to a hash join: both give each start the first API (in table order) with its id, text ids apart
    from pypto_core.formats.chrome_trace import _BOUND_S, _KEY_ROW, _by_connection

    s = np.zeros(6, _BOUND_S)
    s["valid"] = True
    s["id"] = [5, 7, 7, 3, 1, 5]
    s["text"] = [False, False, True, False, False, False]
    s["hi"] = [0, 0, 0, 0, 40, 0]
    s["api"] = [-1, -1, -1, -1, -1, 11]  # bound by ts: kept
    apis = np.zeros(5, _KEY_ROW)
    apis["valid"] = [True, True, True, True, False]
    apis["id"] = [7, 5, 7, 7, 3]
    apis["text"] = [False, False, True, False, False]
    apis["row"] = [4, 3, 2, 0, 1]
    want = [3, 0, 2, -1, -1, 11]
    assert _by_connection(s, apis).tolist() == want
    long_id = np.zeros(1, _KEY_ROW)
    long_id["valid"], long_id["hi"], long_id["id"], long_id["row"] = True, 40, 1, 9
    want[4] = 9
    assert _by_connection(s, np.concatenate([apis, long_id])).tolist() == want


def test_a_failure_while_binding_leaves_no_folder(tmp_path: Path, tiny_buckets: list[int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pypto_core.formats import chrome_trace

    def broken(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(chrome_trace, "_pair", broken)
    with pytest.raises(OSError, match="disk full"):
        write_trace_view(TRACE_VIEWS[0], tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_flow_ids_take_the_same_numbers_with_or_without_the_integer_shortcut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids that are all canonical integers of up to 19 digits take a cast and its check instead of the
    regex; any other id in the batch sends it all the regex's way. Both give the same numbers."""
    import pyarrow as pa

    from pypto_core.formats import chrome_trace

    batches = [["5", None, "0", "123"], ["1767225600000151509", "9223372036854775807"], ["-5", "1"],
               ["+5", "5"], ["007"], ["1.5"], [" 5"], ["12345678901234567890", "7"], [None, None],
               ["0", "-0"], ["9223372036854775808"], ["1e5"], ["x1", "1"]]
    shortcut = [chrome_trace._small_integer_ids(pa.array(b, pa.string())) is not None for b in batches]
    assert shortcut == [True, True] + [False] * 11
    fast = [chrome_trace._FlowIds().encode(pa.array(b, pa.string())) for b in batches]
    monkeypatch.setattr(chrome_trace, "_small_integer_ids", lambda text: None)
    slow = [chrome_trace._FlowIds().encode(pa.array(b, pa.string())) for b in batches]
    for batch, a, b in zip(batches, fast, slow):
        assert [x.tolist() for x in a] == [x.tolist() for x in b], batch
    assert [x.tolist() for x in fast[1][:2]] == [[1, 9], [767225600000151509, 223372036854775807]]


def test_lanes_are_pid_tid_pairs_and_any_null_is_one_lane() -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from pypto_core.formats.chrome_trace import _LaneIds

    lanes = _LaneIds()
    pid = pa.array(["1", "1", "2", None, "1", "2", "1"])
    tid = pa.array(["a", "b", "a", "a", None, "a", "a"])
    first = lanes.of(pid, tid)
    assert first[0] == first[6] and first[2] == first[5]  # the same pair, the same lane
    assert len({first[0], first[1], first[2], first[3]}) == 4
    assert first[3] == first[4]  # a null pid or tid: the one lane of nulls
    again = lanes.of(pc.dictionary_encode(pa.array(["2", None, "1"])), pa.array(["a", "x", "b"]))
    assert again.tolist() == [first[2], first[3], first[1]]  # ids kept across batches, encoded or not


def test_out_of_core_flows_are_bound_and_paired_in_the_pool(tmp_path: Path, tiny_buckets: list[int],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables' bindings and the partitions' pairings run in ``FLOW_THREADS`` threads beside the
    reader's: the flows are the in-memory reading's all the same."""
    import threading

    from pypto_core.formats import chrome_trace
    from tests.core.formats.test_chrome_trace import _same_tables

    seen: dict[str, set[str]] = {"pair": set(), "finishes": set()}
    real_pair, real_finishes = chrome_trace._pair_part, chrome_trace._bind_finishes

    def pair(*args):  # noqa: ANN002, ANN202
        seen["pair"].add(threading.current_thread().name)
        return real_pair(*args)

    def finishes(*args):  # noqa: ANN002, ANN202
        seen["finishes"].add(threading.current_thread().name)
        return real_finishes(*args)

    monkeypatch.setattr(chrome_trace, "_pair_part", pair)
    monkeypatch.setattr(chrome_trace, "_bind_finishes", finishes)
    path = max(TRACE_VIEWS, key=lambda p: p.stat().st_size)
    whole = read_trace_view(path)
    write_trace_view(path, tmp_path / "p")
    assert whole.flows.num_rows > 300
    assert seen["pair"] and all(name.startswith("pypto-flows") for name in seen["pair"] | seen["finishes"])
    _same_tables(path, tmp_path / "p", whole)
