"""Every real sample under shared/samples (ascend_pt, msprof)
read through open_profile(s), checked against the file."""

import pyarrow.compute as pc
import pytest

from pypto_core.errors import InputError
from pypto_core.formats import detect_format, open_profile, open_profiles
from tests.paths import SAMPLES

PT = SAMPLES / "ascend_pt"
QWEN0 = PT / "qwen3_0.6b_train_4npu_level2" / "rank_0_ascend_pt"


def _row(table, **match):
    mask = None
    for k, v in match.items():
        m = pc.equal(table[k], v)
        mask = m if mask is None else pc.and_(mask, m)
    rows = table.filter(mask).to_pylist()
    assert rows, match
    return rows[0]


@pytest.fixture(scope="module")
def qwen0():
    return open_profile(QWEN0)


def test_qwen3_rank0_kernels_exact(qwen0):
    k = qwen0.kernels
    assert qwen0.meta.format == "ascend_pt"
    assert k.num_rows == 2463  # 2464 lines minus the header
    first = k.slice(0, 1).to_pylist()[0]
    assert first["name"] == "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike"
    assert first["start_ns"] == 1764246877073569640  # "1764246877073569.640\t"
    assert first["dur_ns"] == 1892920
    assert first["block_dim"] == 40 and first["step_id"] == 13 and first["device_id"] == 0
    # PMU counters, real names
    assert first["aiv_mte3_ratio"] == 0.996 and first["aiv_mte2_time(us)"] == 0.001
    fa = _row(k, task_id=34515)
    assert fa["op_type"] == "FlashAttentionScore" and fa["core_type"] == "MIX_AIC"
    assert fa["input_shapes"][:3] == [[4096, 1, 2048], [4096, 1, 1024], [4096, 1, 1024]]
    assert fa["mix_block_dim"] == 40 and fa["wait_ns"] == 357580
    comm = _row(k, name="hcom_batchSendRecv__128_3_1")
    assert comm["core_type"] == "COMMUNICATION" and comm["stream_id"] is None and comm["task_id"] is None
    assert comm["start_ns"] == 1764246877147674500
    # Model ID 4294967295 means "none": null, never the sentinel.
    assert pc.max(k["model_id"]).as_py() is None


def test_qwen3_rank0_totals_match_op_statistic(qwen0):
    k = qwen0.kernels
    fa_grad = k.filter(pc.equal(k["op_type"], "FlashAttentionScoreGrad"))
    assert fa_grad.num_rows == 28
    assert pc.sum(fa_grad["dur_ns"]).as_py() == 63128660  # op_statistic.csv: Total Time(us) 63128.66
    stats = {r["OP Type"]: r for r in qwen0.meta.extra["op_statistic"]}
    assert stats["MatMulV3"]["Count"] == 280
    assert set(pc.unique(k["core_type"]).to_pylist()) == {"AI_VECTOR_CORE", "AI_CORE", "MIX_AIC", "MIX_AIV",
                                                          "COMMUNICATION"}


def test_qwen3_rank0_meta_steps_memory_communication(qwen0):
    m = qwen0.meta
    assert (m.rank, m.cann_version, m.torch_npu_version, m.profiler_level, m.aic_metrics) == (
        0, "8.3.RC1", "2.7.1", "Level2", "PipeUtilization")
    assert m.simulated is False and m.warnings == []
    assert m.extra["metadata"]["distributed_args"]["world_size"] == 4
    step = qwen0.steps.to_pylist()[0]
    assert step["step_id"] == 13 and step["computing_ns"] == 231290100 and step["preparing_ns"] == 206250
    assert step["start_ns"] == 1764246877073569640  # from the first kernel of step 13
    span = qwen0.time_span_ns()
    assert span[0] == 1764246877073569640 and span[1] > span[0]
    mem = qwen0.memory
    app = _row(mem, source="memory_record", ts_ns=1764246877082702440)
    assert app["component"] == "APP" and app["reserved_bytes"] == round(11925.015625 * 1024**2)
    assert app["device"] == "NPU:0"
    comm = _row(qwen0.communication, name="hcom_batchSendRecv__128_3_1")
    assert comm["start_ns"] == 1764246877147674500 and comm["elapse_ns"] == 436140 and comm["step_id"] == 13
    assert qwen0.communication.num_rows == 15


