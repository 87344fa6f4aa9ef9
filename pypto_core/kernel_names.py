"""Kernel names a person can read: demangled, template arguments collapsed into what they tell.

A CUDA kernel's name is a C++ symbol, often kilobytes of nested templates
(``_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolution...``). ``readable`` turns it
into a short label (``cutlass conv wgrad 128x128x32 (tf32)``, ``vectorized_elementwise_kernel<…>
CUDAFunctor_add (fp32)``); the full name stays with it (``demangle`` for the C++ form). Ascend kernel
names (``aclnnAdd_AddAiCore_Add``, ``trans_TransData_0``) are already readable and pass through.

Demangling uses ``itanium_demangler`` (pure Python, pinned in requirements.txt; no ``c++filt`` process on
a server). Its parser recurses, so input is bounded: symbols longer than ``MAX_MANGLED`` are left as they
are, and a symbol it cannot parse is returned unchanged.
"""

from __future__ import annotations

import re
from functools import lru_cache

MAX_MANGLED = 8192  # longer "symbols" are not demangled (bounded work on untrusted names)
MAX_LABEL = 120  # characters of a readable label

# dtype words in template arguments and CUDA kernel names -> the short names engineers use
_DTYPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"tfloat32|tf32"), "tf32"),
    (re.compile(r"bfloat16|BFloat16|nv_bfloat16|bf16"), "bf16"),
    (re.compile(r"\bhalf\b|__half|\bHalf\b|float16|fp16|\bh\d{3,5}gemm"), "fp16"),
    (re.compile(r"float_e4m3|e4m3|fp8"), "fp8"),
    (re.compile(r"\bdouble\b|\bd\d{3,5}gemm|dgemm"), "fp64"),
    (re.compile(r"int8_t|\bint8\b|signed char|\bi\d{3,5}gemm"), "int8"),
    (re.compile(r"\bfloat\b|\bs\d{3,5}gemm|sgemm|scudnn|_f32\b"), "fp32"),
)
# CUTLASS / cuDNN / cuBLAS kernels named by their tile: the tile and the kind of op are what matter
_CUTLASS_TOKEN = re.compile(r"cutlass_(?:\d+_)?(?:tensorop|simt|wmma)_(\w?\d*)(gemm|fprop|dgrad|wgrad)_(\w+)")
_TILE = re.compile(r"(?<![x\d])(\d+x\d+)(?![x\d])")
_LAYOUT = re.compile(r"_(nn|nt|tn|tt)(?:_|$)")
_CUTLASS_CONV = re.compile(r"ImplicitGemmConvolution")
_CONV_KIND = re.compile(r"(Fprop|Dgrad|Wgrad)", re.I)
_GEMM_SHAPE = re.compile(r"GemmShape<\(int\)(\d+), \(int\)(\d+), \(int\)(\d+)>")
_XMMA = re.compile(r"^sm(\d+)_xmma_(fprop|dgrad|wgrad|gemm)_\w*?_?(?:implicit_gemm)?\w*?_"
                   r"(tf32|f16|bf16|f32|i8)\w*?"
                   r"tilesize(\d+x\d+x\d+)")
_BLAS_GEMM = re.compile(r"^(ampere|volta|turing|sm\d+|hopper)_(s|h|d|bf16|i8)?gemm_(\d+x\d+)\w*?"
                        r"(?:_(nn|nt|tn|tt))?$")
_BLAS_DTYPES = {"s": "fp32", "h": "fp16", "d": "fp64", "bf16": "bf16", "i8": "int8"}
_SCUDNN = re.compile(r"(\w+?)_(s|h)cudnn_(\d+x\d+)")
_NCCL = re.compile(r"^ncclKernel_(\w+?)_(RING|TREE|COLLNET\w*|NVLS\w*)_(LL128|LL|SIMPLE)_(\w+?)_(\w+)\(")
_CPP_NAME = re.compile(r"^[A-Za-z_][\w:]*(<|$)")
# what an elementwise/reduce kernel computes, most telling first (a functor names the op, ReduceOp a kind)
_FUNCTORS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"\b([A-Za-z_]\w*Functor\w*)\b", r"\b([A-Za-z_]\w*_functor)\b", r"\b([A-Za-z_]\w*Ops)\b",
    r"\b([A-Za-z_]\w*_kernel_cuda)\b", r"\b([A-Za-z_]\w*_kernel_impl)\b", r"\b([A-Za-z_]\w*Op)\b"))


@lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """The C++ form of an Itanium-mangled symbol (``_Z...``); any other name unchanged."""
    if not name.startswith("_Z") or len(name) > MAX_MANGLED:
        return name
    try:
        from itanium_demangler import parse
    except ImportError:  # pragma: no cover - declared in requirements.txt
        return name
    try:
        node = parse(name)
    except (RecursionError, ValueError, KeyError, IndexError, NotImplementedError, AttributeError, TypeError):
        return name
    return name if node is None else str(node)


