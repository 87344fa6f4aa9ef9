"""The critical path of each step (pypto_core.critical_path), read from the what-if replay's graph: exact on
hand-built runs whose path is known, and on every real sample a tiling of each step (its segments add up to
the step's span, the replay's identity being exact)."""

from __future__ import annotations

import numpy as np
import pytest

from pypto_core import formats
from pypto_core.attribution import attribute
from pypto_core.critical_path import KINDS, TABLES, TASK, critical_path, profile_critical_path
from pypto_core.replay import Replay
from tests.core.test_replay import REAL, T0, _profile
from tests.paths import HAVE_SAMPLES, MISSING_SAMPLES, SAMPLES


def _segments(path) -> list[tuple[str, float, float, str, int]]:
    return [(KINDS[k], (s - T0) / 1e3, (e - T0) / 1e3, TABLES[t] if t >= 0 else "", int(r))
            for k, s, e, t, r in zip(path.kind, path.start, path.end, path.table, path.row)]


def test_stream_order_and_an_event_wait_make_the_path() -> None:
    # stream 2: k0 [10, 110], k1 [111, 211]; stream 3: k2 starts 4 us after k1 ends (an event wait);
    # stream 4: k3 [20, 60] runs beside them and is not on the path; each launched by its own host call
    p = _profile([(2, 10, 100), (2, 111, 100), (3, 215, 50), (4, 20, 40)],
                 host=[("aclnnAdd", 0, 2), ("aclnnAdd", 3, 2), ("aclnnAdd", 6, 2), ("aclnnMul", 9, 2)],
                 links=[(0, 0), (1, 1), (2, 2), (3, 3)])
    path = profile_critical_path(p)
    assert _segments(path) == [
        ("host", 0, 2, "host_ops", 0),  # the host until it issued k0 (the call that returned at 2 us)
        ("launch", 2, 10, "kernels", 0),  # k0 is its stream's first task: its launch latency
        ("task", 10, 110, "kernels", 0),
        ("stream_gap", 110, 111, "kernels", 1),
        ("task", 111, 211, "kernels", 1),
        ("event_wait", 211, 215, "kernels", 2),
        ("task", 215, 265, "kernels", 2),
        ("host", 265, 270, "", -1),  # the step's end after its last task (bookkeeping)
    ]
    assert path.step_totals().tolist() == [270_000] and path.device_ns().tolist() == [250_000]


def test_a_sync_hands_the_path_from_the_host_back_to_the_task_it_waited_for() -> None:
    # k0 [10, 110]; the host syncs until 111 (1 us after k0), then its call returns at 119 and launches k1
    # at 120 while the host was busy through k1's gap (host-bound): the path is k1 <- its launch <- the
    # host <- the sync <- k0
    p = _profile([(2, 10, 100), (2, 120, 50)],
                 host=[("aclnnAdd", 0, 2), ("aclrtSynchronizeStream", 5, 106), ("aclnnAdd", 111, 8)],
                 links=[(0, 0), (2, 1)])
    assert _segments(profile_critical_path(p)) == [
        ("host", 0, 2, "host_ops", 0),
        ("launch", 2, 10, "kernels", 0),
        ("task", 10, 110, "kernels", 0),
        ("sync_return", 110, 111, "host_ops", 1),
        ("host", 111, 119, "host_ops", 2),
        ("launch", 119, 120, "kernels", 1),
        ("task", 120, 170, "kernels", 1),
        ("host", 170, 175, "", -1),
    ]


def test_a_host_bound_step_ends_on_the_host() -> None:
    # the host works until 300 us, long after the device's one task: the path is host time alone
    p = _profile([(2, 10, 20)], host=[("aclnnAdd", 0, 2), ("aten::slow_python", 3, 290)], links=[(0, 0)])
    path = profile_critical_path(p)
    assert set(path.kind.tolist()) == {KINDS.index("host")}
    assert path.device_ns().tolist() == [0]


@pytest.mark.parametrize("sample", REAL + ["ascend_pt/qwen3_0.6b_train_4npu_level2"])
def test_every_step_of_a_real_sample_is_tiled_by_its_critical_path(sample: str) -> None:
    if not HAVE_SAMPLES:  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    checked = 0
    for p in formats.open_profiles(SAMPLES / sample).profiles[:2]:
        a = attribute(p)
        if a is None or a.source != "timeline":
            continue
        replay = Replay(p, a)
        path = critical_path(replay, p)
        w = path.windows
        # the replay's identity (exact) re-times each step to its recorded span; the path covers it exactly
        assert replay.run().duration_ns == w[-1, 1] - w[0, 0]
        assert path.step_totals().tolist() == (w[:, 1] - w[:, 0]).tolist()
        for k in range(len(w)):
            mine = np.flatnonzero(path.step == k)
            assert path.start[mine[0]] == w[k, 0] and path.end[mine[-1]] == w[k, 1]
            assert np.array_equal(path.start[mine[1:]], path.end[mine[:-1]])  # contiguous, in time order
        # a task segment is (a part of) a recorded kernel of the replayed device
        tasks = np.flatnonzero(path.kind == TASK)
        k_start = p.kernels["start_ns"].to_numpy()[path.row[tasks]]
        k_end = k_start + p.kernels["dur_ns"].to_numpy()[path.row[tasks]]
        assert np.all(path.start[tasks] >= k_start) and np.all(path.end[tasks] <= k_end)
        assert np.isin(path.row[tasks], replay.rows).all()
        checked += 1
    assert checked or sample.startswith("kineto/trace_diff_pair/test")
