"""Engine text in English and Simplified Chinese (pypto_core.i18n, issue 18): every template has a
translation with the same fields, the compiled catalog matches its source, and a report rendered in
zh-Hans has Chinese titles and descriptions with the same ids and numbers as in English, on the demo and on
every real sample."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from pypto_core import synth
from pypto_core.cli import main
from pypto_core.i18n import msg, normalize_language, pick_language, render
from pypto_core.i18n.catalog import DOMAIN, LOCALE_DIR, LOCALE_NAMES, translations
from pypto_core.i18n.catalog_tools import extract_templates, fields, read_po
from pypto_core.rules.evidence_labels import EVIDENCE_LABELS, evidence_label, evidence_rows
from pypto_core.rules.finding import TEXT_FIELDS, localize_finding
from tests.paths import MISSING_SAMPLES, SAMPLES

CJK = re.compile(r"[\u4e00-\u9fff]")
# one input per real sample set (multi-rank folders open as one group)
REAL_SAMPLES = [
    "ascend_pt/qwen3_0.6b_train_4npu_level2", "ascend_pt/cnn_8npu_text_level0/rank0_ascend_pt",
    "ascend_pt/cnn_8npu_text_level1/rank0_ascend_pt", "ascend_pt/cnn_8npu_text_level2/rank0_ascend_pt",
    "ascend_pt/cnn_8npu_db_level0/rank0_ascend_pt", "ascend_pt/cnn_8npu_db_level1/rank0_ascend_pt",
    "ascend_pt/trimmed_2023_memoryl0", "ascend_pt/llm_matmul_pipeutil_2025/kernel_details.csv",
    "ascend_pt/llm_arithutil_2023/kernel_details.csv", "ascend_pt/timeline_2024/trace_view.json",
    "ascend_pt/level0_excerpt/kernel_details.csv", "msprof/db_8npu_2023/msprof_0.db",
    "kineto/a100_nccl_2rank/nccl_data.json.gz", "kineto/trace_diff_pair/control.json.gz",
    "kineto/trace_diff_pair/test.json.gz", "kineto/cpu_only", "kineto/mi250_rocm", "kineto/triton",
    "kineto/dlrm_8xv100",
]


def _po(language: str) -> dict:
    return read_po(LOCALE_DIR / LOCALE_NAMES[language] / "LC_MESSAGES" / f"{DOMAIN}.po")


@pytest.mark.parametrize("language", sorted(LOCALE_NAMES))
def test_every_message_has_a_translation_with_the_same_fields(language: str) -> None:
    templates = extract_templates()
    assert len(templates) > 100, "the rules' titles, descriptions and saving models are templates"
    entries = _po(language)
    missing = [t for t in templates if t not in entries or not entries[t].msgstr]
    assert not missing, f"untranslated (run scripts/engine_messages.py, then translate): {missing[:5]}"
    for template in templates:
        assert fields(entries[template].msgstr) == fields(template), template
    stale = set(entries) - set(templates)
    assert not stale, f"the catalog keeps messages no longer in the source: {sorted(stale)[:5]}"


@pytest.mark.parametrize("language", sorted(LOCALE_NAMES))
def test_the_compiled_catalog_is_its_source(language: str) -> None:
    catalog = translations(language)._catalog  # what gettext reads from the .mo
    for msgid, entry in _po(language).items():
        assert catalog.get(msgid) == entry.msgstr, f"stale .mo for {msgid!r}: run scripts/engine_messages.py"


def test_language_names() -> None:
    assert normalize_language("zh-hans") == normalize_language("zh_CN") == "zh-Hans"
    assert normalize_language("fr") is None and normalize_language("EN-gb") == "en"
    assert pick_language(None, accept_language="fr;q=1, zh-CN;q=0.8, en;q=0.5") == "zh-Hans"
    assert pick_language("en", accept_language="zh-Hans") == "en"
    assert pick_language(None, accept_language="de") == "en"


def test_nested_messages_and_data_params() -> None:
    inner = msg("the collectives move data {pct:.1f}% of their time", pct=12.345)
    outer = msg("Communication not overlapped is {pct:.0f}% of the step, and {moved}", pct=40.2, moved=inner)
    assert render(outer) == ("Communication not overlapped is 40% of the step, and the collectives move data "
                             "12.3% of their time")
    zh = render(outer, "zh-Hans")
    assert CJK.search(zh) and "40%" in zh and "12.3%" in zh
    op_name = "aclnnMatmul_MatMulCommon_MatMulV2"  # data: never translated
    assert op_name in render(msg("The host blocks in {names} while the device has nothing queued: each sync "
                                 "drains the launch queue, so the device waits for the host to issue again. "
                                 "{advice}", names=op_name, advice=""), "zh-Hans")


def _numbers(finding: dict) -> dict:
    return {k: v for k, v in finding.items() if k not in TEXT_FIELDS}


def _analyze(path: Path, language: str, capsys) -> dict:
    assert main(["analyze", str(path), "--format", "json", "--lang", language]) == 0
    return json.loads(capsys.readouterr().out)


def _assert_chinese_and_same(path: Path, capsys) -> int:
    en = _analyze(path, "en", capsys)
    zh = _analyze(path, "zh-Hans", capsys)
    assert [_numbers(f) for f in zh["findings"]] == [_numbers(f) for f in en["findings"]]
    for f_en, f_zh in zip(en["findings"], zh["findings"]):
        for name in ("title", "description", "saving_model"):
            assert CJK.search(f_zh[name]), (f_zh["rule"], name, f_zh[name])
            assert localize_finding(f_en, "zh-Hans")[name] == f_zh[name]
        for key in f_en["evidence"]:  # every evidence key the rule emitted has words in both languages
            assert evidence_label(key, "en") != key and CJK.search(evidence_label(key, "zh-Hans")), key
    # the diagnosis's own warnings (an assumed device, an unknown workload) in the language too; a reader's
    # plain-text warning (no stored message) stays as it is
    assert len(zh["warnings"]) == len(en["warnings"])
    for w_en, w_zh, stored in zip(en["warnings"], zh["warnings"], en["warning_messages"]):
        assert bool(CJK.search(w_zh)) == (stored is not None) and (w_zh == w_en) == (stored is None), w_zh
    return len(zh["findings"])


def test_demo_findings_in_chinese_with_the_same_ids_and_numbers(tmp_path: Path, capsys) -> None:
    run = synth.synthesize_run(tmp_path / "demo", tokens=2, prompt_tokens=32)
    assert _assert_chinese_and_same(run.path, capsys) >= 4


@pytest.mark.parametrize("sample", REAL_SAMPLES)
def test_every_real_sample_in_chinese(sample: str, capsys) -> None:
    path = SAMPLES / sample
    if not path.exists():  # pragma: no cover
        pytest.skip(MISSING_SAMPLES)
    _assert_chinese_and_same(path, capsys)


def test_markdown_report_labels_in_chinese(tmp_path: Path, capsys) -> None:
    run = synth.synthesize_run(tmp_path / "demo", tokens=2, prompt_tokens=32)
    assert main(["analyze", str(run.path), "--format", "md", "--lang", "zh-Hans"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# PyPTO 分析报告") and "## 问题（" in text and "节省模型：" in text
    assert main(["analyze", str(run.path), "--lang", "xx"]) == 1


def _literal_evidence_keys() -> dict[str, str]:
    """{key: rule file} for every constant key of an ``evidence`` dict written in the rules' source."""
    keys: dict[str, str] = {}

    def take(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant):
                    keys[k.value] = where
                elif k is None:  # **{...}
                    take(v, where)

    for path in sorted((Path(evidence_label.__code__.co_filename).parent).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "evidence":
                take(node.value, path.name)
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", None)
                                                      == "evidence" for t in node.targets):
                take(node.value, path.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if (isinstance(t, ast.Subscript) and getattr(t.value, "id", None) == "evidence"
                            and isinstance(t.slice, ast.Constant)):
                        keys[t.slice.value] = path.name
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr
                  == "update" and getattr(node.func.value, "id", None) == "evidence"):
                for arg in node.args:
                    take(arg, path.name)
    return keys


