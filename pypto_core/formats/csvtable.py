"""Streaming CSV reading for the profilers' tables, with every quirk of docs/formats.md §0 handled.

The profilers write numbers the way Excel wants them, not the way parsers want them: a TAB after time
values (``1764246877073569.640\\t``, sometimes quoted), ``N/A`` and empty cells in numeric columns,
``4294967295`` (UINT32_MAX) for "none", CRLF or LF line ends. Files are read in blocks with
``pyarrow.csv.open_csv`` and every conversion is a vectorised Arrow compute call: no Python object per row.

Times are converted to int64 nanoseconds *exactly*: the decimal string is split into its integer and
fraction parts and recombined as integers, never through a float (a float64 resolves only ~0.25 µs at
1.7e15 µs, docs/formats.md §0.1).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from pypto_core.errors import InputError
from pypto_core.i18n import Message, msg

# Values that mean "no value" in numeric columns of torch_npu and msprof CSVs (docs/formats.md §0.4).
NULL_TOKENS: tuple[str, ...] = ("", "N/A", "NA", "NULL", "null", "None", "nan", "NaN", "-")
# UINT32_MAX: "no model id", "local" destination rank (docs/formats.md §0.4).
UINT32_NONE = 4294967295

# 4 MiB blocks: measured no slower than 16 MiB on the shared 2-core machine, and a quarter of the memory.
DEFAULT_BLOCK_SIZE = 4 * 1024 * 1024
# Bytes sniffed to tell a text CSV from a binary file that merely carries a .csv name.
_SNIFF_BYTES = 64 * 1024

# A decimal number: optional sign, integer digits, optional fraction. Anchored, so junk never half-matches.
_DECIMAL_RE = r"^(?P<sign>[-+]?)(?P<int>\d{1,18})(?:\.(?P<frac>\d*))?$"
_INTEGER_RE = r"^[-+]?0*\d{1,18}$"  # at most 18 significant digits: always inside int64
_FLOAT_RE = r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?(?:inf|Infinity)$"


@dataclass
class ConversionNotes:
    """Values a reader could not convert, per column, kept for one warning per column (not per row)."""

    bad_values: dict[str, tuple[int, str]] = field(default_factory=dict)  # column -> (count, first example)

    def add(self, column: str, count: int, example: str) -> None:
        if count <= 0:
            return
        old = self.bad_values.get(column)
        self.bad_values[column] = (count + (old[0] if old else 0), old[1] if old else example)

    def warnings(self, path: str | os.PathLike[str]) -> list[Message]:
        name = Path(path).name
        return [
            msg("{file}: {n} value(s) in column {column!r} could not be read as numbers (e.g. {example!r}); "
                "they are left empty", file=name, n=count, column=col, example=example)
            for col, (count, example) in sorted(self.bad_values.items())
        ]


# ---------------------------------------------------------------------------------------------------
# File checks and header


def check_text_file(path: str | os.PathLike[str]) -> bytes:
    """Return the first bytes of ``path`` after checking it is a non-empty text file (else ``InputError``)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        raise InputError(str(p), msg("cannot read file ({error})", error=exc.strerror or str(exc))) from exc
    if size == 0:
        raise InputError(str(p), msg("file is empty (0 bytes)"))
    if b"\x00" in head:
        raise InputError(str(p), msg("not a text file (binary content, NUL bytes) although named like a "
                                     "table"))
    try:
        # The sniffed block may cut a multi-byte character at its end; decode only what is complete.
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:
            raise InputError(str(p), msg("not UTF-8 text (invalid byte at offset {offset})",
                                         offset=exc.start)) from exc
    return head


