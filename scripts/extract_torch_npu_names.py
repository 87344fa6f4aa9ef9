#!/usr/bin/env python3
"""Regenerate pypto_core/remedies/torch_npu_api_names.txt from a torch-npu wheel, without importing it.

    pip download --no-deps torch-npu==2.13.0 -d /tmp/tnpu
    python scripts/extract_torch_npu_names.py /tmp/tnpu/torch_npu-2.13.0-*.whl

The wheel's native part (torch_npu/_C*.so) needs an NPU driver, so the names come from its Python text only:
  * ``torch_npu/_op_plugin_docs.py``: every ``_add_torch_npu_docstr("name", ...)`` is a public
    ``torch_npu.name``;
  * ``torch_npu/op_plugin/meta/_meta_registrations.py``: ``@impl(m, "name")`` functions give the parameter
    names (``m`` is the ``npu`` library, whose ops torch_npu exposes as ``torch_npu.name``);
  * ``torch_npu/npu/__init__.py`` ``__all__`` plus the ``def``s in ``torch_npu/npu/npu_config.py``:
    ``torch_npu.npu.*``.
A line is ``torch_npu.NAME`` or ``torch_npu.NAME(pos, ..., *, kw, ...)`` when the parameters are known.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
import zipfile
from pathlib import Path

DOCS = "torch_npu/_op_plugin_docs.py"
META = "torch_npu/op_plugin/meta/_meta_registrations.py"
NPU_INIT = "torch_npu/npu/__init__.py"
NPU_CONFIG = "torch_npu/npu/npu_config.py"
OUT = Path(__file__).resolve().parent.parent / "pypto_core" / "remedies" / "torch_npu_api_names.txt"


def _params(fn: ast.FunctionDef) -> str:
    pos = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    kw = [a.arg for a in fn.args.kwonlyargs]
    return ", ".join(pos + (["*"] + kw if kw else []))


def _meta_signatures(source: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if (isinstance(deco, ast.Call) and getattr(deco.func, "id", "") == "impl" and len(deco.args) == 2
                    and getattr(deco.args[0], "id", "") == "m" and isinstance(deco.args[1], ast.Constant)):
                name = deco.args[1].value
                if "." not in name:  # "op.overload" entries register overloads of an op already listed
                    found.setdefault(name, _params(node))
    return found


def _npu_namespace(init_source: str, config_source: str) -> dict[str, str]:
    exported: set[str] = set()
    for node in ast.parse(init_source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            exported |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    params = {n.name: _params(n) for n in ast.parse(config_source).body if isinstance(n, ast.FunctionDef)}
    return {f"npu.{name}": params.get(name, "") for name in exported}


def extract(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        read = lambda name: zf.read(name).decode("utf-8").replace("\r\n", "\n")  # noqa: E731
        docs, meta = read(DOCS), read(META)
        npu = _npu_namespace(read(NPU_INIT), read(NPU_CONFIG))
    names = set(re.findall(r'_add_torch_npu_docstr\(\s*"([A-Za-z_][A-Za-z0-9_]*)"', docs))
    signatures = _meta_signatures(meta)
    lines = []
    for name in sorted(names | set(signatures)):
        lines.append(f"torch_npu.{name}({signatures[name]})" if name in signatures else f"torch_npu.{name}")
    for name, params in sorted(npu.items()):
        lines.append(f"torch_npu.{name}({params})" if params else f"torch_npu.{name}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    wheel = Path(argv[1])
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    header = [
        f"# torch_npu public API names, extracted from {wheel.name} (sha256 {digest})",
        "# by scripts/extract_torch_npu_names.py without importing the wheel (see that script for the "
        "sources).",
        "# Format: torch_npu.NAME or torch_npu.NAME(positional, ..., *, keyword, ...). Do not edit by hand.",
    ]
    OUT.write_text("\n".join(header + extract(wheel)) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