def test_every_evidence_key_has_a_label_in_both_languages() -> None:
    keys = _literal_evidence_keys()
    assert len(keys) > 80 and "flagged_time_us" in keys
    missing = {k: where for k, where in keys.items() if k not in EVIDENCE_LABELS}
    assert not missing, f"add a label in pypto_core/rules/evidence_labels.py: {missing}"
    for key in keys:
        assert CJK.search(evidence_label(key, "zh-Hans")), key
    # keys built from data, and the fallback
    assert evidence_label("rank_3_computing_us") == "Rank 3: computing time (µs)"
    assert evidence_label("rank_3_computing_us", "zh-Hans") == "Rank 3：计算时间 (µs)"
    assert evidence_label("communication_gap_vs_mean", "zh-Hans") == "通信时间高出均值的幅度"
    assert evidence_label("free_spread_vs_step", "zh-Hans") == "各 Rank 之间空闲时间的差距占迭代时间的比例"
    assert evidence_label("spread_vs_step", "zh-Hans") == "各 Rank 之间的差距占迭代时间的比例"
    assert evidence_label("not_a_known_key", "zh-Hans") == "not_a_known_key"
    rows = evidence_rows({"kind": "computing", "flagged_time_us": 12.5, "op": "computing_x"}, "zh-Hans")
    assert rows == [{"key": "flagged_time_us", "label": "被标记算子的耗时 (µs)", "value": 12.5},
                    {"key": "kind", "label": "类型", "value": "计算"},
                    {"key": "op", "label": "op", "value": "computing_x"}]  # data is never translated


def test_reports_print_evidence_labels_with_their_ids(tmp_path: Path, capsys) -> None:
    run = synth.synthesize_run(tmp_path / "demo", tokens=2, prompt_tokens=32)
    assert main(["analyze", str(run.path), "--format", "md", "--lang", "zh-Hans"]) == 0
    text = capsys.readouterr().out
    # a time reads as a duration, as on the page: its label drops the engine's "(µs)"
    assert re.search(r"\| 被标记算子的耗时 \(flagged\\_time\\_us\) \| [\d.]+\xa0(µs|ms|s) \|", text)
    assert main(["analyze", str(run.path), "--format", "html"]) == 0
    assert "<td>Time of the flagged kernels (flagged_time_us)</td>" in capsys.readouterr().out