def test_qwen3_two_ranks_grouped():
    group = open_profiles(QWEN0.parent)
    assert group.ranks == 2
    assert sorted(p.meta.rank for p in group.profiles) == [0, 1]
    rank1 = next(p for p in group.profiles if p.meta.rank == 1)
    assert rank1.kernels.num_rows == 0 and rank1.steps.to_pylist()[0]["computing_ns"] == 230903720
    assert rank1.communication.num_rows > 0


@pytest.mark.parametrize("level,kernels", [(0, 191), (1, 191), (2, 191)])
def test_cnn_text_levels(level, kernels):
    p = open_profile(PT / f"cnn_8npu_text_level{level}" / "rank0_ascend_pt")
    assert p.kernels.num_rows == kernels
    assert p.meta.profiler_level == f"Level{level}"
    first = p.kernels.slice(0, 1).to_pylist()[0]
    assert first["name"] == "trans_TransData_0"
    if level == 0:
        assert first["start_ns"] == 1736405443881410320
        assert first["op_type"] is None and first["core_type"] is None  # "N/A" at Level0
    if level == 1:
        assert first["start_ns"] == 1736408883704643212
        assert first["input_shapes"] == [[32, 3, 224, 224]] and first["output_formats"] == ["NC1HWC0"]
        assert first["l2_hit_rate"] is None or first["l2_hit_rate"] >= 0  # l2_cache.csv joined by stream/task
        assert p.communication.num_rows == 4
    assert p.steps.to_pylist()[0]["step_id"] == 50


@pytest.mark.parametrize("level", [0, 1])
def test_cnn_db_levels(level):
    folder = PT / f"cnn_8npu_db_level{level}" / "rank0_ascend_pt"
    assert detect_format(folder).kind == "ascend_pt_db"
    p = open_profile(folder)
    assert p.meta.format == "ascend_pt_db" and p.meta.device == "Ascend910B" and p.meta.rank == 0
    assert p.kernels.num_rows == 191  # 187 compute tasks + 4 hcom ops, as kernel_details
    assert p.host_ops.num_rows == 2460 and p.api_calls.num_rows > 0
    assert pc.min(p.host_ops["start_ns"]).as_py() > 1.7e18  # TEXT startNs read exactly
    assert p.flows.num_rows > 0
    step = p.steps.to_pylist()[0]
    assert step["step_id"] == 50 and step["computing_ns"] > 0
    if level == 1:
        first = _row(p.kernels, name="trans_TransData_0")
        assert first["start_ns"] == 1736410576404465403 and first["block_dim"] == 32
        assert first["core_type"] == "AI_VECTOR_CORE" and first["input_shapes"] == [[32, 3, 224, 224]]
        assert "aiv_mte2_ratio" in p.kernels.column_names  # TASK_PMU_INFO pivoted
        assert p.communication.num_rows == 4


def test_trimmed_2023_memoryl0_ranks_and_warnings():
    group = open_profiles(PT / "trimmed_2023_memoryl0")
    assert group.ranks == 2
    r0 = next(p for p in group.profiles if p.meta.rank == 0)
    r1 = next(p for p in group.profiles if p.meta.rank == 1)
    assert r0.meta.aic_metrics == "MemoryL0"
    # The file has one row with a field missing: skipped and said, never shifted into wrong columns.
    assert r0.kernels.num_rows == 20
    assert any("malformed row" in w for w in map(str, r0.meta.warnings))
    assert _row(r0.kernels, task_id=2451)["start_ns"] == 1695115378713661000
    assert "aic_l0a_read_bw(GB/s)" in r0.kernels.column_names
    assert r0.kernels.filter(pc.equal(r0.kernels["core_type"], "COMMUNICATION")).num_rows > 0  # was "HCCL"
    assert _row(r1.kernels, task_id=2113)["start_ns"] == 1695115378710248000
    # Excel-mangled timestamps ("1.69512E+15") in memory_record.csv: left empty, with a warning.
    assert any("1.69512E+15" in w for w in map(str, r1.meta.warnings))


