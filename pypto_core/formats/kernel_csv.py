"""kernel_details.csv (torch_npu) and op_summary_*.csv (msprof) → canonical ``kernels`` batches.

kernel_details is op_summary with renamed columns (docs/formats.md §2.3), and both drift across versions
(``Block Dim``→``Block Num``, ``Device_id`` added, ``OP State``/``HF32 Eligible`` added, ``HCCL``→
``COMMUNICATION``). One alias table covers every header seen. Columns not in the table are PMU counters
(``aic_mte2_ratio``, ``cube_utilization(%)``, ...) and are kept under their real names as float64.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from pypto_core.errors import InputError
from pypto_core.formats import csvscan, csvtable
from pypto_core.formats.csvtable import ConversionNotes, to_float, to_int, to_ns, to_text
from pypto_core.formats.parquet_sink import write_parquet_stream
from pypto_core.formats.shapes import (
    CELL_TEXT_TYPE,
    name_list_cell_text,
    parse_name_lists,
    parse_shapes,
    shape_cell_text,
)
from pypto_core.i18n import Message, msg
from pypto_core.profile import (
    STREAM_ENCODING,
    TABLE_NAMES,
    TABLE_SCHEMAS,
    ProfileMeta,
    empty_table,
    save_tables,
)

# canonical column -> header names seen across versions (first match wins)
ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("Name", "Op Name", "OP Name"),
    "op_type": ("Type", "OP Type", "Op Type"),
    "core_type": ("Accelerator Core", "Task Type"),
    "stream_id": ("Stream ID", "Stream Id"),
    "task_id": ("Task ID", "Task Id"),
    "device_id": ("Device_id", "Device ID", "Device Id"),
    "step_id": ("Step Id", "Step ID", "Iteration ID"),
    "start_ns": ("Start Time(us)", "Task Start Time(us)"),
    "dur_ns": ("Duration(us)", "Task Duration(us)"),
    "wait_ns": ("Wait Time(us)", "Task Wait Time(us)"),
    "block_dim": ("Block Dim", "Block Num"),
    "mix_block_dim": ("Mix Block Dim", "Mix Block Num"),
    "input_shapes": ("Input Shapes",),
    "input_dtypes": ("Input Data Types",),
    "input_formats": ("Input Formats",),
    "output_shapes": ("Output Shapes",),
    "output_dtypes": ("Output Data Types",),
    "output_formats": ("Output Formats",),
    # kept as extra columns after the canonical ones
    "model_id": ("Model ID",),
    "context_id": ("Context ID",),
    "op_state": ("OP State",),
    "hf32_eligible": ("HF32 Eligible",),
    "model_name": ("Model Name",),
    "infer_id": ("Infer ID",),
}
REQUIRED = ("name", "start_ns", "dur_ns")
_TIMES = ("start_ns", "dur_ns", "wait_ns")
_INTS = ("stream_id", "task_id", "device_id", "step_id", "block_dim", "mix_block_dim", "model_id",
         "context_id", "infer_id")
_TEXTS = ("name", "op_type", "core_type", "op_state", "hf32_eligible", "model_name")
_SHAPES = ("input_shapes", "output_shapes")
_NAME_LISTS = ("input_dtypes", "input_formats", "output_dtypes", "output_formats")
# docs/formats.md §0.9: communication kernels were "HCCL" until 2023, "COMMUNICATION" since.
_CORE_TYPE_RENAMES = {"HCCL": "COMMUNICATION"}

_DICT_STRING = pa.dictionary(pa.int32(), pa.string())
_EXTRA_ORDER = ("model_id", "context_id", "op_state", "hf32_eligible", "model_name", "infer_id")


@dataclass
class KernelColumns:
    """How one file's header maps onto the canonical kernel columns."""

    path: str
    header: list[str]
    mapping: dict[str, str]  # canonical -> header name
    counters: list[str]  # remaining header names: PMU counters kept by their real names
    notes: ConversionNotes = field(default_factory=ConversionNotes)
    skipped_rows: int = 0
    skipped_example: str = ""
    dropped_columns: list[str] = field(default_factory=list)

    def warnings(self) -> list[Message]:
        name = Path(self.path).name
        out = self.notes.warnings(self.path)
        if self.skipped_rows:
            out.append(msg("{file}: skipped {n} malformed row(s) (wrong number of fields, e.g. {example!r})",
                           file=name, n=self.skipped_rows, example=self.skipped_example))
        for col in self.dropped_columns:
            out.append(msg("{file}: column {column!r} is not a known kernel column and not numeric; skipped",
                           file=name, column=col))
        return out


