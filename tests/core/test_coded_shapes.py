"""Shapes and dtypes kept dictionary-encoded (``Profile.load(columns=...)``) give every per-kernel figure the
list columns give: dims, ranks, element counts, bytes per tensor and per slot, first dtype widths, with
null rows, empty slots, dtype lists shorter than the shape lists and unknown dtypes among them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pypto_core.formats.shapes import SHAPES_TYPE, STRINGS_TYPE, coded_from_cell_text
from pypto_core.profile import Profile, save_tables
from pypto_core.rules import diagnose_columns
from pypto_core.shapes import Shapes, first_dtype_bytes, slot_bytes, tensor_bytes

SHAPE_CELLS = ["16,4096;4096,11008", "1,128,64;1,128,64;;", None, "32000", "", "2,3,4,5;5,6",
               "16,4096;4096,11008", "8;8;8", "x,1"]
DTYPE_CELLS = ["DT_BF16;DT_BF16", "FLOAT16;FLOAT16;INT64;INT64", "INT8", None, "", "FLOAT;DT_INT8", "DT_BF16",
               "bogus;INT32;INT64", "FLOAT"]


def _columns(rows: int) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """The cells repeated to ``rows`` rows, as the kernel writer stores them (dictionary text), in two
    chunks with their own dictionaries unified as ``Profile.load`` unifies them."""
    pick = np.arange(rows) % len(SHAPE_CELLS)
    shapes = pa.array([SHAPE_CELLS[i] for i in pick]).dictionary_encode()
    dtypes = pa.array([DTYPE_CELLS[i] for i in pick[::-1]]).dictionary_encode()
    half = rows // 2
    table = pa.table({"s": pa.chunked_array([shapes[:half], shapes[half:]]),
                      "d": pa.chunked_array([dtypes[:half], dtypes[half:]])}).unify_dictionaries()
    return table["s"], table["d"]


def test_coded_columns_decode_to_the_parsed_lists() -> None:
    text_shapes, text_dtypes = _columns(40)
    from pypto_core.formats.shapes import from_cell_text

    coded = coded_from_cell_text(text_shapes, SHAPES_TYPE)
    assert pa.types.is_dictionary(coded.type)
    listed = from_cell_text(text_shapes, SHAPES_TYPE)
    assert [c.dictionary_decode() for c in coded.chunks] == list(listed.chunks)
    names = coded_from_cell_text(text_dtypes, STRINGS_TYPE)
    assert pa.chunked_array([c.dictionary_decode() for c in names.chunks]).to_pylist() == \
        from_cell_text(text_dtypes, STRINGS_TYPE).to_pylist()


def test_every_figure_is_the_same_coded_or_listed() -> None:
    text_shapes, text_dtypes = _columns(57)
    coded_s = coded_from_cell_text(text_shapes, SHAPES_TYPE)
    coded_d = coded_from_cell_text(text_dtypes, STRINGS_TYPE)
    listed_s = pa.chunked_array([c.dictionary_decode() for c in coded_s.chunks])
    listed_d = pa.chunked_array([c.dictionary_decode() for c in coded_d.chunks])
    coded, listed = Shapes.from_column(coded_s), Shapes.from_column(listed_s)
    assert coded.codes is not None and listed.codes is None and coded.kernels == listed.kernels == 57
    assert len(coded.slot_offsets) < len(listed.slot_offsets)  # the distinct lists only
    np.testing.assert_array_equal(coded.slot_count(), listed.slot_count())
    for slot in range(4):
        np.testing.assert_array_equal(coded.rank(slot), listed.rank(slot))
        np.testing.assert_array_equal(coded.elements(slot), listed.elements(slot))
        np.testing.assert_array_equal(coded.leading(slot, 2), listed.leading(slot, 2))
        for axis in (-2, -1, 0, 1, 3):
            np.testing.assert_array_equal(coded.dim(slot, axis), listed.dim(slot, axis))
        np.testing.assert_array_equal(slot_bytes(coded, coded_d, slot), slot_bytes(listed, listed_d, slot))
        np.testing.assert_array_equal(slot_bytes(coded, listed_d, slot), slot_bytes(listed, listed_d, slot))
    np.testing.assert_array_equal(tensor_bytes(coded, coded_d), tensor_bytes(listed, listed_d))
    np.testing.assert_array_equal(first_dtype_bytes(coded, coded_d), first_dtype_bytes(listed, listed_d))
    widths = first_dtype_bytes(listed, listed_d)
    assert {2, 4} <= set(widths.tolist())  # the bf16 default (unknown, absent, or a count mismatch), FLOAT


def test_a_projected_load_keeps_the_kernel_writers_cells_coded(tmp_path) -> None:
    from pypto_core.formats.kernel_csv import kernels_to_parquet

    csv = tmp_path / "kernel_details.csv"
    rows = ["Name,Type,Start Time(us),Duration(us),Input Shapes,Input Data Types,Output Shapes"]
    rows += [f"k{i % 3},MatMulV2,{1000 + i}.5,1.0,\"16,4096;4096,{i % 2 + 1}\",DT_BF16;DT_BF16,"
             f"\"16,{i % 2 + 1}\"" for i in range(50)]
    csv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "saved").mkdir()
    kernels_to_parquet(csv, tmp_path / "saved" / "kernels.parquet")
    save_tables(tmp_path / "saved", Profile().meta, {})
    coded = Profile.load(tmp_path / "saved", columns=diagnose_columns()).kernels
    whole = Profile.load(tmp_path / "saved").kernels
    assert pa.types.is_dictionary(coded.schema.field("input_shapes").type)
    assert coded["input_shapes"].to_pylist() == whole["input_shapes"].to_pylist()
    dtypes = coded["input_dtypes"].to_pylist()
    assert dtypes == whole["input_dtypes"].to_pylist() == [["DT_BF16", "DT_BF16"]] * 50
