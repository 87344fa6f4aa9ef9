"""Readable kernel names (issue 22): demangled, template arguments collapsed, bounded."""

from __future__ import annotations

import gzip
import json

import pytest

from pypto_core.kernel_names import MAX_LABEL, MAX_MANGLED, demangle, readable
from tests.paths import SAMPLES

GPU = SAMPLES / "kineto" / "a100_nccl_2rank" / "nccl_data.json.gz"


def _mangled_names() -> list[str]:
    events = json.load(gzip.open(GPU))["traceEvents"]
    return sorted({e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("_Z")})


@pytest.mark.parametrize("name, label", [
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>"
     "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4::Params)", "cutlass gemm 256x64 nn (tf32)"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
     "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer", "cuDNN conv fprop 128x128x16 (tf32)"),
    ("ampere_sgemm_32x128_nt", "cuBLAS gemm 32x128 nt (fp32)"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "NCCL AllReduce ring LL (fp32)"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "vectorized_elementwise_kernel<…> CUDAFunctor_add (fp32)"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)",
     "max_pool_forward_nchw<…> (fp32)"),
    ("void cudnn::bn_fw_tr_1C11_singleread<__half, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<__half>)",
     "bn_fw_tr_1C11_singleread<…> (fp16)"),
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)"),
    ("aclnnAdd_AddAiCore_Add", "aclnnAdd_AddAiCore_Add"),  # Ascend names are readable already
    # not C++: untouched, escaped by the exporter
    ("=HYPERLINK(\"x\")|<script>", "=HYPERLINK(\"x\")|<script>"),
])
def test_readable_labels(name: str, label: str) -> None:
    assert readable(name) == label


@pytest.mark.skipif(not GPU.exists(), reason="the real samples (../shared/samples) are not here")
def test_real_mangled_cutlass_convs_are_demangled_and_collapsed() -> None:
    names = _mangled_names()
    assert len(names) == 2  # the A100 sample's two cuDNN-train CUTLASS wgrad kernels
    labels = set()
    for name in names:
        full = demangle(name)
        assert full.startswith(
            "void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::conv::kernel::ImplicitGemm")
        labels.add(readable(name))
    assert labels == {"cutlass conv wgrad 128x128x32 (tf32)", "cutlass conv wgrad 64x128x32 (tf32)"}


def test_bounded_on_untrusted_input() -> None:
    huge = "_ZN" + "3foo" * (MAX_MANGLED // 4 + 10) + "Ev"
    assert demangle(huge) == huge  # too long to parse: left as it is
    assert demangle("_Zgarbage!!") == "_Zgarbage!!"  # unparseable: unchanged
    nested = "_Z1fI" + "N1a1bIL" * 2000 + "E"
    assert demangle(nested) == nested  # recursion bounded by the length guard or the parser's own error
    long_cpp = "void ns::k<" + ", ".join(["float"] * 500) + ">(int)"
    assert len(readable(long_cpp)) <= MAX_LABEL
    assert len(readable("x" * 5000)) <= MAX_LABEL
