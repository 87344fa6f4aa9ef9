"""The cluster view's engine (pypto_core.cluster): clock alignment on step markers, links from msprof's
communication matrix (bandwidth as msprof computes it), and the slowest link with its evidence."""

from pypto_core.cluster import align_ranks, cluster_view, communication_links, slowest_link
from pypto_core.formats import open_profile
from tests.paths import SAMPLES


def simulated_ranks(n: int = 8) -> tuple[list[dict], list[int]]:
    """A simulated 8-rank job: the same three steps on every rank, each rank's clock off by its own amount,
    rank 5 slower in every step."""
    skew = [0, 3_000, -2_500, 41_000, 7, -900_000, 12, 65_000]
    ranks = []
    for r in range(n):
        t = 1_736_408_883_000_000_000 + skew[r]
        steps = []
        for sid in (11, 12, 13):
            dur = 10_000_000 + (2_000_000 if r == 5 else 0)
            steps.append({"step_id": sid, "start_ns": t, "end_ns": t + dur,
                          "time_breakdown": {"wall_ns": dur}})
            t += 12_500_000
        ranks.append({"rank": r, "steps": steps, "time_breakdown": {"wall_ns": 3 * 10_000_000}})
    return ranks, skew


def test_ranks_are_aligned_on_their_first_common_step_and_the_offset_is_stated() -> None:
    ranks, skew = simulated_ranks()
    view = align_ranks(list(reversed(ranks)))  # any order in, ranks in order out
    assert [r["rank"] for r in view["ranks"]] == list(range(8))
    assert view["aligned_on_step"] == 11
    assert [r["offset_ns"] for r in view["ranks"]] == skew  # offsets against rank 0
    assert {r["steps"][0]["start_ns"] for r in view["ranks"]} == {0}
    assert view["ranks"][5]["steps"][0]["end_ns"] == 12_000_000  # the slow rank's step, longer on one axis
    assert view["ranks"][3]["steps"][1]["abs_start_ns"] == str(1_736_408_883_000_000_000 + 41_000
                                                               + 12_500_000)


def test_no_common_step_keeps_the_clocks_and_says_so() -> None:
    ranks, _ = simulated_ranks(2)
    ranks[1]["steps"] = [dict(s, step_id=s["step_id"] + 100) for s in ranks[1]["steps"]]
    view = align_ranks(ranks)
    assert view["aligned_on_step"] is None and "none" in view["alignment"]
    assert [r["offset_ns"] for r in view["ranks"]] == [0, 0]


def test_cnn_8npu_matrix_links_match_msprof_bandwidth_and_name_the_slowest_link() -> None:
    profile = open_profile(SAMPLES / "ascend_pt" / "cnn_8npu_text_level2" / "rank0_ascend_pt")
    links = communication_links({0: profile.meta.extra["communication_matrix"]})
    assert [(x["src"], x["dst"]) for x in links] == [(0, d) for d in range(8)]
    by = {x["dst"]: x for x in links}
    # only the "allreduce-total@" lines are read: the file's own total bandwidth for 0-1 is 14.9539 GB/s
    assert by[1]["size_mb"] == round(61.210623999999996, 4) and by[1]["bandwidth_gbps"] == round(
        61.210623999999996 / 4.093301781249999, 4)
    assert abs(by[1]["bandwidth_gbps"] - 14.9539) < 1e-3 and by[0]["transport"] == "LOCAL"
    slow = slowest_link(links)
    assert (slow["src"], slow["dst"], slow["transport"]) == (0, 7, "HCCS")
    assert slow["links_compared"] == 7 and slow["ratio_to_median"] < 1
    assert not slow["slow"]  # 98% of the median: the slowest of even links
    halved = [{**x, "bandwidth_gbps": x["bandwidth_gbps"] / 2} if x["dst"] == 7 else x for x in links]
    assert slowest_link(halved)["slow"] and slowest_link(halved)["ratio_to_median"] < 0.8
    view = cluster_view([], {0: profile.meta.extra["communication_matrix"]})
    assert view["link_ranks"] == list(range(8)) and view["matrix_source"] == "communication_matrix.json"


def test_a_rank_without_step_timestamps_is_drawn_from_the_lowest_ranks_step_and_says_so() -> None:
    """Rank 1 of the Qwen3 sample: step_trace_time with
    durations but no times (attribution start = end = 0)."""
    ranks, _ = simulated_ranks(2)
    ranks[1]["steps"] = [dict(s, start_ns=0, end_ns=0) for s in ranks[1]["steps"]]
    view = align_ranks(ranks)
    r1 = view["ranks"][1]
    assert r1["offset_ns"] is None and not any(s["timed"] for s in r1["steps"])
    assert [s["start_ns"] for s in r1["steps"]] == [s["start_ns"] for s in view["ranks"][0]["steps"]]
    assert [s["end_ns"] - s["start_ns"] for s in r1["steps"]] == [10_000_000] * 3


def test_a_link_that_moved_a_few_bytes_is_not_the_slowest_link() -> None:
    # Qwen3 PP=2 x DP=2, ranks 0 and 1 uploaded: each moved 1-2.4 GB to the other over HCCS at ~19 GB/s, and
    # about 100 bytes to ranks 2 and 3 (a handshake) "at 0.06 GB/s": latency, not a slow link.
    from pypto_core import formats

    group = formats.open_profiles(SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2")
    matrices = {p.meta.rank: p.meta.extra["communication_matrix"] for p in group.profiles
                if p.meta.extra.get("communication_matrix")}
    links = communication_links(matrices)
    tiny = [x for x in links if x["src"] != x["dst"] and x["size_mb"] < 0.01]
    assert tiny and min(x["bandwidth_gbps"] for x in tiny) < 0.1
    slow = slowest_link(links)
    assert slow is not None and {slow["src"], slow["dst"]} == {0, 1} and slow["bandwidth_gbps"] > 18
