"""Artifacts carry the evidence of their finding (issue 18), on every planted simulated case: each header and
the bundle's MANIFEST name the shapes, dtypes, formats, counts and times the finding lists, the AOE single-op
file holds exactly the flagged MatMul shapes, the name list only names no other shape carries, and nothing
names a path of the machine that made it or cuts a word."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest

from pypto_core import formats, synth
from pypto_core.remedies import bundle_zip, generate_artifacts
from pypto_core.rules import diagnose

PLANTED = ("matmul_tiling", "attention_memory_bound", "kv_cache_layout", "norm_launch_overhead")
CASES = [(rule, "ascend_pt") for rule in PLANTED] + [("matmul_tiling", "msprof")]


def _shape_text(shapes: list[list[int]]) -> str:
    return " x ".join(str(list(s)) for s in shapes)


@pytest.mark.parametrize("rule,layout", CASES)
def test_artifacts_name_the_flagged_shapes(tmp_path, rule: str, layout: str) -> None:
    run = synth.synthesize_run(tmp_path / "prof", tokens=2, prompt_tokens=32, layout=layout,
                               fixed=frozenset(PLANTED) - {rule})
    report = diagnose(formats.open_profile(run.path))
    (finding,) = [f for f in report.findings if f.rule == rule]
    groups = finding.details["ops"]
    assert groups and all(g["input_shapes"] and g["count"] > 0 and g["total_us"] > 0 and g["names"]
                          and g["input_dtypes"] and g["input_formats"] for g in groups)
    listed = [_shape_text(g["input_shapes"]) for g in groups[:20]]
    if rule == "matmul_tiling":  # the shapes the page lists are the ones the remedies target
        page = {s["input_shapes"] for s in finding.details["shapes"]}
        assert page == {";".join(",".join(map(str, d)) for d in g["input_shapes"]) for g in groups}
    artifacts = generate_artifacts([finding], profile_meta=report.profile)
    assert artifacts
    manifest = {e["name"]: e for e in json.loads(
        zipfile.ZipFile(io.BytesIO(bundle_zip(artifacts))).read("MANIFEST.json"))}
    for a in artifacts:
        header = manifest[a.name]["header"]
        assert [_shape_text(o["input_shapes"]) for o in header["ops"]] == listed
        keys = ("count", "total_us", "input_dtypes", "input_formats")
        assert [tuple(o[k] for k in keys) for o in header["ops"]] == [
            tuple(g[k] for k in keys) for g in groups[:20]]
        assert header["finding"]["rule"] == rule and header["finding"]["title"] == finding.title
        assert header["profile"]["name"] == run.path.name and "source" not in header["profile"]
        text = a.text()
        assert str(tmp_path) not in text and str(tmp_path) not in json.dumps(header)
        if a.name.endswith((".py", ".sh")):
            comments = "\n".join(line for line in text.split("\n") if line.startswith("#"))
            flat = " ".join(line.lstrip("# ").strip() for line in comments.split("\n"))
            for shape in listed:
                assert shape in flat, (a.name, shape)
            assert finding.saving_model in flat.replace("  ", " ")  # whole, never cut mid-word
            assert "shapes unknown" not in comments and not re.search(r"\w(\.\.\.|…)(\s|$)", comments)
    if rule == "matmul_tiling":
        by_name = {a.name: a for a in artifacts}
        singleop = json.loads(by_name["aoe_singleop.json"].content)
        assert sorted(_shape_text([d["shape"] for d in e["input_desc"]]) for e in singleop) == sorted(
            _shape_text(g["input_shapes"]) for g in groups)
        names = json.loads(by_name["aoe_tune_ops.json"].content).get("tune_ops_name", [])
        exclusive = {n for g in groups for n in g["names"] if n not in g["shared_names"]}
        assert set(names) == exclusive
        assert "tune_ops_type" not in json.loads(by_name["aoe_tune_ops.json"].content)
