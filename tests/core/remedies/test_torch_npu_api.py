"""Every torch_npu call in every generated file resolves against the real torch-npu API (name list from the
2.13.0 wheel, see scripts/extract_torch_npu_names.py), and the CPU test double has the same signatures."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from pypto_core.remedies import generate_artifacts

from .conftest import PROFILE_META, make_finding

NAMES_FILE = Path(__file__).resolve().parents[3] / "pypto_core" / "remedies" / "torch_npu_api_names.txt"
RULES = ("matmul_tiling", "kv_cache_layout", "attention_memory_bound", "norm_launch_overhead")


def real_api() -> dict[str, tuple[list[str], list[str]] | None]:
    """'npu_rms_norm' -> (positional, keyword-only) parameter names, or None when only the name is known."""
    api: dict[str, tuple[list[str], list[str]] | None] = {}
    for line in NAMES_FILE.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = re.fullmatch(r"torch_npu\.([\w.]+)(?:\((.*)\))?", line)
        assert match, line
        if match.group(2) is None:
            api[match.group(1)] = None
            continue
        params = [p.strip() for p in match.group(2).split(",") if p.strip()]
        star = params.index("*") if "*" in params else len(params)
        api[match.group(1)] = (params[:star], params[star + 1:])
    return api


def torch_npu_calls(source: str) -> list[ast.Call]:
    calls = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            dotted = ast.unparse(node.func)
            if dotted.startswith("torch_npu."):
                calls.append(node)
    return calls


def python_sources() -> dict[str, str]:
    sources = {}
    artifacts = generate_artifacts([make_finding(rule) for rule in RULES], profile_meta=PROFILE_META)
    for artifact in artifacts:
        if artifact.name.endswith(".py"):
            sources[artifact.name] = artifact.text()
        elif artifact.name.endswith(".sh"):  # the embedded python of the AOE script
            sources[artifact.name] = re.search(r"<<'PY'\n(.*?)\nPY\n", artifact.text(), re.S).group(1)
    return sources


def test_the_name_list_is_the_real_wheel_list() -> None:
    api = real_api()
    assert NAMES_FILE.read_text().startswith("# torch_npu public API names, extracted from torch_npu-2.13.0")
    assert len(api) > 300
    assert "npu.set_aoe" in api and "npu_fused_infer_attention_score" in api
    assert "ACL_OP_TUNER_CONFIG" not in NAMES_FILE.read_text() and "op_tuning_runner" not in api


@pytest.mark.parametrize("name", sorted(python_sources()))
def test_generated_torch_npu_calls_exist_with_those_arguments(name: str) -> None:
    api = real_api()
    calls = torch_npu_calls(python_sources()[name])
    assert calls, f"{name} calls no torch_npu API"
    for call in calls:
        function = ast.unparse(call.func).removeprefix("torch_npu.")
        assert function in api, f"{name}: torch_npu.{function} is not in torch-npu 2.13.0"
        if api[function] is None:
            continue
        positional, keyword_only = api[function]
        assert len(call.args) <= len(positional), f"{name}: too many positional arguments to {function}"
        for kw in call.keywords:
            assert kw.arg in positional + keyword_only, f"{name}: {function} has no argument {kw.arg!r}"


def test_the_test_double_has_the_real_signatures(fake_torch_npu) -> None:
    api = real_api()
    used = {ast.unparse(c.func).removeprefix("torch_npu.") for src in python_sources().values()
            for c in torch_npu_calls(src)}
    for function in sorted(used):
        target = fake_torch_npu
        for part in function.split("."):
            target = getattr(target, part)
        # meta file names its parameters differently
        if api[function] is None or function == "npu_rotary_mul":
            continue
        params = inspect.signature(target).parameters.values()
        fake_keyword = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
        fake_positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        positional, keyword_only = api[function]
        assert len(fake_positional) == len(positional), function
        assert sorted(fake_keyword) == sorted(keyword_only), function
