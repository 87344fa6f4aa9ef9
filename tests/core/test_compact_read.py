"""``compact_read``: a Parquet file read a row group at a time into single-chunk columns gives the values a
whole read gives, with codes as narrow as the dictionary seen so far allows, integers in the narrower type
asked for while they fit (widened a step at a time once they do not) and float counters as codes while their
values are few."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pypto_core import compact_read
from pypto_core.compact_read import read_compact

ROWS_PER_GROUP = 1000


def _write(tmp_path: Path, columns: dict[str, pa.Array]) -> Path:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(columns), path, row_group_size=ROWS_PER_GROUP)
    return path


def _as_values(table: pa.Table, name: str) -> list[object]:
    values = table[name].to_pylist()
    return ["nan" if isinstance(v, float) and math.isnan(v) else v for v in values]


def test_each_column_as_a_whole_read_gives_it_in_one_chunk(tmp_path: Path) -> None:
    rows = 3 * ROWS_PER_GROUP
    at = np.arange(rows)
    # names: 50 distinct in the first row group (1-byte codes), 200 by the second (2 bytes: the first row
    # group's codes widened), 1 200 by the third
    names = np.where(at < 1000, at % 50, np.where(at < 2000, at % 200, 1000 + at * 13)).astype(str)
    name_col = pa.array([None if i % 97 == 0 else f"op{v}" for i, v in zip(at, names)])
    ids = pa.array(np.where(at < 2500, at % 7, 2**40))  # past int32 in the last row group only
    small_ids = pa.array(at % 5)
    ratio = pa.array([None if i % 11 == 0 else (math.nan if i % 13 == 0 else round((i % 9) / 8, 3))
                      for i in at], pa.float64())
    # 1 byte in the first row group, 2 from the second, 4 from the third
    blocks = pa.array(np.where(at < 1000, at % 100, np.where(at < 2000, 300, 70_000)))
    nothing = pa.nulls(rows, pa.int64())
    path = _write(tmp_path, {"name": name_col, "stream_id": ids, "device_id": small_ids, "ratio": ratio,
                             "correlation_id": nothing, "start_ns": pa.array(at * 10), "block_dim": blocks,
                             "dur_ns": pa.array(at + 2**20)})
    table = read_compact(path, ["name", "stream_id", "device_id", "ratio", "correlation_id", "start_ns",
                                "block_dim", "dur_ns"],
                         text={"name"}, narrow={"stream_id": np.int8, "device_id": np.int8,
                                                "correlation_id": np.int32, "block_dim": np.int8,
                                                "dur_ns": np.int32},
                         coded_floats={"ratio"})
    whole = pq.read_table(path)
    for column in table.column_names:
        assert table[column].num_chunks == 1
        assert _as_values(table, column) == _as_values(whole, column), column
    assert table.schema.field("name").type == pa.dictionary(pa.int16(), pa.string())
    assert table["name"].null_count == name_col.null_count
    assert table.schema.field("stream_id").type == pa.int64()  # one value past int32
    assert table.schema.field("device_id").type == pa.int8()
    assert table.schema.field("block_dim").type == pa.int32()  # widened twice, its values kept
    assert table.schema.field("dur_ns").type == pa.int32()
    assert table.schema.field("start_ns").type == pa.int64()  # not asked to narrow
    assert table.schema.field("ratio").type == pa.dictionary(pa.int8(), pa.float64())
    assert len(table["ratio"].chunk(0).dictionary) == 10  # nine ratios and one NaN
    assert table.schema.field("correlation_id").type == pa.int64()  # no value: the file's type
    assert table["correlation_id"].null_count == rows


def test_codes_widen_only_as_far_as_the_dictionary_needs(tmp_path: Path) -> None:
    at = np.arange(2 * ROWS_PER_GROUP)
    path = _write(tmp_path, {"few": pa.array([f"k{i % 126}" for i in at]),
                             "more": pa.array([f"k{i % 127}" for i in at])})
    table = read_compact(path, ["few", "more"], text={"few", "more"}, narrow={})
    # one code is left free below the type's top, for the null code ``shapes.distinct_values`` appends
    assert table.schema.field("few").type.index_type == pa.int8()
    assert table.schema.field("more").type.index_type == pa.int16()
    assert _as_values(table, "more") == [f"k{i % 127}" for i in at]


def test_a_float_column_of_many_values_is_read_as_floats(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact_read, "FLOAT_CODES_LIMIT", 30)
    at = np.arange(3 * ROWS_PER_GROUP)
    # 20 values in the first row group, 40 from the second on: past the limit there
    values = pa.array([None if i == 5 else float(i % (20 if i < 1000 else 40)) / 3 for i in at])
    path = _write(tmp_path, {"x": values})
    table = read_compact(path, ["x"], text=(), narrow={}, coded_floats={"x"})
    assert table.schema.field("x").type == pa.float64() and table["x"].num_chunks == 1
    assert table["x"].to_pylist() == values.to_pylist()
    assert table["x"].null_count == 1


def test_an_empty_file_reads_as_empty_columns(tmp_path: Path) -> None:
    path = _write(tmp_path, {"name": pa.array([], pa.string()), "stream_id": pa.array([], pa.int64())})
    table = read_compact(path, ["name", "stream_id"], text={"name"}, narrow={"stream_id": np.int8})
    assert table.num_rows == 0
    assert table.schema.field("stream_id").type == pa.int64()  # nothing to narrow: the file's type
