"""The timeline index: lanes, nesting, honest merging, caps, search and event details."""

import numpy as np
import pyarrow as pa
import pytest

from pypto_core.profile import Profile
from pypto_core.timeline import TimelineIndex, build_timeline_index
from pypto_core.timeline import index as index_mod
from pypto_core.timeline.lod import Bars, merge
from tests.core.timeline.sample import BASE, sample_profile


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> TimelineIndex:
    return TimelineIndex.open(build_timeline_index(sample_profile(), tmp_path_factory.mktemp("tl") / "idx"))


def lane_id(ix: TimelineIndex, table: str, name: str) -> int:
    return next(ln.id for ln in ix.lanes if ln.table == table and ln.name == name)


def track(answer: dict, lane: int) -> dict:
    return next(t for t in answer["tracks"] if t["lane"] == lane)


def test_open_reads_only_metadata(index: TimelineIndex) -> None:
    fresh = TimelineIndex.open(index.dir)
    assert fresh._arrays == {} and fresh._strings is None
    assert fresh.base_ns == BASE and isinstance(fresh.doc["base_ns"], str)


def test_lanes_one_per_thread_stream_and_counter(index: TimelineIndex) -> None:
    names = {(ln.group, ln.name, ln.kind) for ln in index.lanes}
    assert ("Host process 100", "Thread 7", "slices") in names
    assert ("Host process 100", "Thread 8", "slices") in names
    assert ("CANN API (process 100)", "Thread 7", "slices") in names
    assert ("NPU 0", "Stream 2", "slices") in names
    assert ("Counters", "AI Core freq (MHz)", "counter") in names


def test_zoomed_in_window_has_raw_events_with_nesting_depth(index: TimelineIndex) -> None:
    ans = index.window(0, 1024, 1024)  # 1 ns per pixel: nothing merges
    assert ans["ns_per_px"] == 1
    host = track(ans, lane_id(index, "host_ops", "Thread 7"))
    depth = {ans["names"][n]: d for n, d in zip(host["name"], host["depth"])}
    assert depth == {"forward": 0, "aten::linear": 1, "aten::matmul": 2, "aten::rms_norm": 1}
    assert set(host["count"]) == {1}


def test_sub_pixel_kernels_merge_into_a_run_that_keeps_count_busy_and_gaps(index: TimelineIndex) -> None:
    ans = index.window(0, 12_800, 100)  # 128 ns per pixel
    assert ans["ns_per_px"] == 128
    stream = track(ans, lane_id(index, "kernels", "Stream 2"))
    bars = sorted(zip(stream["start"], stream["dur"], stream["count"], stream["busy"],
                      [ans["names"][n] for n in stream["name"]]))
    assert bars[0] == (200, 800, 1, 800, "MatMulV2")  # wider than a pixel: as it is
    assert bars[1][:4] == (2000, 1999, 1000, 1000)  # 1000 one-ns kernels, 2 ns apart: one run, half busy
    assert bars[1][4] == "Add"
    assert bars[2][:3] == (10_000, 300, 1)
    # The idle gap between the run and the last kernel (8 µs) is not covered by any bar.
    assert not any(s < 6000 < s + d for s, d, *_ in bars)
    assert sum(stream["count"]) == 1002


def test_whole_profile_window_never_drops_events(index: TimelineIndex) -> None:
    for width in (1, 3, 50, 400, 5000):
        ans = index.window(None, None, width)
        assert sum(sum(t["count"]) for t in ans["tracks"] if t["kind"] == "slices") == index.event_count


def test_time_per_pixel_is_a_power_of_two_and_window_is_aligned(index: TimelineIndex) -> None:
    ans = index.window(1001, 4003, 700)
    px = ans["ns_per_px"]
    assert px & (px - 1) == 0 and px >= (4003 - 1001) / 700
    assert ans["start_ns"] % px == 0 and ans["end_ns"] % px == 0
    assert ans["start_ns"] <= 1001 and ans["end_ns"] >= 4003
    assert index.window(1002, 4002, 700) is ans  # same aligned window: served from the cache


def test_search_finds_names_case_insensitively_in_time_order(index: TimelineIndex) -> None:
    res = index.search("ADD", limit=5)
    assert res["total"] == 1000 and res["names"] == ["Add"]
    assert [m["start_ns"] for m in res["matches"]] == [2000, 2002, 2004, 2006, 2008]
    assert index.search("no such kernel")["total"] == 0
    assert index.search("")["matches"] == []


