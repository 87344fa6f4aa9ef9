"""Exact time parsing, integer/float cleaning and shape parsing (docs/formats.md §0)."""

import pyarrow as pa

from pypto_core.formats.csvtable import ConversionNotes, to_float, to_int, to_ns
from pypto_core.formats.shapes import parse_name_lists, parse_shapes


def test_to_ns_is_exact_where_float_is_not():
    raw = "1736413971558972.912\t"
    assert to_ns(pa.array([raw])).to_pylist() == [1736413971558972912]
    # The float route loses the ns digits: this is why the reader never takes it.
    assert round(float(raw) * 1000) != 1736413971558972912


def test_to_ns_fraction_widths_quotes_and_nulls():
    notes = ConversionNotes()
    out = to_ns(pa.array(["1695115378713661", "1695115378715400.2", '"5.1"', "N/A", "", None, "-3.5",
                          "932.0498"]),
                column="t", notes=notes)
    assert out.to_pylist() == [1695115378713661000, 1695115378715400200, 5100, None, None, None, -3500,
                               932050]
    assert notes.bad_values == {}


def test_to_ns_reports_unreadable_values_instead_of_guessing():
    notes = ConversionNotes()
    # 1.69512E+15 is an Excel-mangled time with 6 significant
    # digits: refusing it beats a number off by seconds.
    out = to_ns(pa.array(["1.69512E+15", "abc", "12.5"]), column="Timestamp(us)", notes=notes)
    assert out.to_pylist() == [None, None, 12500]
    assert notes.bad_values["Timestamp(us)"] == (2, "1.69512E+15")
    assert "Timestamp(us)" in str(notes.warnings("memory_record.csv")[0])


def test_to_ns_other_units_and_overflow():
    assert to_ns(pa.array(["1736410576538374510"]), unit_ns=1).to_pylist() == [1736410576538374510]
    assert to_ns(pa.array(["79.08952021875"]), unit_ns=1_000_000).to_pylist() == [79089520]
    notes = ConversionNotes()
    assert to_ns(pa.array(["99999999999999999"]), column="x", notes=notes).to_pylist() == [None]
    assert notes.bad_values["x"][0] == 1


def test_to_int_sentinels_and_junk():
    notes = ConversionNotes()
    out = to_int(pa.array(["4294967295", "12", "N/A", "40.0", "4.5", " 7\t"]), column="Model ID", notes=notes)
    assert out.to_pylist() == [None, 12, None, 40, None, 7]
    assert notes.bad_values["Model ID"] == (1, "4.5")


def test_to_float():
    assert to_float(pa.array(["0.5", "1e-3", "N/A", None])).to_pylist() == [0.5, 0.001, None, None]


def test_shapes_keep_slots_aligned_with_dtypes():
    shapes, bad, _ = parse_shapes(pa.array(['"4096,1,2048;4096,1,1024;;"', '"375815680"', "N/A", '""',
                                            "1,x"]))
    assert shapes.to_pylist() == [[[4096, 1, 2048], [4096, 1, 1024], [], []], [[375815680]], None, None, None]
    assert bad == 1
    parsed = parse_name_lists(pa.array(["DT_BF16;INT64;INT64", "N/A"]))
    assert parsed.to_pylist() == [["DT_BF16", "INT64", "INT64"], None]


def test_a_shape_dimension_beyond_int64_is_unreadable_not_a_crash() -> None:
    from pypto_core.formats.shapes import parse_shape_text

    assert parse_shape_text("12345678901234567890123,1;2") is None
    assert parse_shape_text("9223372036854775807;1") == [[9223372036854775807], [1]]