def dtype_of(text: str) -> str | None:
    for pattern, short in _DTYPES:
        if pattern.search(text):
            return short
    return None


def _strip_params(text: str) -> str:
    """``void f<...>(args)`` -> ``f<...>``: the return type and the parameter list go."""
    text = re.sub(r"^(void|int|float)\s+", "", text.strip())
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            return text[:i]
    return text


def _collapse_templates(text: str) -> tuple[str, str]:
    """(the name with its template arguments as ``<…>``, the arguments' text)."""
    out, args, depth = [], [], 0
    for ch in text:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
            if depth > 1:
                args.append(ch)
        elif ch == ">" and depth > 0:
            depth -= 1
            if depth > 0:
                args.append(ch)
            else:
                args.append(" ")
        elif depth:
            args.append(ch)
        else:
            out.append(ch)
    return "".join(out), "".join(args)


def _short(qualified: str) -> str:
    """Drop namespaces, keep the last component (``at::native::(anonymous namespace)::f<…>`` -> ``f<…>``)."""
    depth, cut = 0, 0
    for i, ch in enumerate(qualified):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == ":" and depth == 0 and qualified[i:i + 2] == "::":
            cut = i + 2
    return qualified[cut:] or qualified


def _with_dtype(label: str, dtype: str | None) -> str:
    return f"{label} ({dtype})" if dtype else label


@lru_cache(maxsize=8192)
def readable(name: str) -> str:
    """A short label for a kernel name (see the module docstring); at most ``MAX_LABEL`` characters."""
    full = demangle(name or "").replace("(anonymous namespace)::", "").strip()
    return _bounded(_label(full))


def _bounded(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[:MAX_LABEL - 1] + "…"


def _label(full: str) -> str:
    m = _NCCL.search(full)
    if m:
        return f"NCCL {m.group(1)} {m.group(2).lower()} {m.group(3)} ({dtype_of(m.group(5)) or m.group(5)})"
    if full.startswith(("Memcpy", "Memset", "memcpy", "memset")):
        return full
    m = _CUTLASS_TOKEN.search(full)
    if m:
        tile, layout = _TILE.search(m.group(3)), _LAYOUT.search(m.group(3))
        op = "gemm" if m.group(2) == "gemm" else f"conv {m.group(2)}"
        label = f"cutlass {op} {tile.group(1) if tile else ''}{' ' + layout.group(1) if layout else ''}"
        return _with_dtype(" ".join(label.split()), _gemm_dtype(m.group(1)) or dtype_of(m.group(3)))
    if _CUTLASS_CONV.search(full):
        kind = _CONV_KIND.search(full)
        shape = _GEMM_SHAPE.search(full)
        tile_text = "x".join(shape.groups()) if shape else ""
        label = f"cutlass conv {kind.group(1).lower() if kind else ''} {tile_text}"
        return _with_dtype(" ".join(label.split()), dtype_of(full))
    m = _XMMA.search(full)
    if m:
        dtype = {"f16": "fp16", "f32": "fp32", "i8": "int8"}.get(m.group(3), m.group(3))
        op = "gemm" if m.group(2) == "gemm" else f"conv {m.group(2)}"
        return f"cuDNN {op} {m.group(4)} ({dtype})"
    m = _BLAS_GEMM.search(full)
    if m:
        blas_dtype = _BLAS_DTYPES.get(m.group(2) or "s")
        order = f" {m.group(4)}" if m.group(4) else ""
        return f"cuBLAS gemm {m.group(3)}{order} ({blas_dtype})"
    m = _SCUDNN.search(full)
    if m:
        return f"cuDNN {m.group(1)} {m.group(3)} ({'fp32' if m.group(2) == 's' else 'fp16'})"
    if "<" not in full and "(" not in full:
        return full  # a plain name (Ascend kernels, memcpy): already readable
    head = _strip_params(full)
    if not _CPP_NAME.match(head):
        return full  # not a C++ function signature: shown as it is (escaped by whoever prints it)
    collapsed, args = _collapse_templates(head)
    label = _short(collapsed)
    hint = next((f for p in _FUNCTORS for f in p.findall(args) if f not in label), None)
    if hint:
        label = f"{label} {hint}"
    return _with_dtype(label, dtype_of(args) or dtype_of(full[len(head):]))


def _gemm_dtype(prefix: str) -> str | None:
    """CUTLASS's instruction prefix: s1688 (TF32 tensor op, fp32 data), h16816 (fp16), i8816 (int8)..."""
    if not prefix:
        return None
    if prefix.startswith("s") and len(prefix) > 1:
        return "tf32"  # sm80 tensor-op SGEMM runs TF32 math
    return {"h": "fp16", "i": "int8", "d": "fp64", "b": "bf16", "s": "fp32"}.get(prefix[0])
