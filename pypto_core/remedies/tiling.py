"""``matmul_tiling`` remedy: an AOE operator-tuning bundle, plus a FRACTAL_NZ / padding patch for the weights.

AOE is the real operator tuner (docs/domain.md §4.1; ``ACL_OP_TUNER_CONFIG`` and ``op_tuning_runner`` do not
exist): run the workload once with ``torch_npu.npu.set_aoe(dump_path)`` so the operator graphs are dumped,
then ``aoe --job_type=2 --model_path=<dump> --tune_ops_file=<json>``; the tuned tilings land in
``TUNE_BANK_PATH``, which must be exported the same way when serving. ``--tune_ops_file`` is JSON with
``tune_ops_name`` and ``tune_ops_type`` (whole-word match; AOE tunes the union): the file names exactly the
kernels of the flagged shapes, so the rest of the model is left alone; only a flagged group the profile gives
no kernel names for falls back to its op type (which tunes every op of that type, and the header says so).
Where the flagged MatMuls have 2-D weight shapes, a patch converts those weights to FRACTAL_NZ once
(``npu_format_cast(w, 29)``, docs/domain.md §4.4) and can pad a misaligned inner axis to 256 elements.
"""

from __future__ import annotations

import json
from typing import Any

from pypto_core.remedies.artifact import Artifact
from pypto_core.remedies.context import FlaggedOp, RemedyContext
from pypto_core.remedies.header import comment_block, header_data, header_lines
from pypto_core.remedies.model_diff import patch_artifacts
from pypto_core.remedies.registry import register

CONFIG_NAME = "aoe_tune_ops.json"
SCRIPT_NAME = "aoe_tune.sh"
SINGLEOP_NAME = "aoe_singleop.json"
PATCH_NAME = "matmul_weight_format_patch.py"
DIFF_NAME = "matmul_weight_format_patch.diff"
APPLY_FUNCTION = "apply_matmul_weight_format"
INNER_AXIS_ALIGN = 256  # elements: the advisor's cube affinity rule; 512 B for fp16 (docs/domain.md §2.3)

# The generated file's text, kept byte for byte (tests/core/remedies/golden): its own long lines stay.
SCRIPT_TEMPLATE = '''\
#!/usr/bin/env bash
__HEADER__#
# AOE operator tuning (job type 2) for the MatMuls above. Run on the NPU host, with CANN's set_env.sh sourced:
#   bash aoe_tune.sh your_inference_script.py [its arguments...]
# By shape: aoe --singleop tunes each flagged shape of aoe_singleop.json (one Ascend-IR operator per shape
# above, nothing else of the model). By name, where aoe_tune_ops.json lists names only the flagged kernels
# carry (torch_npu often names every MatMulV2 alike: those go by shape only): step 1 runs your script once
# with torch_npu.npu.set_aoe(DUMP_DIR) so the operator graphs are dumped (a few decode steps are enough),
# step 2 runs aoe on the dump with --tune_ops_file (whole-word match). The tuned tilings go to
# TUNE_BANK_PATH: export the same TUNE_BANK_PATH when serving.
# Environment: PYPTO_AOE_DUMP_DIR (default ./pypto_aoe_dump), TUNE_BANK_PATH (default ./pypto_aoe_bank),
# PYTHON (default python3). Only operators in AOE's supported list can be tuned.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tune_ops_file="${here}/aoe_tune_ops.json"
singleop_file="${here}/aoe_singleop.json"
dump_dir="$(realpath -m "${PYPTO_AOE_DUMP_DIR:-./pypto_aoe_dump}")"
TUNE_BANK_PATH="$(realpath -m "${TUNE_BANK_PATH:-./pypto_aoe_bank}")"
export TUNE_BANK_PATH
python_bin="${PYTHON:-python3}"

if ! command -v aoe >/dev/null 2>&1; then
    echo "aoe not found: source the CANN environment first (e.g. . /usr/local/Ascend/ascend-toolkit/set_env.sh)" >&2
    exit 2
fi
if [ ! -f "$tune_ops_file" ]; then
    echo "missing $tune_ops_file (keep it next to this script)" >&2
    exit 2
fi
mkdir -p "$dump_dir" "$TUNE_BANK_PATH"
export AOE_MODE=2  # operator tuning; Atlas A2 accepts 2 and 4, A3 only 2

if [ -f "$singleop_file" ]; then
    echo "[by shape] aoe --singleop=$singleop_file --job_type=2"
    aoe --singleop="$singleop_file" --job_type=2 --output="$dump_dir/singleop"
fi

if ! grep -q '"tune_ops_' "$tune_ops_file"; then
    echo "done: tuned tilings are in TUNE_BANK_PATH=$TUNE_BANK_PATH (no op is named only by flagged kernels)"
    exit 0
fi
if [ "$#" -lt 1 ]; then
    echo "usage: bash $0 your_inference_script.py [args...]  (to tune the ops named in $tune_ops_file)" >&2
    exit 2
fi

echo "[1/2] running $1 with torch_npu.npu.set_aoe($dump_dir)"
"$python_bin" - "$dump_dir" "$@" <<'PY'
import runpy
import sys

import torch_npu

dump_dir, script = sys.argv[1], sys.argv[2]
torch_npu.npu.set_aoe(dump_dir)
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
PY

echo "[2/2] aoe --job_type=2 --model_path=$dump_dir --tune_ops_file=$tune_ops_file"
aoe --job_type=2 --model_path="$dump_dir" --tune_ops_file="$tune_ops_file"

echo "done: tuned tilings are in TUNE_BANK_PATH=$TUNE_BANK_PATH"
echo "serve with: export TUNE_BANK_PATH=$TUNE_BANK_PATH, then re-profile and run pypto compare OLD NEW"
'''  # noqa: E501

