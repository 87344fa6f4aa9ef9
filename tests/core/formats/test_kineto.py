"""read_kineto on every real Kineto sample, checked against
plain json parsing; synthetic 2021 and torch_npu."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pypto_core.errors import InputError
from pypto_core.formats.kineto import device_name, read_kineto
from tests.paths import SAMPLES

KINETO = sorted(SAMPLES.glob("kineto/**/*.json*"))
HOST = {"cpu_op", "user_annotation"}
API = {"cuda_runtime", "cuda_driver"}
KERNEL = {"kernel", "gpu_memcpy", "gpu_memset"}


def load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh, parse_float=Decimal)


def abs_ns(doc: dict, ts: Decimal | int) -> int:
    """Independent conversion: µs (exact decimal) -> ns since
    the epoch, adding baseTimeNanoseconds when relative."""
    v = int(Decimal(ts) * 1000)
    base = doc.get("baseTimeNanoseconds")
    return v + base if base and v < 10**18 else v


def test_samples_found() -> None:
    # six kinds of Kineto sample; dlrm_8xv100 holds one trace per rank (8)
    assert len({p.parent for p in KINETO}) == 6 and len(KINETO) == 14, KINETO


@pytest.mark.parametrize("path", KINETO, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_kineto_matches_plain_json(path: Path) -> None:
    doc = load(path)
    ev = doc["traceEvents"]
    x = [e for e in ev if e.get("ph") == "X"]
    host = [e for e in x if e.get("cat") in HOST]
    api = [e for e in x if e.get("cat") in API]
    kern = [e for e in x if e.get("cat") in KERNEL]
    prof = read_kineto(path)
    assert prof.meta.format == "kineto"
    assert prof.meta.extra["events"] == len(ev)
    assert prof.host_ops.num_rows == len(host)
    assert prof.api_calls.num_rows == len(api)
    assert prof.kernels.num_rows == len(kern)
    assert prof.host_ops["start_ns"].to_pylist() == [abs_ns(doc, e["ts"]) for e in host]
    assert prof.kernels["start_ns"].to_pylist() == [abs_ns(doc, e["ts"]) for e in kern]
    assert prof.kernels["stream_id"].to_pylist() == [e["args"].get("stream", e["tid"]) for e in kern]
    assert prof.kernels["correlation_id"].to_pylist() == [e["args"].get("correlation") for e in kern]
    starts = [abs_ns(doc, e["ts"]) for e in host + api + kern]
    span = prof.time_span_ns()
    assert span is not None and span[0] == min(starts)
    steps = sorted(int(e["name"].split("#")[1]) for e in host if e["name"].startswith("ProfilerStep#"))
    assert sorted(prof.steps["step_id"].to_pylist()) == steps
    dist = doc.get("distributedInfo") or {}
    assert prof.meta.rank == dist.get("rank")
    # every kernel whose correlation matches a runtime call is linked to that call
    corr_to_api = {}
    for i, e in enumerate(api):
        corr_to_api.setdefault(e["args"].get("correlation"), i)
    want = {(i, corr_to_api[e["args"]["correlation"]]) for i, e in enumerate(kern)
            if e["args"].get("correlation") in corr_to_api}
    got = {(k, a) for k, a in zip(prof.flows["kernel_index"].to_pylist(),
                                  prof.flows["api_index"].to_pylist()) if a is not None}
    assert got == want


def test_a100_nccl_literal_values() -> None:
    prof = read_kineto(SAMPLES / "kineto/a100_nccl_2rank/nccl_data.json.gz")
    assert prof.meta.device == "A100"
    assert prof.meta.rank == 0
    assert prof.meta.extra["distributed"]["world_size"] == 2
    # {"cat": "cpu_op", "name": "autograd::engine::evaluate_function: DivBackward1", "ts": 4458676522690.655}
    # + baseTimeNanoseconds 1711964646000000000
    row = prof.host_ops.filter(pc.equal(prof.host_ops["name"],
                                        "autograd::engine::evaluate_function: DivBackward1"))
    assert 1711964646000000000 + 4458676522690655 in row["start_ns"].to_pylist()
    # NCCL kernels -> communication
    assert prof.communication.num_rows > 0
    assert all("nccl" in n.lower() for n in prof.communication.column("kernel_name").to_pylist())
    nccl = prof.kernels.filter(pc.match_substring(prof.kernels["name"], "ncclKernel"))
    assert set(nccl["core_type"].to_pylist()) == {"COMMUNICATION"}


def test_cpu_only_trace() -> None:
    prof = read_kineto(next(SAMPLES.glob("kineto/cpu_only/*.json.gz")))
    assert prof.kernels.num_rows == 0 and prof.host_ops.num_rows == 15
    assert prof.meta.rank == 34 and prof.meta.device is None


@pytest.mark.parametrize("name,props,want", [
    ("a100", [{"name": "NVIDIA A100-SXM4-80GB"}], "A100"),
    ("h100", [{"name": "NVIDIA H100 80GB HBM3"}], "H100"),
    ("h200", [{"name": "NVIDIA H200"}], "H200"),
    ("mi250", [{"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104}],
     "MI250"),
    ("none", [], None),
])
def test_device_names(name: str, props: list, want: str | None) -> None:
    assert device_name(props) == want


def test_mi250_sample_is_named() -> None:
    assert read_kineto(next(SAMPLES.glob("kineto/mi250_rocm/*.gz"))).meta.device == "MI250"


def write(tmp_path: Path, name: str, doc: dict) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_2021_schema(tmp_path: Path) -> None:
    # torch-tb-profiler era: cats Operator / Runtime / Kernel / Memcpy, absolute epoch µs, no distributedInfo
    doc = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 10, "tid": 10, "ts": 1621401187223005,
         "dur": 900},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 10, "tid": 10, "ts": 1621401187223100,
         "dur": 40, "args": {"External id": 7, "Input dims": [[8, 8], [8, 8]]}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
         "ts": 1621401187223110, "dur": 5, "args": {"correlation": 99, "external id": 7}},
        {"ph": "X", "cat": "Kernel", "name": "volta_sgemm_32x32", "pid": 0, "tid": "stream 7",
         "ts": 1621401187223200.5, "dur": 3.25, "args": {"correlation": 99, "external id": 7, "stream": 7,
                                                         "device": 0}},
        {"ph": "s", "cat": "async", "id": 99, "pid": 10, "tid": 10, "ts": 1621401187223110},
        {"ph": "f", "cat": "async", "id": 99, "pid": 0, "tid": "stream 7", "ts": 1621401187223200.5,
         "bp": "e"},
    ]}
    prof = read_kineto(write(tmp_path, "old.json", doc))
    assert prof.host_ops.num_rows == 2 and prof.api_calls.num_rows == 1 and prof.kernels.num_rows == 1
    k = prof.kernels.to_pylist()[0]
    assert (k["start_ns"], k["dur_ns"], k["stream_id"], k["device_id"]) == (1621401187223200500, 3250, 7, 0)
    assert prof.host_ops["input_shapes"][1].as_py() == "[[8, 8], [8, 8]]"  # the JSON text as written
    assert prof.flows.to_pylist()[0]["api_index"] == 0
    assert prof.steps["step_id"].to_pylist() == [3]


def test_torch_npu_privateuse1_export(tmp_path: Path) -> None:
    # docs/formats.md §2.8: standard Kineto object, NPU kernels with args.type, privateuse1_runtime + ac2g
    base = 1782967788000000000
    doc = {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms", "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 5, "ts": 4307764838100.001,
         "dur": 30.5, "args": {"External id": 11}},
        {"ph": "X", "cat": "privateuse1_runtime", "name": "aclnnMatmul", "pid": 5, "tid": 5,
         "ts": 4307764838110.0, "dur": 0, "args": {"correlation": 501, "External id": 11}},
        {"ph": "X", "cat": "kernel", "name": "MatMulV2_ND_ND_ND_FP32_FP32_FP32_false_true_all_66115",
         "pid": 0, "tid": 47,
         "ts": 4307764838119.042, "dur": 8.660, "args": {"streamId": 47, "type": "KERNEL_AICORE",
                                                         "correlation": 501,
                                                          "External id": 11}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "NPU"}},
    ], "baseTimeNanoseconds": base}
    prof = read_kineto(write(tmp_path, "npu.pt.trace.json", doc))
    k = prof.kernels.to_pylist()[0]
    assert k["core_type"] == "AI_CORE"
    assert k["start_ns"] == base + 4307764838119042
    assert k["stream_id"] == 47
    f = prof.flows.to_pylist()[0]
    assert (f["host_index"], f["kernel_index"], f["api_index"]) == (0, 0, 0)


def test_gz_and_plain_give_the_same_profile(tmp_path: Path) -> None:
    src = SAMPLES / "kineto/mi250_rocm/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    a, b = read_kineto(src), read_kineto(plain)
    for name in ("kernels", "host_ops", "api_calls", "flows", "steps"):
        assert a.table(name).equals(b.table(name)), name


BAD = {
    "empty.json": (b"", "empty"),
    "garbage.json.gz": (b"\x1f\x8b" + bytes(range(200)), "gzip"),
    "truncated.json.gz": (None, "truncated"),
    "truncated_plain.json": (None, "truncated"),
    "no_events.json": (b'{"schemaVersion": 1}', "traceEvents"),
    "array.json": (b'[{"ph": "X", "name": "a", "ts": "1.0"}]', "not a Kineto trace"),
    "events_not_list.json": (b'{"traceEvents": 5}', "traceEvents"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_a_named_error(tmp_path: Path, name: str) -> None:
    data, reason = BAD[name]
    src = SAMPLES / "kineto/mi250_rocm/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    if name == "truncated.json.gz":
        data = src.read_bytes()[:3000]
    elif name == "truncated_plain.json":
        data = gzip.decompress(src.read_bytes())[:20000]
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError) as err:
        read_kineto(p)
    assert str(p) in str(err.value)
    assert reason.lower() in str(err.value).lower(), str(err.value)


SMALL = json.dumps({"schemaVersion": 1, "traceEvents": load(KINETO[0])["traceEvents"][:30] if KINETO else []},
                   default=str).encode()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pos=st.integers(min_value=0, max_value=len(SMALL) - 1), junk=st.binary(min_size=0, max_size=6),
       cut=st.integers(min_value=0, max_value=len(SMALL)))
def test_mangled_kineto_gives_input_error_or_a_profile(tmp_path: Path, pos: int, junk: bytes,
                                                       cut: int) -> None:
    data = (SMALL[:pos] + junk + SMALL[pos + len(junk):])[: max(cut, 1)]
    p = tmp_path / "mangled.json"
    p.write_bytes(data)
    try:
        prof = read_kineto(p)
    except InputError as exc:
        assert str(p) in str(exc)
    else:
        assert prof.kernels.num_rows + prof.host_ops.num_rows <= 30


def _same_profile(a, b) -> None:
    for name in ("kernels", "host_ops", "api_calls", "flows", "counters", "steps", "memory", "communication"):
        assert a.table(name).equals(b.table(name)), name
    assert a.meta == b.meta


@pytest.mark.parametrize("path", KINETO, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_streamed_folder_loads_as_the_in_memory_read(path: Path, tmp_path: Path) -> None:
    """write_kineto streams the big tables into Parquet; loading the folder gives read_kineto's profile."""
    from pypto_core.formats.kineto import write_kineto
    from pypto_core.profile import Profile

    meta = write_kineto(path, tmp_path / "p")
    loaded = Profile.load(tmp_path / "p")
    _same_profile(loaded, read_kineto(path))
    assert meta == loaded.meta


