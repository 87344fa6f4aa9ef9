"""The what-if replay (pypto_core.replay): it reproduces every recorded run exactly, and it re-times a run
the way the recorded dependencies say (stream order, host issue, syncs, event waits across streams)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from pypto_core import formats  # noqa: E402
from pypto_core.attribution import attribute
from pypto_core.profile import Profile, ProfileMeta
from pypto_core.replay import Change, Replay
from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, REPO, SAMPLES

T0 = 1_736_408_883_688_177_930
REAL = ["ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt", "ascend_pt/cnn_8npu_db_level1/rank0_ascend_pt",
        "ascend_pt/timeline_2024", "kineto/a100_nccl_2rank", "kineto/dlrm_8xv100",
        "kineto/trace_diff_pair/control.json.gz", "kineto/trace_diff_pair/test.json.gz",
        "msprof/db_8npu_2023"]


@pytest.mark.parametrize("sample", REAL)
def test_replay_without_change_reproduces_the_recording(sample: str) -> None:
    if not HAVE_SAMPLES:  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    for p in formats.open_profiles(SAMPLES / sample).profiles:
        a = attribute(p)
        if a is None or a.source != "timeline":
            continue
        res = Replay(p, a).run()
        assert res.duration_ns == res.original_ns
        assert res.step_ns.sum() == res.original_ns


def _profile(kernels: list[tuple[int, int, int]], host: list[tuple[str, int, int]] | None = None,
             links: list[tuple[int, int]] | None = None) -> Profile:
    """kernels: (stream, start_us, dur_us); host: (name, start_us, dur_us); links: (host row, kernel row)."""
    k = pa.table({"name": [f"k{i}" for i in range(len(kernels))], "op_type": ["Add"] * len(kernels),
                  "core_type": ["AI_VECTOR_CORE"] * len(kernels),
                  "stream_id": pa.array([s for s, _, _ in kernels], pa.int64()),
                  "device_id": pa.array([0] * len(kernels), pa.int64()),
                  "start_ns": pa.array([T0 + s * 1000 for _, s, _ in kernels], pa.int64()),
                  "dur_ns": pa.array([d * 1000 for _, _, d in kernels], pa.int64())})
    host = host or []
    h = pa.table({"name": [n for n, _, _ in host], "tid": pa.array([1] * len(host), pa.int64()),
                  "start_ns": pa.array([T0 + s * 1000 for _, s, _ in host], pa.int64()),
                  "dur_ns": pa.array([d * 1000 for _, _, d in host], pa.int64())})
    f = pa.table({"host_index": pa.array([a for a, _ in links or []], pa.int64()),
                  "kernel_index": pa.array([b for _, b in links or []], pa.int64()),
                  "kind": ["async_npu"] * len(links or [])})
    end = max(s + d for _, s, d in kernels) + 5
    steps = pa.table({"step_id": pa.array([1], pa.int64()), "start_ns": pa.array([T0], pa.int64()),
                      "end_ns": pa.array([T0 + end * 1000], pa.int64())})
    return Profile(meta=ProfileMeta(format="ascend_pt"), kernels=k, host_ops=h, flows=f, steps=steps)


def _run(p: Profile, change: Change) -> int:
    return Replay(p, attribute(p)).run(change).saving_ns


def test_a_faster_task_on_a_busy_stream_saves_its_time() -> None:
    # device-bound: three tasks back to back, issued long before; halving the middle one saves 50 us
    p = _profile([(2, 10, 100), (2, 111, 100), (2, 212, 100)],
                 host=[("aclnnAdd", 0, 2), ("aclnnAdd", 3, 2), ("aclnnAdd", 6, 2)],
                 links=[(0, 0), (1, 1), (2, 2)])
    assert _run(p, Change(kernels=np.array([1]), saving_ns=np.array([50_000.0]))) == 50_000


def test_a_faster_task_saves_nothing_when_the_host_is_the_bottleneck() -> None:
    # host-bound: each task is issued only after the previous one ended, by a host busy all along
    p = _profile([(2, 10, 20), (2, 60, 20), (2, 110, 20)],
                 host=[("aclnnAdd", 0, 10), ("aclnnAdd", 10, 50), ("aclnnAdd", 60, 50)],
                 links=[(0, 0), (1, 1), (2, 2)])
    assert _run(p, Change(kernels=np.array([0]), saving_ns=np.array([10_000.0]))) == 0
    # removing host time (the compile call the second launch waited through) moves everything after it
    removed = (np.array([T0 + 20_000]), np.array([T0 + 50_000]))
    assert _run(p, Change(host_removed=removed)) == 30_000


def test_merged_changes_keep_rows_in_four_bytes_and_replay_the_same() -> None:
    # a finding's rows are int32 where they fit (a finding on every kernel of a 2.1 M-kernel run held 17 MB
    # in int64); merging int32 and int64 changes keeps them so, and the replay is the same either way
    p = _profile([(2, 10, 100), (2, 111, 100), (2, 212, 100)],
                 host=[("aclnnAdd", 0, 2), ("aclnnAdd", 3, 2), ("aclnnAdd", 6, 2)],
                 links=[(0, 0), (1, 1), (2, 2)])
    wide = [Change(kernels=np.array([1], np.int64), saving_ns=np.array([50_000.0])),
            Change(kernels=np.array([2], np.int64), saving_ns=np.array([20_000.0]),
                   gap_cut_kernels=np.array([2], np.int64))]
    narrow = [Change(kernels=c.kernels.astype(np.int32), saving_ns=c.saving_ns,
                     gap_cut_kernels=c.gap_cut_kernels.astype(np.int32)) for c in wide]
    merged = Change.merge([wide[0], narrow[1]])
    assert merged.kernels.dtype == np.int32 and merged.gap_cut_kernels.dtype == np.int32
    assert _run(p, merged) == _run(p, Change.merge(wide)) == _run(p, Change.merge(narrow)) == 70_000
    assert Change.merge([Change(kernels=np.array([2**31], np.int64))]).kernels.dtype == np.int64


def test_a_sync_returns_when_its_task_ends_and_the_host_moves_with_it() -> None:
    # a long collective on stream 1, the host syncs on it, then issues the last task
    p = _profile([(1, 10, 500), (2, 520, 20)],
                 host=[("StreamSynchronize", 12, 500), ("aclnnAdd", 515, 4)], links=[(1, 1)])
    saved = _run(p, Change(kernels=np.array([0]), saving_ns=np.array([400_000.0])))
    assert saved == 400_000


def test_what_if_in_the_cli_report(tmp_path) -> None:
    if not HAVE_SAMPLES:  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "pypto_core", "analyze",
                           str(SAMPLES / "kineto/a100_nccl_2rank"), "--what-if",
                           "host_bound_gaps,nonexistent_rule", "-o", str(out)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    w = json.loads(out.read_text())["what_if"]
    assert w["rules"] == ["host_bound_gaps"] and w["not_found"] == ["nonexistent_rule"]
    # graph mode on a host-bound A100 step: the replay agrees with the attribution's bound (the step cannot
    # drop below its device-busy time) and finds most of the host-bound idle time
    assert 3.0 < w["speedup"] < w["original_ns"] / (115_656_000 + 41_844_000)
    assert w["duration_ns"] < w["original_ns"] and w["per_token_ms"] is None  # training: no tokens


def test_a_profile_that_records_no_launch_is_replayed_only_when_asked() -> None:
    from pypto_core.replay import records_launches
    from pypto_core.rules import diagnose_group

    linked = _profile([(2, 10, 100), (2, 111, 100)], host=[("aclnnAdd", 0, 2), ("aclnnAdd", 3, 2)],
                      links=[(0, 0), (1, 1)])
    assert records_launches(linked) and not records_launches(_profile([(2, 10, 100), (2, 111, 100)]))
    if not HAVE_SAMPLES:  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    group = formats.open_profiles(SAMPLES / "msprof/op_summary_fixture")  # an op summary: no launches
    assert not records_launches(group.primary())
    report = diagnose_group(group)
    assert report.findings and report.profile["combined_speedup_source"] == "interval_model"
    assert not [f.rule for f in report.findings if "replayed_alone_us" in f.details]
    # asked for, the replay still runs (it re-times the tasks along their streams)
    asked = diagnose_group(group, what_if=[f.rule for f in report.findings])
    assert asked.what_if is not None and asked.what_if["duration_ns"] is not None