# The generated file's text, kept byte for byte (tests/core/remedies/golden): its own long lines stay.
PATCH_TEMPLATE = '''\
"""MatMul weight layout for Ascend NPUs: FRACTAL_NZ weights, optionally an inner axis padded to 256 elements.

    import matmul_weight_format_patch
    model = model.to("npu")                                       # after the weights are loaded
    matmul_weight_format_patch.apply_matmul_weight_format(model)  # only the Linear layers the profile flagged

* torch_npu.npu_format_cast(weight, 29) stores a weight as FRACTAL_NZ once, so the MatMul does not convert
  ND -> NZ on the fly every call (29 = ACL_FORMAT_FRACTAL_NZ; inference only).
* pad_inner_axis=True zero-pads in_features up to a multiple of 256 elements (512 B in fp16), padding the
  input to match: the result is unchanged, and the MatMul's inner axis becomes aligned. It adds one Pad per
  call, so measure it (re-profile) before keeping it.
"""
import torch
import torch_npu

PYPTO_FLAGGED_OPS = __FLAGGED_OPS__  # the ops the profile flagged: type, input shapes, dtypes, formats, calls, us
PYPTO_WEIGHT_SHAPES = __WEIGHT_SHAPES__  # (K, N) of the flagged MatMuls' weight inputs, from the profile
ACL_FORMAT_FRACTAL_NZ = 29
INNER_AXIS_ALIGN = 256


def _pypto_is_flagged(linear):
    shape = (linear.in_features, linear.out_features)
    return shape in PYPTO_WEIGHT_SHAPES or shape[::-1] in PYPTO_WEIGHT_SHAPES


def _pypto_padded_forward(self, x):
    x = torch.nn.functional.pad(x, (0, self._pypto_padded_in - x.shape[-1]))
    return torch.nn.functional.linear(x, self.weight, self.bias)


def _pypto_pad_in_features(linear):
    padded = -(-linear.in_features // INNER_AXIS_ALIGN) * INNER_AXIS_ALIGN
    with torch.no_grad():
        weight = torch.nn.functional.pad(linear.weight, (0, padded - linear.in_features))
    linear.weight = torch.nn.Parameter(weight, requires_grad=False)
    linear._pypto_padded_in = padded
    linear.forward = _pypto_padded_forward.__get__(linear)


def apply_matmul_weight_format(model, to_fractal_nz=True, pad_inner_axis=False):
    """Rewrite the flagged Linear weights of ``model`` in place; returns the names of the layers changed."""
    changed = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or not _pypto_is_flagged(module):
            continue
        if pad_inner_axis and module.in_features % INNER_AXIS_ALIGN:
            _pypto_pad_in_features(module)
        if to_fractal_nz:
            module.weight.data = torch_npu.npu_format_cast(module.weight.data, ACL_FORMAT_FRACTAL_NZ)
        changed.append(name)
    return changed
'''  # noqa: E501