def test_streamed_relative_times_get_the_base_written_after_the_events(tmp_path: Path) -> None:
    # newer traces: ts relative, baseTimeNanoseconds after traceEvents; both paths add it to every time
    from pypto_core.formats.kineto import write_kineto
    from pypto_core.profile import Profile

    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::mm{i}", "pid": 1, "tid": 1, "ts": 10 + i, "dur": 1,
               "args": {"External id": i}} for i in range(300)]
    events += [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20 + i, "dur": 0.5,
                "args": {"External id": i, "correlation": i, "stream": 7, "device": 0}} for i in range(300)]
    events.append({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 5,
                   "dur": 900})
    base = 1_700_000_000_000_000_000
    src = tmp_path / "rel.json"
    src.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": base}), encoding="utf-8")
    write_kineto(src, tmp_path / "p")
    loaded = Profile.load(tmp_path / "p")
    _same_profile(loaded, read_kineto(src))
    assert loaded.kernels["start_ns"][0].as_py() == base + 20_000
    assert loaded.host_ops["start_ns"][299].as_py() == base + 309_000
    assert loaded.steps.to_pylist()[0]["start_ns"] == base + 5_000
    assert loaded.flows.num_rows == 300 and loaded.flows["host_index"][5].as_py() == 5


def test_streamed_read_of_a_bad_file_leaves_no_folder(tmp_path: Path) -> None:
    from pypto_core.formats.kineto import write_kineto

    src = tmp_path / "cut.json"
    whole = gzip.decompress((SAMPLES / "kineto/trace_diff_pair/control.json.gz").read_bytes())
    src.write_bytes(whole[:300_000])
    with pytest.raises(InputError, match="truncated"):
        write_kineto(src, tmp_path / "p")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("on_disk", [False, True])
