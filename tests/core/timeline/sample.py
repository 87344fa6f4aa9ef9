"""A small hand-made profile with known nesting, flows, gaps and counters, for the timeline tests."""

import pyarrow as pa

from pypto_core.profile import Profile, ProfileMeta

BASE = 1_736_408_883_688_177_930  # absolute ns, above 2**53 like real profiles


def sample_profile() -> Profile:
    # Host thread 7: forward [0, 1000) containing linear [100, 400) containing matmul [150, 350); then norm.
    host = pa.table({
        "name": ["forward", "aten::linear", "aten::matmul", "aten::rms_norm", "<script>alert(1)</script>"],
        "pid": [100, 100, 100, 100, 100],
        "tid": [7, 7, 7, 7, 8],
        "start_ns": [BASE + t for t in (0, 100, 150, 500, 0)],
        "dur_ns": [1000, 300, 200, 100, 50],
        "correlation_id": [1, 2, 3, 4, 5],
    })
    # Stream 2: one long MatMul, then 1000 one-ns vector kernels 2 ns apart, then a gap, then one more.
    names = ["MatMulV2"] + ["Add"] * 1000 + ["RmsNorm"]
    starts = [200] + [2000 + 2 * i for i in range(1000)] + [10_000]
    durs = [800] + [1] * 1000 + [300]
    kernels = pa.table({
        "name": names, "op_type": names, "core_type": ["AI_CORE"] * len(names),
        "stream_id": [2] * len(names), "device_id": [0] * len(names),
        "start_ns": [BASE + s for s in starts], "dur_ns": durs,
        "block_dim": [24] * len(names),
    })
    flows = pa.table({"host_index": [2, 3], "kernel_index": [0, 1001], "kind": ["async_npu", "async_npu"]})
    counters = pa.table({"track": ["AI Core freq (MHz)"] * 3, "ts_ns": [BASE, BASE + 5000, BASE + 9000],
                         "value": [1800.0, 1650.0, 1800.0]})
    api = pa.table({"name": ["aclnnMatmul"], "level": ["acl"], "pid": [100], "tid": [7],
                    "start_ns": [BASE + 160], "dur_ns": [40]})
    return Profile(meta=ProfileMeta(format="ascend_pt", source="sample"), host_ops=host, kernels=kernels,
                   flows=flows, counters=counters, api_calls=api)
