"""A unified diff that adds a patch module to the user's own model file (when they attached it).

The diff only appends: the patch module's code, then a hook that applies it to every ``*ForCausalLM`` class
the file defines. Appending (rather than rewriting lines) keeps the diff applicable to any version of the file
it was made from; ``patch -p1 < X.diff`` (or ``git apply``) applies it.
"""

from __future__ import annotations

import difflib
import keyword
import re
from typing import Any

from pypto_core.remedies.artifact import Artifact
from pypto_core.remedies.context import RemedyContext
from pypto_core.remedies.header import (
    MAX_NAMES_PER_OP,
    MAX_OPS_IN_HEADER,
    comment_block,
    header_data,
    header_lines,
    op_data,
)
from pypto_core.remedies.safe_text import py_literal, safe_filename

_CAUSAL_LM_CLASS = re.compile(r"^class\s+([A-Za-z_][A-Za-z0-9_]*ForCausalLM)\s*[(:]", re.MULTILINE)
_HOOK_ON_INIT = '''
def _pypto_apply_after_init(cls, apply):
    original_init = cls.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        apply(self)

    cls.__init__ = __init__
'''
_HOOK_ON_LOAD = '''
def _pypto_apply_after_load(cls, apply):
    original = cls.from_pretrained.__func__

    def from_pretrained(klass, *args, **kwargs):
        loaded = original(klass, *args, **kwargs)
        apply(loaded[0] if isinstance(loaded, tuple) else loaded)
        return loaded

    cls.from_pretrained = classmethod(from_pretrained)
'''


def causal_lm_classes(source: str) -> list[str]:
    names = []
    for name in _CAUSAL_LM_CLASS.findall(source):
        if name.isidentifier() and not keyword.iskeyword(name) and name not in names:
            names.append(name)
    return names


def model_file_diff(source: str, filename: str | None, *, module_text: str, module_name: str,
                    apply_function: str, after_load: bool = False) -> str:
    """The diff text; ``after_load`` hooks ``from_pretrained`` (for weight rewrites) instead of
    ``__init__``."""
    if not apply_function.isidentifier():
        raise ValueError("apply_function must be an identifier")
    name = safe_filename(filename, "modeling.py")
    classes = causal_lm_classes(source)
    block = [f"\n\n# ---- PyPTO remedy, inlined from {module_name} (see its header below) ----\n",
             module_text]
    if classes:
        hook = _HOOK_ON_LOAD if after_load else _HOOK_ON_INIT
        hook_name = "_pypto_apply_after_load" if after_load else "_pypto_apply_after_init"
        block.append(hook)
        block.extend(f"\n{hook_name}({cls}, {apply_function})\n" for cls in classes)
    else:
        block.append(f"\n# No *ForCausalLM class in this file: call {apply_function}(model) after loading.\n")
    patched = source + ("" if source.endswith("\n") or not source else "\n") + "".join(block)
    lines = difflib.unified_diff(_lines(source), _lines(patched),
                                 fromfile=f"a/{name}", tofile=f"b/{name}", n=3)
    return "".join(_mark_missing_newline(line) for line in lines)


def patch_artifacts(ctx: RemedyContext, template: str, *, purpose: str, module_name: str, diff_name: str,
                    apply_function: str, after_load: bool = False,
                    fills: dict[str, Any] | None = None) -> list[Artifact]:
    """A patch module and, when the user attached their model file, the diff that inlines it there.

    The module is the comment header for ``purpose`` and then ``template`` with ``__FLAGGED_OPS__`` (the
    flagged op groups, as in the header) and each ``__KEY__`` of ``fills`` replaced by its ``py_literal``, all
    in one pass so that an op name that spells a placeholder stays text.
    """
    listed = [{**op_data(op), "names": list(op.names[:MAX_NAMES_PER_OP])}
              for op in ctx.flagged_ops()[:MAX_OPS_IN_HEADER]]
    values = {"FLAGGED_OPS": listed, **(fills or {})}
    placeholders = re.compile("__(" + "|".join(map(re.escape, values)) + ")__")
    text = (comment_block(header_lines(ctx, purpose))
            + placeholders.sub(lambda m: py_literal(values[m[1]]), template))
    rule, data = ctx.rule, header_data(ctx)
    artifacts = [Artifact(module_name, "patch", text.encode(), rule, data)]
    if ctx.model_source is not None:
        diff = model_file_diff(ctx.model_source, ctx.model_filename, module_text=text,
                               module_name=module_name, apply_function=apply_function, after_load=after_load)
        artifacts.append(Artifact(diff_name, "diff", diff.encode(), rule, data))
    return artifacts


def _lines(text: str) -> list[str]:
    # split on "\n" only, as patch(1) does (str.splitlines would also split on \x0c, \u2028, ...)
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _mark_missing_newline(line: str) -> str:
    # difflib leaves a last line without "\n" as is; patch(1) needs the explicit marker
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