def test_first_rows_links_the_first_match_and_never_a_missing_id(tmp_path: Path, on_disk: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from pypto_core.formats import flow_binding
    from pypto_core.formats.flow_binding import LINK, SpillDir, link_first_rows

    monkeypatch.setattr(flow_binding, "BUCKET_ROWS", 2)  # on disk: several hash partitions and row ranges
    spills = SpillDir(tmp_path if on_disk else None)

    def links(values: list) -> flow_binding.Spill:
        rec = np.zeros(len(values), LINK)
        rec["key"] = [v or 0 for v in values]
        rec["ok"] = [v is not None for v in values]
        spill = spills.spill(LINK)
        spill.add(rec)
        return spill

    def matched(keys: list, domain: list) -> list:
        n = len(keys)
        ranges = spills.buckets(n)
        width = -(-n // ranges)
        out = [None] * n
        for part in link_first_rows(links(keys), links(domain), spills, width, ranges):
            for row, match in part.read().tolist():
                out[row] = match
        return out

    keys = [7, None, 9, 4, 3]
    assert matched(keys, [None, 7, 3, 7, None, 9]) == [1, None, 5, None, 2]
    assert matched(keys, []) == [None] * 5
    spills.remove()


def _fp8_gemm_trace(tmp_path: Path) -> Path:
    """One FP8 GEMM on an H100, as PyTorch 2.x writes it: the cpu_op aten::_scaled_mm with its Input Dims
    and Input type, the kernel linked to it by External id."""
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
           "traceEvents": [
               {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_mm", "pid": 1, "tid": 1, "ts": 1000.0,
                "dur": 50.0, "args": {"External id": 5, "Input Dims": [[4096, 8192], [8192, 8192], [], []],
                                      "Input type": ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float",
                                                     "float"]}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                "ts": 1010.0, "dur": 5.0, "args": {"correlation": 77, "External id": 5}},
               {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_qqtst_128x256_64x4_2x1_v_bz_coopB_TNT",
                "pid": 0, "tid": 7, "ts": 1100.0, "dur": 300.0,
                "args": {"correlation": 77, "External id": 5, "stream": 7, "device": 0}},
               {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 1090.0,
                "dur": 1.0, "args": {"correlation": 78, "External id": 5, "stream": 7, "device": 0}},
           ]}
    return write(tmp_path, "fp8.pt.trace.json", doc)