def test_event_details_and_flow_links_both_ways(index: TimelineIndex) -> None:
    found = index.search("aten::matmul")["matches"][0]
    ev = index.event(found["lane"], found["idx"])
    assert ev["table"] == "host_ops" and ev["args"]["correlation_id"] == 3
    assert ev["args"]["start_ns"] == str(BASE + 150)  # beyond 2**53: sent as text
    links = [(ln["name"], ln["role"], ln["kind"]) for ln in ev["links"]]
    assert links == [("MatMulV2", "kernel", "async_npu")]
    kernel = ev["links"][0]
    back = index.event(kernel["lane"], kernel["idx"])
    assert back["args"]["block_dim"] == 24
    assert [(ln["name"], ln["role"]) for ln in back["links"]] == [("aten::matmul", "host_op")]
    with pytest.raises(KeyError):
        index.event(kernel["lane"] + 1, kernel["idx"])
    with pytest.raises(KeyError):
        index.event(None, 10**9)


def test_crafted_names_come_back_verbatim_as_data(index: TimelineIndex) -> None:
    ans = index.window(None, None, 1000)
    assert "<script>alert(1)</script>" in ans["names"]


def test_lane_filter(index: TimelineIndex) -> None:
    stream = lane_id(index, "kernels", "Stream 2")
    ans = index.window(None, None, 200, lanes=[stream])
    assert [t["lane"] for t in ans["tracks"]] == [stream]
    assert index.window(None, None, 200, lanes=[stream, 999, -1])["tracks"][0]["lane"] == stream


def random_profile(n: int, seed: int = 0) -> Profile:
    rng = np.random.default_rng(seed)
    gaps = rng.choice([1, 50, 2_000, 100_000], size=n, p=[0.5, 0.3, 0.15, 0.05])
    durs = rng.lognormal(6, 2, size=n).astype(np.int64)
    streams = rng.integers(0, 3, size=n)
    starts = np.zeros(n, np.int64)
    for s in range(3):  # back-to-back per stream, so a stream's kernels never overlap
        m = streams == s
        ends = np.cumsum(gaps[m] + durs[m])
        starts[m] = ends - durs[m]
    names = np.array(["MatMulV2", "Add", "Cast", "FlashAttentionScore"])[rng.integers(0, 4, size=n)]
    kernels = pa.table({"name": names, "stream_id": streams, "device_id": np.zeros(n, np.int64),
                        "start_ns": starts + BASE, "dur_ns": durs})
    t = np.sort(rng.integers(0, int(starts.max()), size=20_000))
    counters = pa.table({"track": ["HBM read (GB/s)"] * len(t), "ts_ns": t + BASE,
                         "value": rng.random(len(t))})
    return Profile(kernels=kernels, counters=counters)


