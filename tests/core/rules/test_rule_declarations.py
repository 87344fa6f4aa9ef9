"""A rule is one place: its module's ``@rule(...)`` declares its thresholds (each with its evidence), the
model blocks a comparison measures it on, the remedy files it offers, the columns it reads and where it
applies.

These tests check that every registered rule declares all of that with values the rest of the engine
understands, that the rest of the engine reads the declarations (config, compare, fix verdicts, remedies,
the columns a diagnosis loads), and that no module outside ``pypto_core/rules`` keeps a table keyed by rule
ids of its own.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pypto_core.attribution import BUCKETS
from pypto_core.compare import BLOCKS
from pypto_core.fix_verdict import verdict_of
from pypto_core.i18n import Message, msg
from pypto_core.remedies import generate_artifacts, generators
from pypto_core.rules import diagnose, diagnose_columns
from pypto_core.rules.config import RuleConfig, defaults
from pypto_core.rules.context import RuleContext
from pypto_core.rules.registry import RULES, SCOPES, Threshold, discover, rule, rule_blocks
from pypto_core.synth import RULES as PLANTED
from pypto_core.workload import VENDORS, WORKLOADS
from tests.core.rules.builders import decoder_profile
from tests.paths import REPO

DOCS = REPO / "docs"
# "docs/domain.md §3.3", "docs/formats.md §4.3", "(docs/domain.md §3.1, §7)": the sections a threshold cites
CITATION = re.compile(r"docs/(\w+\.md) ((?:§[\d.]+(?: #\d+)?(?:, )?)+)")


def _sections(doc: Path) -> set[str]:
    """Numbers of the doc's headings: "## 3. Op types" -> "3", "### 3.3 The advisor's ..." -> "3.3"."""
    out = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        found = re.match(r"#{2,4} (\d+(?:\.\d+)*)\.? ", line)
        if found:
            out.add(found.group(1))
    return out


def test_every_rule_declares_its_facts() -> None:
    rules = discover()
    assert len(rules) >= 18
    for r in rules.values():
        assert isinstance(r.title, Message) and isinstance(r.saving_model, Message), r.id
        assert r.module.startswith("pypto_core.rules.") and r.module.rsplit(".", 1)[1] == r.id, r.id
        assert r.thresholds, f"{r.id} declares no threshold"
        for name, t in r.thresholds.items():
            assert isinstance(t, Threshold) and isinstance(t.value, (int, float)), (r.id, name)
            assert len(t.evidence.split()) >= 3, f"{r.id}.{name}: the evidence says where the value is from"
        assert set(r.blocks) <= set(BLOCKS), r.id
        assert all(re.fullmatch(r"[\w.]+\.(py|json|sh)", f) for f in r.remedies), r.id
        assert set(r.vendors) <= set(VENDORS) and set(r.workloads) <= set(WORKLOADS), r.id
        assert r.scope in SCOPES and r.explains in BUCKETS, r.id


def test_threshold_evidence_cites_sections_that_exist() -> None:
    cited = 0
    for r in discover().values():
        for name, t in r.thresholds.items():
            for doc, refs in CITATION.findall(t.evidence):
                sections = _sections(DOCS / doc)
                for ref in re.findall(r"§([\d.]+)", refs):
                    cited += 1
                    assert ref.rstrip(".") in sections, f"{r.id}.{name}: docs/{doc} has no §{ref}"
    assert cited >= 15  # most thresholds name their source


def test_the_config_starts_from_the_declarations() -> None:
    declared = {r.id: {k: t.value for k, t in r.thresholds.items()} for r in discover().values()}
    assert defaults() == declared == RuleConfig().thresholds
    # the seed's documented values (docs/contract.md) are the ones declared
    assert declared["matmul_tiling"]["efficiency_below"] == 0.60
    assert declared["attention_memory_bound"]["mte2_share_above"] == 0.70
    assert declared["dynamic_shape"]["min_compile_calls"] == 20 and isinstance(
        declared["dynamic_shape"]["min_compile_calls"], int)  # evidence prints it as 20, not 20.0
    cfg = RuleConfig.from_mapping({"block_dim": {"max_fill": 0.5}})
    assert cfg.get("block_dim", "max_fill") == 0.5 and RuleConfig().get("block_dim", "max_fill") == 0.8
    with pytest.raises(ValueError, match="unknown rule"):
        RuleConfig.from_mapping({"operator_no_bound": {"bound_ratio": 0.8}})  # declared by no rule


def test_the_seed_rules_offer_what_their_remedy_generators_write() -> None:
    offering = {r.id for r in discover().values() if r.remedies}
    assert offering == set(generators()) == {"matmul_tiling", "attention_memory_bound", "kv_cache_layout",
                                              "norm_launch_overhead"}
    report = diagnose(decoder_profile(planted=frozenset(offering)))
    found = {f.rule: f for f in report.findings if f.rule in offering}
    assert set(found) == offering
    written = generate_artifacts(report)
    for rule_id, finding in found.items():
        assert finding.remedies == list(RULES[rule_id].remedies)
        names = {a.name for a in written if a.rule == rule_id}
        assert set(finding.remedies) <= names, (rule_id, names)
    assert all(not f.remedies for f in report.findings if f.rule not in offering)