def test_a_kernel_takes_its_launching_ops_dtypes(tmp_path: Path) -> None:
    """Kineto records dtypes on the cpu_op only (``Input type``): the kernel takes them with the shapes, so
    an FP8 GEMM moves a byte an element and is bounded at the device's 8-bit rate (twice bf16's), not
    read as a bf16 GEMM running at half its roofline. The Memset the op issued takes neither."""
    from pypto_core.graph import OperatorCallGraph

    prof = read_kineto(_fp8_gemm_trace(tmp_path))
    by_name = {k["name"]: k for k in prof.kernels.to_pylist()}
    gemm = by_name["nvjet_sm90_qqtst_128x256_64x4_2x1_v_bz_coopB_TNT"]
    assert gemm["input_dtypes"][:2] == ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn"]
    assert gemm["input_shapes"][:2] == [[4096, 8192], [8192, 8192]]
    assert by_name["Memset (Device)"]["input_dtypes"] is None
    graph = OperatorCallGraph(prof, "H100")
    i = [k["name"] for k in prof.kernels.to_pylist()].index(gemm["name"])
    assert graph.figure("element_bytes", i) == 1
    flops = 2 * 4096 * 8192 * 8192
    assert graph.figure("flops", i) == flops
    assert graph.figure("bound_ns", i) == pytest.approx(
        max(flops / (2 * graph.sku.peak_flops_per_s()),
            graph.figure("bytes_moved", i) / graph.sku.hbm_bytes_per_s) * 1e9)
    # through a saved folder (how large traces are read) the same
    from pypto_core.formats import write_profiles
    from pypto_core.profile import Profile

    write_profiles(_fp8_gemm_trace(tmp_path), tmp_path / "saved")
    saved = Profile.load(next((tmp_path / "saved").iterdir()))
    assert saved.kernels["input_dtypes"].to_pylist() == prof.kernels["input_dtypes"].to_pylist()


@pytest.mark.parametrize("text,expected", [
    ('["c10::BFloat16", "long int", "Scalar"]', ["c10::BFloat16", "long int", "Scalar"]),
    ('[1, "float"]', ["", "float"]),
    ("not json", None),
    ("[]", None),
    ('"float"', None),
    ('["' + "x" * 500 + '"]', ["x" * 64]),
])
def test_input_type_text_is_parsed_as_untrusted(text: str, expected: list | None) -> None:
    from pypto_core.formats.launch_shapes import parse_types

    assert parse_types(text) == expected
