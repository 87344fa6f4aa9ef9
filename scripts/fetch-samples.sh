#!/usr/bin/env bash
# Fetches the public real profiling samples the tests read, at the commits they were taken from, into
# ../shared/samples (or the folder given as $1; point PYPTO_SAMPLES at it if it is elsewhere).
#
# For people outside the team that keeps ../shared: without the samples `make test` still passes, with the
# tests that read them skipped ("needs the real samples ..."). Each sample's origin, licence and commit are
# listed in docs/samples.md. Not fetched: derived/vllm_ascend_fia_shapes (per-shape averages made from
# Ascend/msmodeling fixtures, not a file of that repository) and peer_outputs/ (msprof-analyze's own output
# on these files: run `msprof-analyze cluster -d <folder>` to make it).
#
# Needs git and network access to github.com and gitcode.com; this script cannot be run on the machines
# the suite runs on (no network beyond the package registries), so a failed fetch names the repository.
set -euo pipefail
DEST="$(realpath -m "${1:-$(dirname "$0")/../../shared/samples}")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# fetch NAME URL COMMIT PATH...: a shallow, sparse checkout of PATHs at COMMIT into $WORK/NAME
fetch() {
  local name=$1 url=$2 commit=$3; shift 3
  git -C "$WORK" init -q "$name"
  git -C "$WORK/$name" remote add origin "$url"
  git -C "$WORK/$name" sparse-checkout set --no-cone "$@"
  git -C "$WORK/$name" fetch -q --depth 1 origin "$commit" || { echo "fetch-samples: cannot fetch $url" >&2; exit 1; }
  git -C "$WORK/$name" checkout -q FETCH_HEAD
}
# put SRC DEST_SUBDIR: copy a fetched folder's contents into the samples folder
put() { mkdir -p "$DEST/$2"; cp -a "$1"/. "$DEST/$2"/; }

MSINSIGHT=4e16fca1f118458ce8820e9fe9c3cd323db35707
fetch msinsight https://gitcode.com/Ascend/msinsight.git "$MSINSIGHT" \
  test/st/level2 test/data/pytorch server/src/test/test_data
M="$WORK/msinsight"
put "$M/test/st/level2" ascend_pt/qwen3_0.6b_train_4npu_level2
for level in 0 1 2; do
  put "$M/test/data/pytorch/text/level$level/rank0_ascend_pt" "ascend_pt/cnn_8npu_text_level$level/rank0_ascend_pt"
done
for level in 0 1; do
  put "$M/test/data/pytorch/db/level$level/rank0_ascend_pt" "ascend_pt/cnn_8npu_db_level$level/rank0_ascend_pt"
done
for rank in 0 1; do
  put "$M/server/src/test/test_data/test_rank_$rank" "ascend_pt/trimmed_2023_memoryl0/test_rank_$rank"
done
put "$M/server/src/test/test_data/full_db" msprof/db_8npu_2023
put "$M/server/src/test/test_data/msprof" msprof/file_naming_placeholders
put "$M/server/src/test/test_data/test_kernel_parse" msprof/op_summary_fixture

MSPROF_ANALYZE=8399c1cdd2ae369c0e7f618694973dd85238cad1
fetch msprof-analyze https://gitcode.com/Ascend/msprof-analyze.git "$MSPROF_ANALYZE" \
  test/ut/advisor/compute_advice/data test/ut/advisor/advisor_backend/compute_advice \
  test/ut/advisor/timeline_advice test/resource/test.csv
A="$WORK/msprof-analyze"
mkdir -p "$DEST"/ascend_pt/{llm_matmul_pipeutil_2025,llm_arithutil_2023,timeline_2024,level0_excerpt}
cp "$(find "$A/test/ut/advisor/compute_advice/data" -name kernel_details.csv | head -1)" \
  "$DEST/ascend_pt/llm_matmul_pipeutil_2025/"
cp "$(find "$A/test/ut/advisor/advisor_backend/compute_advice" -name kernel_details.csv | head -1)" \
  "$DEST/ascend_pt/llm_arithutil_2023/"
cp "$(find "$A/test/ut/advisor/timeline_advice" -name trace_view.json | head -1)" "$DEST/ascend_pt/timeline_2024/"
cp "$A/test/resource/test.csv" "$DEST/ascend_pt/level0_excerpt/kernel_details.csv"

HTA=f4d0062c382f42bd8a74838bcdad1916c7d5d2da
fetch hta https://github.com/facebookresearch/HolisticTraceAnalysis.git "$HTA" tests/data
H="$WORK/hta/tests/data"
mkdir -p "$DEST"/kineto/{a100_nccl_2rank,trace_diff_pair,cpu_only,mi250_rocm,triton}
cp "$H/nccl_parser_config/nccl_data.json.gz" "$DEST/kineto/a100_nccl_2rank/"
cp "$H/trace_diff/control.json.gz" "$H/trace_diff/test.json.gz" "$DEST/kineto/trace_diff_pair/"
cp "$(find "$H" -name 'rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz' | head -1)" "$DEST/kineto/cpu_only/"
cp "$(find "$H" -name 'mi250_minitoy_train_ROCm6_2_kineto.json.gz' | head -1)" "$DEST/kineto/mi250_rocm/"
cp "$(find "$H" -name 'triton_example.json.gz' | head -1)" "$DEST/kineto/triton/"

PARAM=1e115ffc62c6d048405d9b963191736c13811b1d
fetch param https://github.com/facebookresearch/param.git "$PARAM" et_replay/tests/inputs/dlrm_kineto.tar.gz
mkdir -p "$DEST/kineto/dlrm_8xv100" "$WORK/dlrm"
tar -xzf "$WORK/param/et_replay/tests/inputs/dlrm_kineto.tar.gz" -C "$WORK/dlrm"
find "$WORK/dlrm" -name 'worker*_step_12.*.pt.trace.json' -exec cp {} "$DEST/kineto/dlrm_8xv100/" \;

cat > "$DEST/SOURCES.md" <<EOF
# Real profiling samples (fetched by scripts/fetch-samples.sh)

Origins, commits and licences: docs/samples.md in the PyPTO repository. Fetched $(date -u +%Y-%m-%d).
EOF
echo "fetch-samples: samples in $DEST"