def test_compare_and_fix_verdicts_read_the_declared_blocks() -> None:
    assert rule_blocks("kv_cache_layout") == ("kv_layout", "kv_update")
    assert rule_blocks("host_bound_gaps") == () and rule_blocks("no_such_rule") == ()
    result = {"findings": [{"rule": "norm_launch_overhead", "status": "fixed", "measured_saving_us": 5.0}],
              "blocks": [{"block": b, "base_us": 1.0, "new_us": 0.5} for b in BLOCKS]}
    verdict = verdict_of(result, "norm_launch_overhead")
    assert [b["block"] for b in verdict["kernels"]] == ["norm"]


def test_the_simulators_planted_patterns_are_rules_with_blocks_and_remedies() -> None:
    rules = discover()
    for rule_id in PLANTED:
        assert rule_id in rules and rules[rule_id].blocks and rules[rule_id].remedies, rule_id


def test_a_rule_declared_in_one_module_reaches_everything_that_reads_rule_facts() -> None:
    """What adding a rule takes: one ``@rule``; the config, the comparison's blocks and the columns an
    analysis loads follow from it."""

    @rule("zz_declared_in_a_test", title=msg("t"), saving_model=msg("m"),
          thresholds={"share_above": Threshold(0.25, "[INFERRED] a test's own value")}, blocks=("rope",),
          remedies=(), needs=("memory.*",))
    def match(ctx: RuleContext) -> None:
        return None

    try:
        assert RuleConfig().get("zz_declared_in_a_test", "share_above") == 0.25
        assert rule_blocks("zz_declared_in_a_test") == ("rope",)
        assert diagnose_columns()["memory"] is None  # the whole table, because this rule needs it
    finally:
        del RULES["zz_declared_in_a_test"]
    assert "memory" not in diagnose_columns()


def test_a_declaration_missing_a_fact_or_with_an_unknown_value_is_refused() -> None:
    declare = dict(title=msg("t"), saving_model=msg("m"), thresholds={}, blocks=(), remedies=(), needs=())
    with pytest.raises(TypeError):
        rule("zz_bad", title=msg("t"), saving_model=msg("m"))  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="Threshold"):
        rule("zz_bad", **{**declare, "thresholds": {"x": 0.5}})(lambda ctx: None)
    with pytest.raises(ValueError, match="Threshold"):
        rule("zz_bad", **{**declare, "thresholds": {"x": Threshold(0.5, " ")}})(lambda ctx: None)
    with pytest.raises(ValueError, match="vendors"):
        rule("zz_bad", **{**declare, "vendors": ("tpu",)})(lambda ctx: None)
    with pytest.raises(ValueError, match="scope"):
        rule("zz_bad", **{**declare, "scope": "cluster"})(lambda ctx: None)
    assert "zz_bad" not in RULES


# -- no per-rule table elsewhere ---------------------------------------------------------------------------
# Where rule facts may be written: each rule's own module, and the simulator, whose table of planted
# anti-patterns is its own (how it writes each pattern's kernels; test_the_simulators_planted_patterns_...
# ties it to the rules). The registry, config and diagnosis machinery of pypto_core/rules are scanned too.
SIMULATOR = "pypto_core/synth/"
SCANNED = ("pypto_core", "analysis", "profiles", "captures", "frontend", "pypto_web")


def _may_declare_rules(rel: str) -> bool:
    folder, _, name = rel.rpartition("/")
    return rel.startswith(SIMULATOR) or (folder == "pypto_core/rules" and name[:-3] in discover())


def _rule_ids() -> set[str]:
    # ids that are also time buckets (data_loading, communication_not_overlapped) name the bucket elsewhere
    return set(discover()) - set(BUCKETS)


def per_rule_tables(source: str, ids: set[str]) -> Iterator[tuple[int, list[str]]]:
    """(line, keys) of every dict literal with two or more rule ids among its keys."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in ids]
            if len(keys) >= 2:
                yield node.lineno, keys


def test_the_table_finder_finds_a_per_rule_table() -> None:
    source = ('BLOCKS = {"matmul_tiling": ("matmul",), "unfused_rope": ("rope",)}\n'
              'OTHER = {"matmul_tiling": 1}\n')
    assert list(per_rule_tables(source, _rule_ids())) == [(1, ["matmul_tiling", "unfused_rope"])]


def test_no_module_outside_the_rules_keeps_a_per_rule_table() -> None:
    ids = _rule_ids()
    found = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if _may_declare_rules(rel) or "/migrations/" in rel:
                continue
            found += [f"{rel}:{line} {keys}" for line, keys in per_rule_tables(path.read_text("utf-8"), ids)]
    assert not found, "rule facts belong in the rule's @rule(...) declaration: " + "; ".join(found)