def read_header(path: str | os.PathLike[str], *, allow_duplicates: bool = False) -> list[str]:
    """The column names of a CSV file (BOM and surrounding spaces removed).

    Duplicate names are an ``InputError`` unless ``allow_duplicates`` (msprof's step_trace repeats its
    ``Reduce Start(us),Reduce Duration(us)`` pair once per all-reduce, docs/formats.md §1.4).
    """
    head = check_text_file(path)
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    if head.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    text = first.decode("utf-8", errors="replace")
    if not text.strip():
        raise InputError(str(path), msg("no header line (first line is blank)"))
    # Headers of these files never contain quoted commas, but strip quotes defensively.
    names = [c.strip().strip('"').strip() for c in text.split(",")]
    if len(set(names)) != len(names) and not allow_duplicates:
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise InputError(str(path), msg("duplicate column name(s) in header: {names}",
                                        names=", ".join(dupes)))
    return names


# ---------------------------------------------------------------------------------------------------
# Streaming


def iter_csv_batches(
    path: str | os.PathLike[str],
    column_types: dict[str, pa.DataType] | None = None,
    *,
    newlines_in_values: bool = False,
    block_size: int = DEFAULT_BLOCK_SIZE,
    include_columns: Sequence[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield record batches of ``path``; columns not in ``column_types`` are read as strings.

    Numeric columns named in ``column_types`` treat :data:`NULL_TOKENS` as null. Parse errors become
    ``InputError`` naming the file and Arrow's reason (which carries the row).
    """
    header = read_header(path)
    types = {name: pa.string() for name in header}
    if column_types:
        types.update({k: v for k, v in column_types.items() if k in types})
    read_opts = pcsv.ReadOptions(block_size=block_size, use_threads=True, encoding="utf8")
    parse_opts = pcsv.ParseOptions(newlines_in_values=newlines_in_values)
    convert_opts = pcsv.ConvertOptions(
        column_types=types,
        null_values=list(NULL_TOKENS),
        strings_can_be_null=False,  # text columns keep "N/A" verbatim; numeric ones turn it to null
        quoted_strings_can_be_null=False,
        include_columns=list(include_columns) if include_columns is not None else None,
        check_utf8=True,
    )
    try:
        reader = pcsv.open_csv(path, read_options=read_opts, parse_options=parse_opts,
                               convert_options=convert_opts)
        yield from reader
    except pa.ArrowInvalid as exc:
        raise InputError(str(path), malformed_csv(exc)) from exc
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), unreadable_csv(exc)) from exc


def read_csv_table(
    path: str | os.PathLike[str],
    column_types: dict[str, pa.DataType] | None = None,
    *,
    newlines_in_values: bool = False,
) -> pa.Table:
    """The whole (small) CSV as one table; see :func:`iter_csv_batches`."""
    header = read_header(path)
    batches = list(iter_csv_batches(path, column_types, newlines_in_values=newlines_in_values))
    if not batches:
        types = {name: pa.string() for name in header}
        if column_types:
            types.update({k: v for k, v in column_types.items() if k in types})
        return pa.schema([(n, types[n]) for n in header]).empty_table()
    return pa.Table.from_batches(batches)


def numbered_duplicates(names: list[str]) -> list[str]:
    """``[a, b, a, b]`` → ``[a, b, "a #2", "b #2"]``: distinct names for a header that repeats some."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def read_csv_numbered(path: str | os.PathLike[str]) -> pa.Table:
    """A small CSV whose header may repeat names, all columns as strings, repeats numbered
    (:func:`numbered_duplicates`)."""
    names = numbered_duplicates(read_header(path, allow_duplicates=True))
    read_opts = pcsv.ReadOptions(column_names=names, skip_rows=1, encoding="utf8")
    convert_opts = pcsv.ConvertOptions(
        column_types={n: pa.string() for n in names}, strings_can_be_null=False,
        quoted_strings_can_be_null=False
    )
    try:
        return pcsv.read_csv(path, read_options=read_opts, convert_options=convert_opts)
    except pa.ArrowInvalid as exc:
        raise InputError(str(path), malformed_csv(exc)) from exc
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), unreadable_csv(exc)) from exc


def malformed_csv(exc: BaseException) -> Message:
    return msg("malformed CSV ({error})", error=_short(exc))


def unreadable_csv(exc: BaseException) -> Message:
    return msg("cannot read CSV ({error})", error=_short(exc))


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


# ---------------------------------------------------------------------------------------------------
# Vectorised conversions of string columns