def tune_ops_config(ops: list[FlaggedOp]) -> dict[str, list[str]]:
    """The ``--tune_ops_file`` content: the names only kernels of the flagged shapes carry (most time first);
    an op type only for a flagged group whose kernels the profile does not name. A name that kernels of
    other shapes share (torch_npu names every MatMulV2 alike) is left out: those shapes go by single-op."""
    names = list(dict.fromkeys(n for op in ops for n in op.exclusive_names))
    types = list(dict.fromkeys(op.op_type for op in ops
                               if op.op_type and not op.names and not op.input_shapes))
    config: dict[str, list[str]] = {}
    if names:
        config["tune_ops_name"] = names
    if types:
        config["tune_ops_type"] = types
    return config


_IR_DTYPES = {"float": "float32", "fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
              "double": "float64"}


def _ir_dtype(name: str) -> str:
    key = name.strip().lower()
    key = key[3:] if key.startswith("dt_") else key
    return _IR_DTYPES.get(key, key)


def _descs(shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...],
           formats: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"format": formats[i] if i < len(formats) and formats[i] else "ND", "shape": list(shape),
             "type": _ir_dtype(dtypes[i]) if i < len(dtypes) and dtypes[i] else "float16"}
            for i, shape in enumerate(shapes)]


def singleop_config(ops: list[FlaggedOp]) -> list[dict[str, Any]]:
    """``aoe --singleop`` input (Ascend-IR single-op JSON, docs/domain.md §4.1): one operator per flagged
    shape, with the inputs' and outputs' shapes, dtypes and formats as the profile recorded them."""
    out = []
    for op in ops:
        if not op.op_type or not op.input_shapes or not all(op.input_shapes):
            continue
        entry: dict[str, Any] = {"op": op.op_type,
                                 "input_desc": _descs(op.input_shapes, op.input_dtypes, op.input_formats)}
        if op.output_shapes:
            entry["output_desc"] = _descs(op.output_shapes, op.output_dtypes, op.output_formats)
        x1, x2 = (op.input_shapes + ((), ()))[:2]
        if op.op_type.startswith("MatMul") and len(x1) == 2 and len(x2) == 2:
            # [INFERRED] the MatMulV2 IR attributes, from which axis of x2 meets x1's inner axis
            entry["attr"] = [{"name": "transpose_x1", "type": "bool", "value": False},
                             {"name": "transpose_x2", "type": "bool",
                              "value": x2[0] != x1[1] and x2[1] == x1[1]}]
        out.append(entry)
    return out


def weight_shapes(ops: list[FlaggedOp]) -> list[tuple[int, int]]:
    """(K, N) of each flagged MatMul whose second input is a 2-D weight (activations of BatchMatMul are
    not)."""
    shapes: list[tuple[int, int]] = []
    for op in ops:
        if len(op.input_shapes) >= 2 and len(op.input_shapes[1]) == 2 and all(op.input_shapes[1]):
            k, n = op.input_shapes[1]
            if (k, n) not in shapes:
                shapes.append((k, n))
    return shapes


@register
class TilingOptimizer:
    rule = "matmul_tiling"

    def generate(self, ctx: RemedyContext) -> list[Artifact]:
        ops = ctx.flagged_ops()
        data = header_data(ctx)
        config = tune_ops_config(ops)
        singleop = singleop_config(ops)
        if not config and not singleop:
            return []
        config_text = json.dumps(config, indent=2) + "\n"
        purpose = "AOE operator tuning" + (
            "; by op type for the groups the profile names no kernels of, which tunes every op of that type"
            if "tune_ops_type" in config else "")
        script = SCRIPT_TEMPLATE.replace("__HEADER__", comment_block(header_lines(ctx, purpose)))
        artifacts = [Artifact(CONFIG_NAME, "config", config_text.encode(), self.rule, data),
                     Artifact(SCRIPT_NAME, "script", script.encode(), self.rule, data)]
        if singleop:
            singleop_text = json.dumps(singleop, indent=2) + "\n"
            artifacts.append(Artifact(SINGLEOP_NAME, "config", singleop_text.encode(), self.rule, data))
        shapes = weight_shapes(ops)
        if shapes:
            artifacts += patch_artifacts(ctx, PATCH_TEMPLATE,
                                         purpose="MatMul weight FRACTAL_NZ / padding patch",
                                         module_name=PATCH_NAME, diff_name=DIFF_NAME,
                                         apply_function=APPLY_FUNCTION, after_load=True,
                                         fills={"WEIGHT_SHAPES": shapes})
        return artifacts