def test_single_kernel_details_files():
    p = open_profile(PT / "llm_matmul_pipeutil_2025" / "kernel_details.csv")
    assert p.kernels.num_rows == 29
    first = p.kernels.slice(0, 1).to_pylist()[0]
    assert first["start_ns"] == 1736413971558972912  # quoted "...972.912\t"
    assert first["input_shapes"] == [[81920, 4096], [8192, 512]] and first["cube_utilization(%)"] == 79.295
    p = open_profile(PT / "llm_arithutil_2023" / "kernel_details.csv")
    assert p.kernels.num_rows == 591
    hccl = _row(p.kernels, name="hcom_broadcast__445_0")
    assert hccl["core_type"] == "COMMUNICATION" and hccl["start_ns"] == 1699529622793969500
    assert hccl["dur_ns"] == 308926680 and hccl["mix_block_dim"] is None
    assert "aic_cube_fops" in p.kernels.column_names
    p = open_profile(PT / "level0_excerpt" / "kernel_details.csv")
    assert p.kernels.num_rows == 8 and p.kernels["start_ns"][0].as_py() == 1702866902796675000
    assert p.kernels["dur_ns"][0].as_py() == 932050  # 932.0498 µs, rounded to the ns


def test_timeline_2024_folder_reads_trace_alone():
    p = open_profile(PT / "timeline_2024")
    assert p.kernels.num_rows > 0 and p.host_ops.num_rows > 0 and p.flows.num_rows > 0
    assert p.meta.format == "ascend_pt"


def test_msprof_db():
    p = open_profile(SAMPLES / "msprof" / "db_8npu_2023" / "msprof_0.db")
    assert p.meta.format == "msprof_db" and p.meta.device == "Ascend910B"
    assert p.kernels.num_rows == 11  # COMPUTE_TASK_INFO rows joined to TASK (the _old_ copy ignored)
    first = p.kernels.slice(0, 1).to_pylist()[0]
    assert first["name"] == "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike"
    assert first["start_ns"] == 1698220811392354694 and first["dur_ns"] == 612092
    assert first["input_shapes"] == [[1676480000]] and first["block_dim"] == 48
    assert p.api_calls.num_rows == 4
    # HBM's direction is a STRING_IDS id (1399 is "read"): the lane says read, never "type 1399"
    assert set(p.counters["track"].to_pylist()) == {f"HBM {h} read (bytes/s) dev 2" for h in range(4)}


def test_msprof_op_summary_fixture():
    path = SAMPLES / "msprof" / "op_summary_fixture" / "op_summary_1.csv"
    assert detect_format(path).kind == "kernel_csv"
    p = open_profile(path)
    assert p.meta.format == "msprof" and p.kernels.num_rows == 20
    assert p.kernels["start_ns"][0].as_py() == 1695115378713661000
    assert any("malformed row" in w for w in map(str, p.meta.warnings))


@pytest.mark.parametrize("layout", ["normal", "slice"])
def test_msprof_zero_byte_placeholders(layout):
    folder = SAMPLES / "msprof" / "file_naming_placeholders" / layout
    assert detect_format(folder).kind == "msprof"
    with pytest.raises(InputError) as exc:
        open_profile(folder)
    msg = str(exc.value)
    assert "file is empty (0 bytes)" in msg
    assert ("op_summary_slice_0_20230919172304.csv" if layout == "slice"
            else "op_summary_20230919172305.csv") in msg


def test_analysis_db_alone():
    p = open_profile(PT / "cnn_8npu_db_level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "analysis.db")
    assert p.kernels.num_rows == 0 and p.steps.num_rows == 1 and p.communication.num_rows == 4
    assert any("no kernels" in w for w in map(str, p.meta.warnings))


def test_saved_profile_round_trips(qwen0, tmp_path):
    from pypto_core.profile import Profile

    qwen0.save(tmp_path / "p")
    back = Profile.load(tmp_path / "p")
    assert back.kernels.equals(qwen0.kernels)
    assert back.meta.cann_version == "8.3.RC1"


def test_trace_view_merged_with_kernel_details():
    """trace_view.json (part B's reader) adds host ops/API calls/counters; its flows point at CSV kernels."""
    p = open_profile(PT / "cnn_8npu_text_level1" / "rank0_ascend_pt")
    assert p.kernels.num_rows == 191 and "aic_mac_ratio" in p.kernels.column_names  # kernels stay the CSV's
    assert p.host_ops.num_rows > 0 and p.api_calls.num_rows > 0 and p.counters.num_rows > 0
    assert p.flows.num_rows > 0
    assert pc.max(p.flows["kernel_index"]).as_py() < p.kernels.num_rows
    assert pc.max(p.flows["host_index"]).as_py() < p.host_ops.num_rows
    step = p.steps.to_pylist()[0]
    assert step["computing_ns"] == 8873756 and step["start_ns"] <= pc.min(p.kernels["start_ns"]).as_py()