def map_columns(path: str | os.PathLike[str], header: list[str] | None = None) -> KernelColumns:
    """Match a kernel table header to the canonical columns,
    or ``InputError`` when required ones are missing."""
    header = header if header is not None else csvtable.read_header(path)
    present = set(header)
    mapping: dict[str, str] = {}
    for canonical, names in ALIASES.items():
        for n in names:
            if n in present:
                mapping[canonical] = n
                break
    missing = [c for c in REQUIRED if c not in mapping]
    if missing:
        wanted = " / ".join(ALIASES[missing[0]])
        raise InputError(str(path), msg("not a kernel table: required column {column!r} is missing (header "
                                        "starts {header!r})", column=wanted, header=", ".join(header[:6])))
    used = set(mapping.values())
    counters = [h for h in header if h not in used]
    return KernelColumns(str(path), header, mapping, counters)


def is_kernel_header(header: list[str]) -> bool:
    """True for kernel_details / op_summary headers (used by format detection)."""
    present = set(header)
    return all(any(n in present for n in ALIASES[c]) for c in REQUIRED) and any(
        n in present for n in ALIASES["core_type"] + ALIASES["op_type"]
    )


def _convert(
    batch: pa.RecordBatch, cols: KernelColumns, ready: dict[str, pa.Array] | None = None, *,
    cell_text: bool = False
) -> pa.RecordBatch:
    """One raw batch (strings, counters maybe float64) → canonical kernel columns + extras + counters.

    ``ready``: canonical columns already in their final form (the native scanner's times and ids).
    ``cell_text``: shapes, dtypes and formats in their Parquet storage form (``shapes.CELL_TEXT_TYPE``,
    read back into lists by ``Profile.load``) instead of lists.
    """
    notes = cols.notes
    out: dict[str, pa.Array] = dict(ready or {})
    n = batch.num_rows

    def raw(canonical: str) -> pa.Array | None:
        src = cols.mapping.get(canonical)
        return batch.column(src) if src is not None else None

    for c in _TEXTS:
        a = raw(c)
        if a is not None:
            out[c] = to_text(_renamed(a) if c == "core_type" else a)
    for c in _TIMES:
        a = raw(c) if c not in out else None
        if a is not None:
            out[c] = to_ns(a, column=cols.mapping[c], notes=notes)
    for c in _INTS:
        a = raw(c) if c not in out else None
        if a is not None:
            out[c] = to_int(a, column=cols.mapping[c], notes=notes)
    for c in _SHAPES:
        a = raw(c)
        if a is not None:
            parsed, bad, example = shape_cell_text(a) if cell_text else parse_shapes(a)
            notes.add(cols.mapping[c], bad, example)
            out[c] = parsed
    for c in _NAME_LISTS:
        a = raw(c)
        if a is not None:
            out[c] = name_list_cell_text(a) if cell_text else parse_name_lists(a)

    schema = TABLE_SCHEMAS["kernels"]
    arrays: list[pa.Array] = []
    names: list[str] = []
    for fld in schema:
        typ = CELL_TEXT_TYPE if cell_text and fld.name in _SHAPES + _NAME_LISTS else fld.type
        a = out.get(fld.name)
        arrays.append(a.cast(typ) if a is not None else pa.nulls(n, typ))
        names.append(fld.name)
    for c in _EXTRA_ORDER:
        if c in out:
            arrays.append(out[c])
            names.append(c)
    for c in cols.counters:
        if c in cols.dropped_columns:
            continue
        arrays.append(to_float(batch.column(c), column=c, notes=notes))
        names.append(c)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _renamed(arr: pa.Array) -> pa.Array:
    """Core types under their current names; on a dictionary array only the distinct values are touched."""
    if pa.types.is_dictionary(arr.type):
        return pa.DictionaryArray.from_arrays(arr.indices, _renamed(arr.dictionary))
    arr = to_text(arr)
    for old, new in _CORE_TYPE_RENAMES.items():
        arr = pc.if_else(pc.equal(arr, old), pa.scalar(new), arr)
    return arr


def fast_column_types(cols: KernelColumns) -> dict[str, pa.DataType]:
    """Arrow CSV types that do the conversions inside Arrow's parser (the fast path).

    Times stay text, for ``csvtable.to_ns`` to read exactly (Arrow's decimal parser would also take forms
    the validating path refuses, such as ``1e3``); integers as int64;
    repeated text (names, types, shapes) dictionary-encoded so later cleaning and shape parsing touch each
    distinct string once; counters float64. A cell that does not fit fails the whole read, and
    :func:`iter_kernel_batches` then takes the validating string path.
    """
    types: dict[str, pa.DataType] = {h: pa.string() for h in cols.header}
    types.update({c: pa.float64() for c in cols.counters})
    for canonical, src in cols.mapping.items():
        if canonical in _TIMES:
            types[src] = pa.string()
        elif canonical in _INTS:
            types[src] = pa.int64()
        elif canonical in _TEXTS or canonical in _SHAPES or canonical in _NAME_LISTS:
            types[src] = _DICT_STRING
    return types


