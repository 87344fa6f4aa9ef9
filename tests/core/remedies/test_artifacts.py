"""Artifacts: names per rule, metadata, the zip bundle,
and untrusted profile text kept out of generated code."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import zipfile

import pytest

from pypto_core.remedies import bundle_zip, generate_artifacts, generators
from pypto_core.remedies.safe_text import comment_text, py_literal, safe_filename
from pypto_core.rules.finding import Report

from .conftest import HOSTILE_NAME, PROFILE_META, make_finding

EXPECTED = {
    "matmul_tiling": ["aoe_tune_ops.json", "aoe_tune.sh", "aoe_singleop.json",
                      "matmul_weight_format_patch.py"],
    "kv_cache_layout": ["kv_cache_layout_patch.py"],
    "attention_memory_bound": ["fused_attention_patch.py"],
    "norm_launch_overhead": ["norm_fusion_patch.py"],
}


def test_every_seed_rule_has_a_generator_with_the_agreed_file_names() -> None:
    assert set(EXPECTED) <= set(generators())
    for rule, names in EXPECTED.items():
        artifacts = generate_artifacts([make_finding(rule)], profile_meta=PROFILE_META)
        assert [a.name for a in artifacts] == names
        assert all(a.rule == rule and a.size == len(a.content) for a in artifacts)
        assert all(a.sha256 == hashlib.sha256(a.content).hexdigest() for a in artifacts)


def test_report_input_uses_the_report_profile_and_unknown_rules_give_nothing() -> None:
    report = Report(profile=PROFILE_META, findings=[make_finding("norm_launch_overhead"),
                                                    make_finding("kv_cache_layout")])
    report.findings.append(make_finding("norm_launch_overhead"))
    artifacts = generate_artifacts(report)
    assert [a.name for a in artifacts] == ["norm_fusion_patch.py", "kv_cache_layout_patch.py",
                                           "norm_fusion_patch_2.py"]
    assert "910B3" in artifacts[0].text() and artifacts[0].header["profile"]["device"] == "910B3"
    other = make_finding("norm_launch_overhead")
    other.rule = "some_other_rule"
    assert generate_artifacts([other], profile_meta=None) == []


def test_every_generated_python_file_compiles_and_carries_its_header() -> None:
    findings = [make_finding(rule) for rule in EXPECTED]
    for artifact in generate_artifacts(findings, profile_meta=PROFILE_META):
        text = artifact.text()
        assert "pypto compare OLD_PROFILE NEW_PROFILE" in text or artifact.kind == "config"
        if artifact.name.endswith(".py"):
            compile(text, artifact.name, "exec")
            assert f"Finding: {artifact.rule} (high)" in text
            assert "llama2_7b_decode_ascend_pt" in text and "SIMULATED" in text
            assert "1200.0 us" in text
    assert artifact.media_type.startswith("text/x-python")


def test_bundle_zip_holds_every_artifact_and_a_manifest_and_is_reproducible() -> None:
    artifacts = generate_artifacts([make_finding(rule) for rule in EXPECTED], profile_meta=PROFILE_META)
    blob = bundle_zip(artifacts)
    assert blob == bundle_zip(artifacts)  # fixed timestamps: same analysis, same sha256
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        manifest = json.loads(zf.read("MANIFEST.json"))
        for artifact in artifacts:
            assert zf.read(artifact.name) == artifact.content
        assert zf.getinfo("aoe_tune.sh").external_attr >> 16 == 0o755
    assert [m["sha256"] for m in manifest] == [a.sha256 for a in artifacts]
    with pytest.raises(ValueError):
        bundle_zip(artifacts + artifacts[:1])


def _strings_and_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return strings, names


@pytest.mark.parametrize("rule", list(EXPECTED))
def test_hostile_op_names_stay_data(rule: str) -> None:
    """An op name with quotes, newlines and triple quotes must not change the program, only a literal."""
    hostile_ops = [{"name": HOSTILE_NAME, "op_type": 'MatMulV2"""\nx=1', "input_shapes": [[1, 64], [64, 96]],
                    "count": 1}]
    meta = dict(PROFILE_META, source="prof\n import os\r\u2028", device='9"""10B')
    plain = generate_artifacts([make_finding(rule)], profile_meta=PROFILE_META)
    hostile = generate_artifacts([make_finding(rule, ops=hostile_ops)], profile_meta=meta)
    assert plain and [a.name for a in hostile] == [a.name for a in plain]  # hostile names drop no artifact
    for before, after in zip(plain, hostile):
        if after.name.endswith(".py"):
            tree_before, tree_after = ast.parse(before.text()), ast.parse(after.text())
            _, names_before = _strings_and_names(tree_before)
            strings_after, names_after = _strings_and_names(tree_after)
            assert names_after == names_before  # no new identifiers: nothing was injected as code
            assert HOSTILE_NAME in strings_after  # the name survives as an exact literal
            assert [type(n).__name__ for n in tree_before.body] == [type(n).__name__ for n in tree_after.body]
        elif after.name == "aoe_tune_ops.json":
            assert json.loads(after.text())["tune_ops_name"] == [HOSTILE_NAME]
        elif after.name.endswith(".json"):
            assert json.loads(after.text())[0]["op"] == 'MatMulV2"""\nx=1'  # JSON escapes it
        for line in after.text().split("\n"):
            if line.startswith("#"):
                assert "\r" not in line and "\u2028" not in line


@pytest.mark.parametrize("rule", ["kv_cache_layout", "matmul_tiling"])
def test_op_name_spelling_a_placeholder_stays_text(rule: str) -> None:
    """Placeholders are filled in one pass: ``__MAX_CACHE_LEN__`` inside an op name is not filled in again."""
    name = "x__MAX_CACHE_LEN____WEIGHT_SHAPES__y"
    ops = [{"name": name, "op_type": "MatMulV2", "input_shapes": [[1, 64], [64, 96]], "count": 1}]
    patch = next(a for a in generate_artifacts([make_finding(rule, ops=ops)], profile_meta=PROFILE_META)
                 if a.kind == "patch")
    assert name in _strings_and_names(ast.parse(patch.text()))[0]


def test_safe_text_helpers() -> None:
    assert comment_text("a\nb\rc\u2028d\x85e\x00") == "a?b?c?d?e?"
    assert len(comment_text("x" * 1000)) == 300
    assert py_literal([("a'\"\n", 3)]) == repr([("a'\"\n", 3)])
    with pytest.raises(TypeError):
        py_literal(object())
    assert safe_filename("../../etc/modeling_llama.py", "m.py") == "modeling_llama.py"
    assert safe_filename("bad name;rm.py", "m.py") == "m.py"
    assert safe_filename(None, "m.py") == "m.py"