def clean_strings(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Trim whitespace (the TABs after times) and quotes; null for :data:`NULL_TOKENS`.

    A dictionary array is cleaned on its distinct values only, then expanded to plain strings: names,
    types and shapes repeat on most rows, so this is a fraction of the work.
    """
    if pa.types.is_dictionary(arr.type):
        if isinstance(arr, pa.ChunkedArray):
            return pa.chunked_array([clean_strings(c) for c in arr.chunks], type=arr.type.value_type)
        return pc.take(clean_strings(arr.dictionary), arr.indices)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return arr
    trimmed = pc.utf8_trim(pc.utf8_trim_whitespace(arr), characters='"')
    trimmed = pc.utf8_trim_whitespace(trimmed)
    is_null = pc.is_in(trimmed, value_set=pa.array(NULL_TOKENS, type=arr.type))
    return pc.if_else(is_null, pa.scalar(None, type=arr.type), trimmed)


def _count_bad(original: pa.Array | pa.ChunkedArray, valid: pa.Array | pa.ChunkedArray) -> tuple[int, str]:
    """How many non-null inputs failed validation, and the first of them (for the warning)."""
    bad = pc.and_(pc.is_valid(original), pc.invert(pc.fill_null(valid, False)))
    count = pc.sum(pc.cast(bad, pa.int64())).as_py() or 0
    if not count:
        return 0, ""
    first = pc.filter(original, bad)[0].as_py()
    return count, str(first)[:60]


def to_ns(
    arr: pa.Array | pa.ChunkedArray,
    *,
    column: str = "",
    notes: ConversionNotes | None = None,
    unit_ns: int = 1000,
) -> pa.Array | pa.ChunkedArray:
    """Decimal strings in µs (``unit_ns=1000``) or ms (``unit_ns=1_000_000``) → exact int64 ns.

    ``"1736413971558972.912\\t"`` → ``1736413971558972912``. Fraction digits beyond ns precision are
    rounded half up. Numbers already typed int/float are converted directly (floats rounded).
    Unreadable values become null and are counted in ``notes``.
    """
    if isinstance(arr, pa.ChunkedArray):
        chunks = [to_ns(c, column=column, notes=notes, unit_ns=unit_ns) for c in arr.chunks]
        return pa.chunked_array(chunks, type=pa.int64())
    if pa.types.is_integer(arr.type):
        return pc.multiply_checked(arr.cast(pa.int64()), unit_ns)
    if pa.types.is_floating(arr.type):
        return pc.round(pc.multiply(arr, float(unit_ns))).cast(pa.int64())
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), pa.int64())
    digits = len(str(unit_ns)) - 1  # fraction digits that reach whole nanoseconds
    # Integer digits that can fit int64 once scaled (µs: 16, ms: 13, ns: 19); longer is out of range.
    max_int_digits = 19 - digits
    cleaned = clean_strings(arr)
    parts = pc.extract_regex(cleaned, _DECIMAL_RE.replace("{1,18}", "{1,%d}" % max_int_digits))
    if notes is not None:
        count, example = _count_bad(cleaned, pc.is_valid(parts))
        notes.add(column, count, example)
    try:
        return _decimal_parts_to_ns(parts, digits, unit_ns)
    except (pa.ArrowInvalid, OverflowError):
        # Some value overflows int64 ns (only absurd inputs do): report them all rather than guess which.
        if notes is not None:
            valid = pc.is_valid(parts)
            count = pc.sum(pc.cast(valid, pa.int64())).as_py() or 0
            notes.add(column, count, "value out of range for int64 nanoseconds")
        return pa.nulls(len(arr), pa.int64())


def _decimal_parts_to_ns(parts: pa.Array, digits: int, unit_ns: int) -> pa.Array:
    int_part = pc.cast(pc.struct_field(parts, "int"), pa.int64())
    frac = pc.struct_field(parts, "frac")
    frac_padded = pc.utf8_rpad(frac, width=digits + 1, padding="0")
    if digits:
        frac_ns = pc.cast(pc.utf8_slice_codeunits(frac_padded, 0, digits), pa.int64())
    else:  # the input is already in ns: only the rounding digit matters
        frac_ns = pa.scalar(0, pa.int64())
    round_up = pc.cast(pc.greater_equal(pc.utf8_slice_codeunits(frac_padded, digits, digits + 1), "5"),
                       pa.int64())
    magnitude = pc.add_checked(pc.add_checked(pc.multiply_checked(int_part, unit_ns), frac_ns), round_up)
    negative = pc.equal(pc.struct_field(parts, "sign"), "-")
    return pc.if_else(negative, pc.negate_checked(magnitude), magnitude)


def to_int(
    arr: pa.Array | pa.ChunkedArray,
    *,
    column: str = "",
    notes: ConversionNotes | None = None,
    none_values: Sequence[int] = (UINT32_NONE,),
) -> pa.Array | pa.ChunkedArray:
    """Integer strings → int64; null for blanks, ``N/A`` and the sentinels in ``none_values``."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array(
            [to_int(c, column=column, notes=notes, none_values=none_values) for c in arr.chunks],
            type=pa.int64()
        )
    if pa.types.is_integer(arr.type):
        out = arr.cast(pa.int64())
    elif pa.types.is_floating(arr.type):
        whole = pc.equal(pc.floor(arr), arr)
        if notes is not None:
            count, example = _count_bad(arr, whole)
            notes.add(column, count, example)
        out = pc.if_else(whole, arr, pa.scalar(None, arr.type)).cast(pa.int64())
    elif pa.types.is_null(arr.type):
        return pa.nulls(len(arr), pa.int64())
    else:
        cleaned = clean_strings(arr)
        # "40.0" happens in hand-edited files; accept integral decimals, refuse "4.5".
        cleaned = pc.replace_substring_regex(cleaned, r"\.0*$", "")
        valid = pc.match_substring_regex(cleaned, _INTEGER_RE)
        if notes is not None:
            count, example = _count_bad(cleaned, valid)
            notes.add(column, count, example)
        out = pc.cast(pc.if_else(valid, cleaned, pa.scalar(None, pa.string())), pa.int64())
    if none_values:
        out = pc.if_else(pc.is_in(out, pa.array(list(none_values), pa.int64())), pa.scalar(None, pa.int64()),
                         out)
    return out