def test_pyramid_matches_merging_the_raw_events_and_respects_caps(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(index_mod, "MAX_BARS", 400)
    profile = random_profile(30_000)
    ix = TimelineIndex.open(build_timeline_index(profile, tmp_path / "idx"))
    assert len(ix.levels) >= 3
    start = np.asarray(ix._a("events/start"))
    end = np.asarray(ix._a("events/end"))
    rows = np.repeat(np.arange(len(ix.rows), dtype=np.int32), np.diff(np.asarray(ix._a("events/offsets"))))
    raw = Bars.from_events(rows, start, end, np.arange(len(start)))
    for level in ix.levels:
        stored = np.asarray(ix._a(f"lod/{level}/count"))
        direct = merge(raw, 1 << level)
        assert len(stored) == len(direct) and stored.sum() == len(start)
        assert np.array_equal(np.asarray(ix._a(f"lod/{level}/start")), direct.start)
    for width in (300, 1500):
        for frac in (1.0, 0.1, 0.001, 1e-5):
            span = max(1, int(ix.end_ns * frac))
            for lo in (0, ix.end_ns // 3, ix.end_ns - span):
                ans = ix.window(lo, lo + span, width)
                assert ans["bars"] <= 400
                assert sum(len(t["t"]) for t in ans["tracks"] if t["kind"] == "counter") <= 2 * 1500
                if frac == 1.0 and lo == 0:
                    assert sum(sum(t["count"]) for t in ans["tracks"] if t["kind"] == "slices") == len(start)
                for t in ans["tracks"]:
                    if t["kind"] == "slices":  # merged runs never claim more busy time than their length
                        assert all(0 <= b <= d for b, d in zip(t["busy"], t["dur"]))


def test_gaps_of_a_pixel_or_more_survive_merging() -> None:
    rng = np.random.default_rng(3)
    n = 5000
    durs = rng.integers(0, 40, n)
    gaps = rng.integers(0, 200, n)
    ends = np.cumsum(durs + gaps)
    start, end = ends - durs, ends
    bars = merge(Bars.from_events(np.zeros(n, np.int32), start, end, np.arange(n)), 64)
    assert bars.count.sum() == n
    big_gap = np.flatnonzero(start[1:] - end[:-1] >= 64)
    mids = (end[big_gap] + start[big_gap + 1]) / 2
    covered = np.searchsorted(bars.start, mids, side="right") - 1
    assert np.all(bars.end[covered] <= mids)  # no bar spans an idle gap of a pixel or more


def test_lane_by_lane_build_matches_a_global_sort_and_writes_compact_details(tmp_path, monkeypatch) -> None:
    """Rows, depths and order equal one global (lane, start, longest first) sort; zero-length events,
    equal starts and partial overlaps included; an all-null list column does not bloat the details."""
    from pypto_core.profile import conform
    from pypto_core.timeline.lod import nesting_depth

    rng = np.random.default_rng(5)
    n = 20_000
    tid = rng.integers(0, 5, n)
    start = rng.integers(0, 200_000, n)
    start[1::7] = start[::7][: len(start[1::7])]  # equal starts
    dur = rng.choice([0, 1, 10, 500, 5_000], n)
    kernels = conform("kernels", pa.table({"name": rng.choice(["a", "b", "c"], n),
                                           "device_id": np.zeros(n, int), "stream_id": tid,
                                           "start_ns": start + BASE, "dur_ns": dur}))
    # all-null list columns, as readers leave them
    assert any(pa.types.is_list(f.type) for f in kernels.schema)
    ix = TimelineIndex.open(build_timeline_index(Profile(kernels=kernels), tmp_path / "idx"))
    order = np.lexsort((-dur, start, tid))
    depth = nesting_depth(tid[order], start[order], start[order] + dur[order])
    order = order[np.lexsort((start[order], depth, tid[order]))]
    assert np.array_equal(np.asarray(ix._a("events/row")), order)
    assert np.array_equal(np.asarray(ix._a("events/start")), start[order] - start.min())
    assert np.array_equal(np.asarray(ix._a("rowmap/kernels"))[order], np.arange(n))
    monkeypatch.setattr(index_mod, "DETAIL_BATCH_ROWS", 1000)
    index_mod._write_arrow(tmp_path / "raw.arrow", kernels, compress=False)
    # a slice of an all-null list column once carried the whole column's offsets into every batch
    assert (tmp_path / "raw.arrow").stat().st_size < 2 * kernels.nbytes


def test_a_merged_run_names_its_most_frequent_member_and_counts_it_exactly(tmp_path) -> None:
    """Before: "aten::item x19291", the longest member's name times the count of all members."""
    names = ["aten::item"] * 17 + ["aten::add"] * 300 + ["aten::mul"] * 112
    order = np.random.default_rng(1).permutation(len(names))
    names = [names[i] for i in order]
    durs = [50 if n != "aten::item" else 90 for n in names]  # the longest members are the rarest name
    starts = np.arange(len(names)) * 100
    host = pa.table({"name": names, "pid": [1] * len(names), "tid": [1] * len(names),
                     "start_ns": starts + BASE, "dur_ns": durs})
    ix = TimelineIndex.open(build_timeline_index(Profile(host_ops=host), tmp_path / "idx"))
    ans = ix.window(0, int(starts[-1]) + 100, 400)  # 128 ns per pixel: one run, about 340 px wide
    t = ans["tracks"][0]
    assert t["count"] == [429]
    assert ans["names"][t["name"][0]] == "aten::item"  # the longest member, as before
    assert ans["names"][t["top"][0]] == "aten::add" and t["top_count"] == [300]
    run = ix.run(t["lane"], t["depth"][0], t["start"][0], t["start"][0] + t["dur"][0])
    assert run["count"] == 429 and run["distinct_names"] == 3
    assert [(n["name"], n["count"]) for n in run["by_count"]] == [("aten::add", 300), ("aten::mul", 112),
                                                                  ("aten::item", 17)]
    assert run["by_time"][0] == {"name": "aten::add", "count": 300, "total_ns": 300 * 50}
    assert run["busy_ns"] == sum(durs)
    with pytest.raises(KeyError):
        ix.run(t["lane"], 5, 0, 10)


def test_runs_too_narrow_for_a_label_are_not_counted(index: TimelineIndex) -> None:
    ans = index.window(0, 12_800, 25)  # the 1000 Add kernels: one run of ~4 px, no label
    stream = track(ans, lane_id(index, "kernels", "Stream 2"))
    assert stream["top"] == [-1] * len(stream["count"])
    ans = index.window(0, 12_800, 2000)  # ~250 px: labelled, every member an Add
    stream = track(ans, lane_id(index, "kernels", "Stream 2"))
    run = [i for i, c in enumerate(stream["count"]) if c > 1]
    assert [(ans["names"][stream["top"][i]], stream["top_count"][i]) for i in run] == [("Add", 1000)]


def test_lanes_are_named_from_the_trace_and_constant_counters_start_hidden(tmp_path) -> None:
    """The CNN 8-NPU sample: HCCL group named by its collective and ranks, kernels without a stream id by
    their core type, 83 memory and counter tracks that never change folded away (<= 40 lanes shown)."""
    from pypto_core.formats import open_profile
    from tests.paths import SAMPLES

    profile = open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt")
    ix = TimelineIndex.open(build_timeline_index(profile, tmp_path / "idx"))
    lanes = ix.window(None, None, 1000)["lanes"]
    names = [ln["name"] for ln in lanes]
    assert "allReduce · ranks 0–7 · group …225271" in names
    comm = next(ln for ln in lanes if ln["table"] == "communication")
    assert comm["detail"] == "HCCL group 11022204950826225271" and comm["group"] == "Communication (HCCL)"
    assert "COMMUNICATION tasks (stream not recorded)" in names
    assert not any("?" in n or n.isdigit() for n in names)
    assert "Thread 3178231 (main)" in names
    hidden = [ln for ln in lanes if ln["hidden"]]
    assert len(hidden) == 83 and all(ln["kind"] == "counter" for ln in hidden)
    assert len(lanes) - len(hidden) <= 40
    starts = {ln["id"]: ln for ln in lanes}
    for lane_id, (lo, hi) in ix.doc["counter_ranges"].items():  # hidden exactly when the value never changes
        v = np.asarray(ix._a("counters/v")[lo:hi])
        assert starts[int(lane_id)]["hidden"] == (np.nanmin(v) == np.nanmax(v))


def test_lane_names_render_in_the_page_language_with_stable_ids(tmp_path) -> None:
    """Names and headings are messages stored in the index and rendered when served: zh-Hans uses CANN's
    terms; ids, ``group_id`` (the English heading, which saved layouts name) and trace data never change."""
    from pypto_core.formats import open_profile
    from tests.paths import SAMPLES

    profile = open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt")
    ix = TimelineIndex.open(build_timeline_index(profile, tmp_path / "idx"))
    en, zh = ix.lane_dicts(), ix.lane_dicts("zh-Hans")
    assert [ln["id"] for ln in en] == [ln["id"] for ln in zh]
    assert [ln["group_id"] for ln in en] == [ln["group_id"] for ln in zh] == [ln["group"] for ln in en]
    zh_names = {ln["name"] for ln in zh}
    zh_groups = {ln["group"] for ln in zh}
    assert {"线程 3178231（主线程）", "Stream 2", "迭代标记", "COMMUNICATION 任务（未记录 Stream）",
            "allReduce · Rank 0–7 · 通信域 …225271"} <= zh_names
    assert {"Profiler 迭代", "Host 进程 3178231", "CANN API（进程 3254508768）", "通信（HCCL）", "计数器",
            "内存"} <= zh_groups
    comm = next(ln for ln in zh if ln["table"] == "communication")
    assert comm["detail"] == "HCCL 通信域 11022204950826225271"
    # no English heading left untranslated in zh-Hans (NPU is the device's name in both)
    assert not any(w in " ".join(zh_groups) for w in ("Host process", "Counters", "Memory", "Steps",
                                                      "process"))
    idx = int(track(ix.window(None, None, 1000), 9)["idx"][0])
    assert ix.event(None, idx, language="zh-Hans")["group"] == "NPU（Rank 0）"


def test_critical_path_answer_is_placed_on_lanes_and_bounded(tmp_path, monkeypatch) -> None:
    """The CNN 8-NPU sample's one step: the path's segments cover the step, sit on the lanes of the events
    that stand for them, and merge below a pixel (at most MAX_BARS) without losing time."""
    from pypto_core.formats import open_profile
    from tests.paths import SAMPLES

    profile = open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt")
    ix = TimelineIndex.open(build_timeline_index(profile, tmp_path / "idx"))
    full = ix.critical(None, None, 100_000)
    seg = full["segments"]
    (step,) = full["steps"]
    assert full["available"] and seg["start"][0] == step["start_ns"]
    assert sum(seg["dur"]) == step["end_ns"] - step["start_ns"]
    assert all(a + d == b for a, d, b in zip(seg["start"], seg["dur"], seg["start"][1:]))
    kinds = full["kinds"]
    for kind, lane, idx in zip(seg["kind"], seg["lane"], seg["idx"]):
        assert lane >= 0
        if kinds[kind] == "task":
            assert ix.event(None, idx)["lane"] == lane and ix.lanes[lane].table == "kernels"
    assert 0 < step["device_ns"] < step["end_ns"] - step["start_ns"]
    monkeypatch.setattr(index_mod, "MAX_BARS", 4)
    coarse = ix.critical(None, None, 50)
    assert len(coarse["segments"]["start"]) <= 4
    assert sum(coarse["segments"]["count"]) == sum(seg["count"]) == len(ix._a("critical/start"))
    assert sum(coarse["segments"]["dur"]) == sum(seg["dur"])
    outside = ix.critical(step["end_ns"] + 10, step["end_ns"] + 1000, 100)
    assert outside["segments"]["start"] == [] and outside["steps"] == []


def test_a_profile_past_the_critical_path_bound_is_indexed_without_it_and_says_why(tmp_path,
                                                                                   monkeypatch) -> None:
    """Bounded work: the path needs the whole run's attribution and replay graph, so past the bound the index
    is built without it, and the answer says why instead of failing or taking minutes."""
    from pypto_core.formats import open_profile
    from pypto_core.timeline import index as timeline_index
    from tests.paths import SAMPLES

    profile = open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt")
    monkeypatch.setattr(timeline_index, "CRITICAL_PATH_MAX_KERNELS", profile.kernels.num_rows - 1)
    answer = TimelineIndex.open(build_timeline_index(profile, tmp_path / "idx")).critical(None, None, 1000)
    assert answer["available"] is False and f"{profile.kernels.num_rows:,}" in answer["reason"]
    assert answer["segments"]["start"] == []


def test_device_lanes_come_first_and_a_gpu_trace_names_its_gpu_and_nccl(tmp_path) -> None:
    """What a timeline is opened for is on its first screen: the steps, then the device's streams and its
    collectives, then the host threads and the runtime API (the CNN's host process, deep Python stacks,
    filled the first screen above the device). A Kineto trace's device is a GPU and its collectives NCCL (the
    A100's streams sat under "NPU 0", its NCCL calls under "Communication (HCCL)")."""
    from pypto_core.formats import open_profile
    from tests.paths import SAMPLES

    def groups(profile) -> list[str]:
        ix = TimelineIndex.open(build_timeline_index(profile, tmp_path / str(id(profile))))
        lanes = sorted(ix.window(None, None, 1000)["lanes"], key=lambda ln: (ln["sort"], ln["id"]))
        return [t for t in dict.fromkeys((ln["table"], ln["group"]) for ln in lanes)]

    npu = groups(open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt"))
    tables = [t for t, _g in npu]
    assert tables.index("kernels") < tables.index("communication") < tables.index("host_ops") \
        < tables.index("api_calls"), npu
    assert tables[0] == "steps" and ("communication", "Communication (HCCL)") in npu
    gpu = groups(open_profile(SAMPLES / "kineto" / "a100_nccl_2rank" / "nccl_data.json.gz"))
    assert gpu[:3] == [("steps", "Profiler steps"), ("kernels", "GPU 0"), ("communication",
                                                                          "Communication (NCCL)")], gpu
    assert not any("NPU" in g or "HCCL" in g for _t, g in gpu)


def test_bar_breaks_worked_a_slice_at_a_time_are_the_whole_lanes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The histogram of the pixel sizes that separate events adds up over slices of a lane: slices of 7
    events (rows starting inside and across them) give the whole lane's histogram."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(2, 80))
        start = np.sort(rng.integers(0, 10**6, n)).astype(np.int64)
        end = start + rng.integers(0, 10**4, n)
        endmax = np.maximum.accumulate(end)
        row_first = np.unique(np.r_[0, rng.integers(1, n, int(rng.integers(1, 5)))])
        whole = index_mod._break_sizes(start, end, endmax, row_first)
        monkeypatch.setattr(index_mod, "_BREAK_SLICE", 7)
        assert index_mod._break_sizes(start, end, endmax, row_first).tolist() == whole.tolist()
        monkeypatch.undo()
