"""The suite checks itself (issue 24): every test function asserts something of its own, or calls a helper
that does (``assert``, ``pytest.raises/warns/fail``), and no test skips when one of our own modules fails to
import (``importorskip`` is for optional third-party tools only)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

TESTS = REPO / "tests"
OWN_PACKAGES = ("pypto_core", "pypto_web", "profiles", "analysis", "frontend", "captures")


def _trees() -> dict[Path, ast.Module]:
    return {f: ast.parse(f.read_text(encoding="utf-8")) for f in sorted(TESTS.rglob("*.py"))}


def _checks(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) or (isinstance(n, ast.Attribute)
                                             and n.attr in ("raises", "warns", "fail"))
               for n in ast.walk(node))


def _called(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            out.add(n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", ""))
    return out


def test_every_test_function_asserts_or_delegates_to_a_helper_that_does() -> None:
    functions = [(f, n) for f, tree in _trees().items() for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    asserting = {n.name for _, n in functions if _checks(n)}
    empty = [f"{f.relative_to(REPO)}::{n.name}" for f, n in functions
             if n.name.startswith("test_") and n.name not in asserting and not (_called(n) & asserting)]
    assert len(functions) > 500 and not empty, empty


def test_no_importorskip_of_our_own_modules() -> None:
    found = []
    for f, tree in _trees().items():
        for n in ast.walk(tree):
            if (isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "importorskip" and n.args
                    and isinstance(n.args[0], ast.Constant)
                and str(n.args[0].value).startswith(OWN_PACKAGES)):
                found.append(f"{f.relative_to(REPO)}:{n.lineno}")
    assert not found, found