def to_float(
    arr: pa.Array | pa.ChunkedArray,
    *,
    column: str = "",
    notes: ConversionNotes | None = None,
) -> pa.Array | pa.ChunkedArray:
    """Numeric strings → float64 (counters, ratios, bandwidths); null for blanks and ``N/A``."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([to_float(c, column=column, notes=notes) for c in arr.chunks],
                                type=pa.float64())
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
        return arr.cast(pa.float64())
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), pa.float64())
    cleaned = clean_strings(arr)
    valid = pc.match_substring_regex(cleaned, _FLOAT_RE)
    if notes is not None:
        count, example = _count_bad(cleaned, valid)
        notes.add(column, count, example)
    return pc.cast(pc.if_else(valid, cleaned, pa.scalar(None, pa.string())), pa.float64())


def to_text(arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Text cells: trimmed, quotes removed, ``N/A``/blank → null."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
            or pa.types.is_dictionary(arr.type)):
        arr = arr.cast(pa.string())
    return clean_strings(arr)


def numeric_share(arr: pa.Array | pa.ChunkedArray) -> float:
    """Share of the non-null cells that read as numbers (1.0 for an empty or numeric-typed column)."""
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type) or pa.types.is_null(arr.type):
        return 1.0
    cleaned = clean_strings(arr)
    present = pc.sum(pc.cast(pc.is_valid(cleaned), pa.int64())).as_py() or 0
    if not present:
        return 1.0
    valid = pc.sum(pc.cast(pc.fill_null(pc.match_substring_regex(cleaned, _FLOAT_RE), False),
                           pa.int64())).as_py() or 0
    return valid / present


def is_numeric_column(arr: pa.Array | pa.ChunkedArray) -> bool:
    """True when every non-null cell reads as a number."""
    return numeric_share(arr) == 1.0