def _decide_dropped(first: pa.RecordBatch, cols: KernelColumns) -> None:
    """Unknown text columns (not counters) are skipped with a warning, judged on the first batch.

    A counter column with a few junk cells stays (the junk becomes null and is warned about); a column
    that is mostly text is not a counter.
    """
    for c in cols.counters:
        if csvtable.numeric_share(first.column(c)) < 0.5:
            cols.dropped_columns.append(c)


def native_column_kinds(cols: KernelColumns) -> list[int]:
    """The C scanner's kind per header column: times exact ns, ids int64, repeated text as dictionary codes,
    counters float64 (the same split as :func:`fast_column_types`)."""
    by_source = {src: canonical for canonical, src in cols.mapping.items()}
    kinds = []
    for h in cols.header:
        canonical = by_source.get(h)
        if canonical is None:
            kinds.append(csvscan.FLOAT)
        elif canonical in _TIMES:
            kinds.append(csvscan.TIME_NS)
        elif canonical in _INTS:
            kinds.append(csvscan.INT)
        else:
            kinds.append(csvscan.TEXT)
    return kinds


def iter_kernel_batches(
    path: str | os.PathLike[str],
    cols: KernelColumns | None = None,
    *,
    block_size: int = csvtable.DEFAULT_BLOCK_SIZE,
    native: bool = True,
    cell_text: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Stream a kernel CSV as canonical batches; warnings accumulate in ``cols`` (see ``cols.warnings()``).
    ``cell_text``: shapes, dtypes and formats in their Parquet storage form (see :func:`_convert`).

    Fastest path: the C scanner (:mod:`csvscan`) converts every column in one pass over the bytes. It takes
    only cells it reads exactly as the validating path does; at the first other row (a wrong field count,
    a number it does not read) the rest of the file goes the pyarrow way below, skipping the rows already
    delivered, so warnings and errors stay those of the validating path. Without a C compiler (or with
    ``native=False``) the pyarrow paths read the whole file.
    """
    cols = cols or map_columns(path)
    csvtable.check_text_file(path)
    delivered = 0
    if native:
        kinds = native_column_kinds(cols)
        ready_names = {i: c for c, src in cols.mapping.items() if c in _TIMES or c in _INTS
                       for i in [cols.header.index(src)]}
        try:
            for arrays in csvscan.scan_columns(path, cols.header, kinds, csvtable.NULL_TOKENS,
                                               background=True):
                ready = {ready_names[i]: a for i, a in enumerate(arrays) if i in ready_names}
                raw = pa.RecordBatch.from_arrays(
                    [a for i, a in enumerate(arrays) if i not in ready_names],
                    names=[h for i, h in enumerate(cols.header) if i not in ready_names],
                )
                if delivered == 0:
                    _decide_dropped(raw, cols)
                yield _convert(raw, cols, ready, cell_text=cell_text)
                delivered += raw.num_rows
            return
        except csvscan.NotNative as stop:
            delivered = stop.rows
        except OSError as exc:
            raise InputError(str(path), msg("cannot read CSV ({error})",
                                            error=exc.strerror or str(exc))) from exc
    yield from _iter_arrow(path, cols, block_size, delivered, cell_text)


def _iter_arrow(
    path: str | os.PathLike[str], cols: KernelColumns, block_size: int, delivered: int, cell_text: bool
) -> Iterator[pa.RecordBatch]:
    """The pyarrow paths, from the row after the ``delivered`` first ones.

    Fast: Arrow's C++ parser converts the columns itself (:func:`fast_column_types`). A cell it cannot
    convert (text in a counter, ``40.0`` as a block count, a time with more than 3 decimals) makes it fail;
    the file is then re-read with every column as text and validated per value, skipping the rows already
    delivered (malformed rows, skipped by both reads, are not counted).
    """

    def on_invalid_row(row: pcsv.InvalidRow) -> str:
        cols.skipped_rows += 1
        if not cols.skipped_example:
            cols.skipped_example = (row.text or "")[:80]
        return "skip"

    def batches(fast: bool) -> Iterator[pa.RecordBatch]:
        types = fast_column_types(cols) if fast else {h: pa.string() for h in cols.header}
        read_opts = pcsv.ReadOptions(block_size=block_size, use_threads=True)
        parse_opts = pcsv.ParseOptions(newlines_in_values=False, invalid_row_handler=on_invalid_row)
        convert_opts = pcsv.ConvertOptions(
            column_types=types,
            null_values=list(csvtable.NULL_TOKENS),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )
        reader = pcsv.open_csv(path, read_options=read_opts, parse_options=parse_opts,
                               convert_options=convert_opts)
        yield from reader

    def undelivered(fast: bool) -> Iterator[pa.RecordBatch]:
        """Batches (sliced where needed) after the rows already delivered; the first batch decides which
        unknown columns are dropped when nothing was delivered before."""
        nonlocal delivered
        seen = 0
        for raw in batches(fast):
            start, seen = seen, seen + raw.num_rows
            if seen <= delivered:
                continue
            if start < delivered:
                raw = raw.slice(delivered - start)
            if delivered == 0:
                _decide_dropped(raw, cols)
            yield _convert(raw, cols, cell_text=cell_text)
            delivered = seen

    skipped_before_retry = 0
    try:
        yield from undelivered(fast=True)
        return
    except pa.ArrowInvalid:
        # A cell the typed parse refused (text in a counter, "40.0" as a count, ...), or a broken file:
        # the validating path below says which, per value, or raises InputError.
        skipped_before_retry = cols.skipped_rows
    except (pa.ArrowException, OSError) as exc:
        raise InputError(str(path), csvtable.unreadable_csv(exc)) from exc
    # Slow, validating path.
    cols.skipped_rows = 0
    cols.skipped_example = ""
    try:
        yield from undelivered(fast=False)
    except pa.ArrowInvalid as exc:
        raise InputError(str(path), csvtable.malformed_csv(exc)) from exc
    except (pa.ArrowException, OSError) as exc:
        raise InputError(str(path), csvtable.unreadable_csv(exc)) from exc
    cols.skipped_rows = max(cols.skipped_rows, skipped_before_retry)


def read_kernels(path: str | os.PathLike[str]) -> tuple[pa.Table, list[Message]]:
    """The whole kernel table and the warnings about what was skipped."""
    cols = map_columns(path)
    batches = list(iter_kernel_batches(path, cols))
    if batches:
        table = pa.Table.from_batches(batches)
    else:
        table = TABLE_SCHEMAS["kernels"].empty_table()
    return table, cols.warnings()


def kernel_device_ids(kernels: pa.Table) -> list[int]:
    """The distinct device ids of a kernel table (its ``Device_id`` column), sorted; [] when absent."""
    if "device_id" not in kernels.column_names or kernels.num_rows == 0:
        return []
    ids = pc.unique(pc.drop_null(kernels["device_id"])).to_pylist()
    return sorted(int(i) for i in ids)


def kernels_to_parquet(
    path: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    block_size: int = csvtable.DEFAULT_BLOCK_SIZE,
) -> tuple[int, list[Message]]:
    """Stream a kernel CSV of any size into a canonical ``kernels`` Parquet file; (rows, warnings).

    Memory stays bounded by a few blocks and row groups, whatever the file's size. Shapes, dtypes and
    formats are stored as their cell text (``shapes.CELL_TEXT_TYPE``); ``profile.read_table`` and
    ``Profile.load`` give them back as the canonical lists.
    """
    cols = map_columns(path)
    rows = write_parquet_stream(
        iter_kernel_batches(path, cols, block_size=block_size, cell_text=True),
        dest,
        **STREAM_ENCODING,
        # row groups of one or two scanned batches: the writer starts early and has little left to encode
        # after the last batch (128 Ki-row groups made the 100 MB conversion ~10% slower; loads as fast)
        row_group_rows=csvscan.MAX_ROWS,
    )
    return rows, cols.warnings()


def write_kernel_table(path: str | os.PathLike[str], folder: str | os.PathLike[str], *,
                       rank_hint: int | None = None) -> ProfileMeta:
    """A lone kernel_details.csv / op_summary.csv streamed into a saved profile folder (bounded memory);
    ``Profile.load(folder)`` gives what ``open_profile(path)`` gives. A failed read leaves no folder."""
    p, out = Path(path), Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    try:
        _, warnings = kernels_to_parquet(p, out / "kernels.parquet")
        meta = ProfileMeta(format="msprof" if p.name.startswith("op_summary") else "ascend_pt", source=str(p),
                           source_files=[str(p)], warnings=list(warnings), rank=rank_hint)
        save_tables(out, meta, {name: empty_table(name) for name in TABLE_NAMES if name != "kernels"})
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return meta
