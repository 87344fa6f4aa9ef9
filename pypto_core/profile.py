"""The canonical profile: columnar tables with int64-ns times, plus metadata.

Every reader (``pypto_core.formats``) produces a ``Profile``; every consumer (graph, rules, compare,
timeline, the web app) reads only this. Tables are ``pyarrow.Table`` objects, never one Python object
per event. A profile is saved as one Parquet file per table plus ``profile.json`` for the metadata.

Times are int64 nanoseconds since the Unix epoch (the profilers' own time base), so that joins and
ordering are exact (docs/formats.md §0.1: a float64 loses the ns digits of a 1.7e15 µs timestamp).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pypto_core.compact_read import read_compact
from pypto_core.errors import InputError
from pypto_core.i18n import Text, loaded_texts, msg, stored_texts

SCHEMA_VERSION = 1

_SHAPES = pa.list_(pa.list_(pa.int64()))  # one list of dims per input/output slot
_STRINGS = pa.list_(pa.string())

# The columns every table is guaranteed to have (readers may add more: counter columns keep their real
# names, e.g. ``aic_mte2_ratio``). Missing optional values are nulls, never sentinels like 4294967295.
TABLE_SCHEMAS: dict[str, pa.Schema] = {
    # Device tasks (kernel_details / op_summary / Kineto "kernel" events).
    "kernels": pa.schema(
        [
            ("name", pa.string()),
            ("op_type", pa.string()),
            # AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU, COMMUNICATION, GPU...
            ("core_type", pa.string()),
            ("stream_id", pa.int64()),
            ("task_id", pa.int64()),
            ("device_id", pa.int64()),
            ("step_id", pa.int64()),
            ("start_ns", pa.int64()),
            ("dur_ns", pa.int64()),
            ("wait_ns", pa.int64()),
            ("block_dim", pa.int64()),
            ("mix_block_dim", pa.int64()),
            ("input_shapes", _SHAPES),
            ("input_dtypes", _STRINGS),
            ("input_formats", _STRINGS),
            ("output_shapes", _SHAPES),
            ("output_dtypes", _STRINGS),
            ("output_formats", _STRINGS),
            ("correlation_id", pa.int64()),  # links to host_ops.correlation_id where the format has one
        ]
    ),
    # Framework-level operators on the host (aten::*, torch_npu ops, Kineto cpu_op).
    "host_ops": pa.schema(
        [
            ("name", pa.string()),
            ("pid", pa.int64()),
            ("tid", pa.int64()),
            ("start_ns", pa.int64()),
            ("dur_ns", pa.int64()),
            ("correlation_id", pa.int64()),
            ("input_shapes", pa.string()),  # as the profiler wrote it; host shapes are informative only
        ]
    ),
    # Runtime/API calls on the host (CANN acl*/aclnn*, cudaLaunchKernel, ...).
    "api_calls": pa.schema(
        [
            ("name", pa.string()),
            ("level", pa.string()),  # acl, runtime, node, hccl, cuda_runtime, ...
            ("pid", pa.int64()),
            ("tid", pa.int64()),
            ("start_ns", pa.int64()),
            ("dur_ns", pa.int64()),
            ("correlation_id", pa.int64()),
        ]
    ),
    # Host -> device links, by row index into host_ops / kernels.
    "flows": pa.schema(
        [
            ("host_index", pa.int64()),
            ("kernel_index", pa.int64()),
            ("kind", pa.string()),  # async_npu, ac2g, correlation, containment
        ]
    ),
    # Counter tracks (AI Core frequency, HBM bandwidth, memory, ...): one row per sample.
    "counters": pa.schema(
        [
            ("track", pa.string()),
            ("ts_ns", pa.int64()),
            ("value", pa.float64()),
        ]
    ),
    # Profiler steps (ProfilerStep#N, step_trace_time).
    "steps": pa.schema(
        [
            ("step_id", pa.int64()),
            ("start_ns", pa.int64()),
            ("end_ns", pa.int64()),
            ("computing_ns", pa.int64()),
            ("communication_ns", pa.int64()),
            ("free_ns", pa.int64()),
        ]
    ),
    # Memory samples (operator_memory, memory_record, npu_module_mem), bytes.
    "memory": pa.schema(
        [
            ("component", pa.string()),
            ("ts_ns", pa.int64()),
            ("allocated_bytes", pa.int64()),
            ("reserved_bytes", pa.int64()),
            ("device", pa.string()),
        ]
    ),
    # Collective communication ops (communication.json, hccl tasks, nccl kernels).
    "communication": pa.schema(
        [
            ("name", pa.string()),
            ("group", pa.string()),
            ("step_id", pa.int64()),
            ("start_ns", pa.int64()),
            ("elapse_ns", pa.int64()),
            ("transit_ns", pa.int64()),
            ("wait_ns", pa.int64()),
            ("synchronization_ns", pa.int64()),
            ("idle_ns", pa.int64()),
            ("size_bytes", pa.int64()),
            ("bandwidth_gbps", pa.float64()),
        ]
    ),
}

TABLE_NAMES: tuple[str, ...] = tuple(TABLE_SCHEMAS)


@dataclass
class ProfileMeta:
    """What a profile is and where it came from; serialised as ``profile.json``."""

    format: str = "unknown"  # ascend_pt | ascend_pt_db | msprof | msprof_db | kineto
    source: str = ""  # the path or archive member the profile was read from
    rank: int | None = None
    device_id: int | None = None
    device: str | None = None  # SKU, e.g. "910B3", "A100", when the profile says so
    cann_version: str | None = None
    torch_npu_version: str | None = None
    torch_version: str | None = None
    profiler_level: str | None = None
    aic_metrics: str | None = None  # counter group, e.g. PipeUtilization
    simulated: bool = False
    source_files: list[str] = field(default_factory=list)
    # What could not be read, and why: messages (the readers') or plain strings. Saved as the English
    # ``warnings`` beside ``warning_messages`` (each one's template and parameters, or None), as a report is.
    warnings: list[Text] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileMeta:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("warnings"), list):
            values["warnings"] = loaded_texts(values["warnings"], data.get("warning_messages"))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The saved form (``profile.json``): every field, the warnings as English text and messages."""
        warnings, messages = stored_texts(self.warnings)
        return {**asdict(replace(self, warnings=[])), "warnings": warnings, "warning_messages": messages}


def empty_table(name: str) -> pa.Table:
    return TABLE_SCHEMAS[name].empty_table()


# Which columns of which tables a step reads: table -> column names, or None for every column. A table
# left out is not read at all. Each consumer declares its own (``graph.GRAPH_COLUMNS``, a rule's ``needs``)
# and ``Profile.load(path, columns=...)`` reads their union (``merge_columns``).
ColumnSet = Mapping[str, Collection[str] | None]


def merge_columns(*sets: ColumnSet) -> dict[str, frozenset[str] | None]:
    """The union of several column sets (a table read whole by one is read whole)."""
    out: dict[str, frozenset[str] | None] = {}
    for columns in sets:
        for table, names in columns.items():
            if table in out and out[table] is None:
                continue
            out[table] = None if names is None else (out.get(table) or frozenset()) | frozenset(names)
    return out


def conform(name: str, table: pa.Table, *, only: Collection[str] | None = None,
            keep_dictionary: bool = False) -> pa.Table:
    """Return ``table`` with every canonical column of ``name`` present and typed (nulls where absent).

    Extra columns (counters under their real names) are kept after the canonical ones. ``only``: the
    canonical columns to give (a projected load); the others are left out, so that reading one that was
    not asked for fails loudly instead of reading nulls. ``keep_dictionary`` (a projected load's form): text
    columns that are dictionary-encoded stay so (a repeated name costs its code, not its bytes), and so do
    integers kept narrower (``NARROW_COLUMNS``).
    """
    schema = TABLE_SCHEMAS[name]
    columns: list[pa.Array | pa.ChunkedArray] = []
    names: list[str] = []
    for fld in schema:
        if only is not None and fld.name not in only:
            continue
        if fld.name in table.column_names:
            col = table.column(fld.name)
            if pa.types.is_list(fld.type) and _is_text(col.type):
                col = _lists_from_cell_text(col, fld.type)
            elif keep_dictionary and pa.types.is_string(fld.type) and _is_text(col.type):
                pass
            elif pa.types.is_dictionary(col.type) and col.type.value_type == fld.type:  # coded lists
                col = col if keep_dictionary else _decoded(col)
            elif (keep_dictionary and fld.name in NARROW_COLUMNS and pa.types.is_signed_integer(col.type)
                  and col.type.bit_width < 64):
                pass  # a number a projected load keeps narrower
            elif col.type != fld.type:
                col = col.cast(fld.type)
        else:
            col = null_column(table.num_rows, fld.type)
        if len(col) and col.null_count == len(col) and _is_number(col.type):
            col = null_column(len(col), col.type)  # read as nulls (a kernel table's correlation ids)
        columns.append(col)
        names.append(fld.name)
    for extra in table.column_names:
        if extra not in schema.names:
            columns.append(table.column(extra))
            names.append(extra)
    return pa.table(columns, names=names)


def null_column(length: int, typ: pa.DataType) -> pa.Array:
    """A column of ``length`` nulls. Numbers take no resident memory: their buffers are zeroed pages that
    the kernel maps only when written (calloc), and nothing writes a null column's buffers. ``pa.nulls``
    fills them: a kernel table's all-null correlation ids held 8 bytes a row (125 MB at 5 GB)."""
    if not _is_number(typ) or not length:
        return pa.nulls(length, type=typ)
    validity = np.zeros((length + 7) // 8, np.uint8)
    values = np.zeros(length * (typ.bit_width // 8), np.uint8)
    return pa.Array.from_buffers(typ, length, [pa.py_buffer(validity), pa.py_buffer(values)],
                                 null_count=length)


def _is_number(typ: pa.DataType) -> bool:
    return bool(pa.types.is_integer(typ) or pa.types.is_floating(typ))


def _is_text(typ: pa.DataType) -> bool:
    return bool(pa.types.is_string(typ)
                or (pa.types.is_dictionary(typ) and pa.types.is_string(typ.value_type)))


def _decoded(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return pa.chunked_array([c.dictionary_decode() for c in col.chunks], type=col.type.value_type)
    return col.dictionary_decode()


def _lists_from_cell_text(col: pa.ChunkedArray | pa.Array,
                          list_type: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """A list column stored as its cell text (the streaming kernel writer's form) back as lists."""
    from pypto_core.formats.shapes import from_cell_text  # the cell grammar lives with the readers

    return from_cell_text(col, list_type)


def read_table(path: str | os.PathLike[str], name: str, columns: Collection[str] | None = None,
               dictionary_text: bool = False) -> pa.Table:
    """One saved table (``kernels.parquet``, ...) in its canonical form; ``columns``: only these (see
    ``conform``'s ``only``), ``dictionary_text``: text columns kept dictionary-encoded, one dictionary per
    column (``ColumnSet``, ``Profile.load``).

    Text columns are read as dictionaries and, unless kept so, expanded: Parquet keeps them
    dictionary-encoded (names and types repeat), and expanding its dictionary is faster than decoding each
    row's string (measured on a 3 M-row kernels table: read and conform 1.5 s of CPU instead of 2.3 s).
    """
    file_schema = pq.read_schema(path)
    present = set(file_schema.names)
    wanted = None if columns is None else [c for c in file_schema.names if c in columns]
    text = [f.name for f in TABLE_SCHEMAS[name] if pa.types.is_string(f.type)]
    if dictionary_text:  # the extra text columns too (op_state): as canonical text is
        text += [f.name for f in file_schema if _is_text(f.type) and f.name not in text]
    as_dictionary = [c for c in text if c in present and (wanted is None or c in wanted)]
    if dictionary_text:
        return _read_projected(path, name, columns, file_schema.names if wanted is None else wanted,
                               as_dictionary)
    table = pq.read_table(path, columns=wanted, read_dictionary=as_dictionary)
    stored_as_text = [f for f in TABLE_SCHEMAS[name] if pa.types.is_list(f.type)
                      and f.name in table.column_names and _is_text(table.schema.field(f.name).type)]
    if len(stored_as_text) > 1 and table.num_rows >= _PARALLEL_ROWS:
        # expanding the lists is mostly Arrow's take, which releases the GIL: both cores share the columns
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="pypto-load") as pool:
            lists = list(pool.map(lambda f: _lists_from_cell_text(table[f.name], f.type), stored_as_text))
        for f, col in zip(stored_as_text, lists):
            table = table.set_column(table.schema.get_field_index(f.name), f.name, col)
    return conform(name, table, only=columns)


def _read_projected(path: str | os.PathLike[str], name: str, columns: Collection[str] | None,
                    wanted: list[str], text: list[str]) -> pa.Table:
    """A projected load's table (``read_table(dictionary_text=True)``): read a row group at a time into
    compact single-chunk columns (``compact_read``), text as codes, ids and lengths narrower where they fit
    (``NARROW_COLUMNS``). Lists stored as cell text stay coded: only the distinct cells are parsed into lists
    (on a 3.1 M-kernel table the six list columns hold 72 MB instead of 460 MB)."""
    from pypto_core.formats.shapes import coded_from_cell_text  # the cell grammar lives with the readers

    # the counters under their own names (PipeUtilization ratios) as codes: read as floats by a cast
    # (``OperatorCallGraph.pipe_ratio``); the canonical columns keep their types
    counters = [c for c in wanted if c not in TABLE_SCHEMAS[name].names]
    table = read_compact(path, wanted, text=text, narrow=NARROW_COLUMNS, coded_floats=counters)
    for f in TABLE_SCHEMAS[name]:
        i = table.schema.get_field_index(f.name)
        if pa.types.is_list(f.type) and i >= 0 and _is_text(table.schema.field(i).type):
            table = table.set_column(i, f.name, coded_from_cell_text(table.column(i).chunk(0), f.type))
    return conform(name, table, only=columns, keep_dictionary=True)


_PARALLEL_ROWS = 100_000  # below this, a thread costs more than it saves


# Integer columns a projected load keeps narrower than 8 bytes while every value fits, in the type given here
# or the next wider one that holds them all (their readers take them as indices, compare them, add them to
# int64 times, or widen first: whoever multiplies or adds two of them widens first).
# * Ids of a row, a thread or a launch, never summed or multiplied: 4 bytes. A table's correlation ids may
#   fit where another's do not: whoever joins two tables by them widens both. A 5 GB simulated folder's
#   4.3 M flows hold 52 MB less so, its 8.5 M host and API calls 68 MB less.
# * Devices, streams and launch blocks, a handful of values each: 1 byte (2 past 127 streams or blocks).
# * Lengths of time: 4 bytes (a task of 2.1 s or more widens the column).
# On a 15.7 M-kernel table the last two took 240 MB off what the analysis holds through its rules.
NARROW_COLUMNS: dict[str, type[np.signedinteger[Any]]] = {
    **dict.fromkeys(("kernel_index", "host_index", "api_index", "pid", "tid", "correlation_id"), np.int32),
    **dict.fromkeys(("device_id", "stream_id", "block_dim"), np.int8),
    "dur_ns": np.int32,
}


@dataclass
class Profile:
    """One rank's canonical profile."""

    meta: ProfileMeta = field(default_factory=ProfileMeta)
    kernels: pa.Table = field(default_factory=lambda: empty_table("kernels"))
    host_ops: pa.Table = field(default_factory=lambda: empty_table("host_ops"))
    api_calls: pa.Table = field(default_factory=lambda: empty_table("api_calls"))
    flows: pa.Table = field(default_factory=lambda: empty_table("flows"))
    counters: pa.Table = field(default_factory=lambda: empty_table("counters"))
    steps: pa.Table = field(default_factory=lambda: empty_table("steps"))
    memory: pa.Table = field(default_factory=lambda: empty_table("memory"))
    communication: pa.Table = field(default_factory=lambda: empty_table("communication"))

    def __post_init__(self) -> None:
        for name in TABLE_NAMES:
            setattr(self, name, conform(name, getattr(self, name)))

    def table(self, name: str) -> pa.Table:
        return getattr(self, name)

    def release_rows(self, keep: ColumnSet | None = None) -> None:
        """Let go of what a caller that still holds the profile is done with (the meta stays): every table's
        rows (each is left empty, its columns kept), or, given ``keep``, the tables and columns it does not
        name (a table it names with None stays whole)."""
        for name in TABLE_NAMES:
            table = self.table(name)
            columns = keep.get(name, ()) if keep is not None else ()
            if columns is not None:  # None: the whole table stays
                setattr(self, name, table.select([c for c in table.column_names if c in columns])
                        if columns else table.schema.empty_table())

    def drop_columns(self, columns: dict[str, tuple[str, ...]]) -> None:
        """Let go of these columns of these tables (the rest stays)."""
        for name, drop in columns.items():
            table = self.table(name)
            setattr(self, name, table.drop_columns([c for c in drop if c in table.column_names]))

    def time_span_ns(self) -> tuple[int, int] | None:
        """Earliest start and latest end over kernels and host ops, or None for an empty profile."""
        return _time_span([self.table(name) for name in ("kernels", "host_ops", "api_calls")])

    def summary(self) -> dict[str, Any]:
        return _summary(self.meta, self.time_span_ns(), self.kernels.num_rows, self.host_ops.num_rows,
                        self.steps.num_rows)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write one Parquet file per table and ``profile.json``; returns the folder."""
        return save_tables(directory, self.meta, {name: self.table(name) for name in TABLE_NAMES})

    @classmethod
    def load(cls, directory: str | os.PathLike[str], tables: tuple[str, ...] | None = None,
             columns: ColumnSet | None = None) -> Profile:
        """Load a saved profile; ``tables`` limits which tables are read (the rest stay empty).

        ``columns`` reads only the columns a step declares (``diagnose_columns()``, ``COMPARE_COLUMNS``):
        the tables it leaves out stay empty, the columns it leaves out are absent, and text stays
        dictionary-encoded (most ``pyarrow.compute`` functions take either; the regex and case functions do
        not, so their callers cast to text first, and a dictionary lists values a row subset may lack). On a
        1 GB simulated ascend_pt profile its four big tables hold 173 MB this way instead of 371 MB
        (measured).
        """
        src = Path(directory)
        doc = json.loads((src / "profile.json").read_text(encoding="utf-8"))
        meta = ProfileMeta.from_dict(doc.get("meta", {}))
        loaded: dict[str, pa.Table] = {}
        names = [n for n in TABLE_NAMES if n in columns] if columns is not None else (tables or TABLE_NAMES)
        for name in names:
            if tables is not None and name not in tables:
                continue
            path = src / f"{name}.parquet"
            if path.exists():
                loaded[name] = (read_table(path, name) if columns is None else
                                read_table(path, name, columns[name], dictionary_text=True))
        if columns is None:
            return cls(meta=meta, **loaded)
        # already conformed to the projection: the constructor would add back every canonical column
        profile = cls.__new__(cls)
        profile.meta = meta
        for name in TABLE_NAMES:
            setattr(profile, name, loaded[name] if name in loaded else empty_table(name))
        return profile


# Integer columns whose values repeat (lanes, devices, steps, launch shapes): dictionary-encoded in Parquet
# like text. Times and correlation ids are nearly unique: building a dictionary for them, which Parquet then
# drops, cost a quarter of a kernel table's write time.
REPEATED_INT_COLUMNS = frozenset({"pid", "tid", "stream_id", "device_id", "step_id", "block_dim",
                                  "mix_block_dim", "model_id", "context_id", "infer_id"})
TIME_COLUMNS = ("start_ns", "dur_ns", "ts_ns", "end_ns")  # the columns Parquet keeps min/max statistics for


def parquet_dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns of a table with this schema worth dictionary-encoding in Parquet (repeated values)."""
    return [f.name for f in schema if f.name in REPEATED_INT_COLUMNS or not (
        pa.types.is_integer(f.type) or pa.types.is_floating(f.type))]


# How saved tables are compressed: zstd for a profile that is kept (the smallest files). A read's scratch
# copy, loaded once and deleted (``formats.open_profiles``), takes LZ4 (``scratch_output``): ``pypto analyze``
# of a 1 GB ascend_pt folder, twice each at load 4: 10.0-10.5 CPU-s and 520-530 MB peak with LZ4, 11.5-12.3
# and 548-554 MB with zstd, 10.8-10.9 and 539-544 MB uncompressed. Process-wide, not per thread: the readers
# write from their own threads.
_COMPRESSION = {"codec": "zstd"}


def output_compression() -> str:
    return _COMPRESSION["codec"]


@contextmanager
def scratch_output() -> Iterator[None]:
    """Tables written inside take the cheapest codec (they are read back once, then deleted)."""
    before = _COMPRESSION["codec"]
    _COMPRESSION["codec"] = "lz4"
    try:
        yield
    finally:
        _COMPRESSION["codec"] = before


# What a streaming writer gives ``parquet_sink.ParquetStream`` (and ``rewrite_parquet``,
# ``concat_parquet``) so that its files are encoded as ``save_tables`` encodes them.
STREAM_ENCODING: dict[str, Any] = {"dictionary_columns": parquet_dictionary_columns,
                                   "statistics_columns": TIME_COLUMNS}


def save_tables(directory: str | os.PathLike[str], meta: ProfileMeta, tables: dict[str, pa.Table]) -> Path:
    """Write ``tables`` as Parquet and ``meta`` as ``profile.json`` into ``directory``: with every table of
    a profile, that is ``Profile.save``; a streaming reader (``write_*``) writes its big tables itself and
    the rest here."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    from pypto_core.formats.parquet_sink import cap_text
    from pypto_core.limits import current_limits

    limits = current_limits()
    for name, table in tables.items():
        table = conform(name, table)
        if table.num_rows > limits.max_table_rows:
            raise InputError("", msg("more than {n} rows in table {table} (the deployment's limit)",
                                     n=limits.max_table_rows, table=name))
        table = pa.Table.from_batches([cap_text(b, limits.max_text_chars) for b in table.to_batches()],
                                      schema=table.schema) if table.num_rows else table
        pq.write_table(table, out / f"{name}.parquet", compression=output_compression(),
                       use_dictionary=parquet_dictionary_columns(table.schema),
                       write_statistics=[c for c in TIME_COLUMNS if c in table.column_names])
    save_meta(out, meta)
    return out


def save_meta(directory: str | os.PathLike[str], meta: ProfileMeta) -> None:
    """Write (or rewrite) a saved profile's ``profile.json``."""
    doc = {"schema_version": SCHEMA_VERSION, "meta": meta.to_dict()}
    (Path(directory) / "profile.json").write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")


# Every column of every table, loaded the way ``Profile.load(columns=...)`` loads (text dictionary-encoded,
# the kernel writer's shape, dtype and format cells coded). The worker's diagnosis step loads a little less
# (``rules.diagnose.diagnosis_step_columns``: the kernels' PMU counters stay on disk).
EVERY_COLUMN: dict[str, None] = {name: None for name in TABLE_NAMES}

# What ``Profile.summary`` reads besides row counts (a ``ColumnSet``).
SUMMARY_COLUMNS: dict[str, tuple[str, ...]] = {name: ("start_ns", "dur_ns")
                                               for name in ("kernels", "host_ops", "api_calls")}


def saved_summary(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """``Profile.summary()`` of a saved profile, reading only row counts and the time columns."""
    src = Path(directory)
    doc = json.loads((src / "profile.json").read_text(encoding="utf-8"))
    meta = ProfileMeta.from_dict(doc.get("meta", {}))
    present = {name: src / f"{name}.parquet" for name in TABLE_NAMES if (src / f"{name}.parquet").exists()}
    rows = {name: pq.ParquetFile(path).metadata.num_rows for name, path in present.items()}
    times = [pq.read_table(present[name], columns=["start_ns", "dur_ns"])
             for name in ("kernels", "host_ops", "api_calls") if name in present]
    return _summary(meta, _time_span(times), rows.get("kernels", 0), rows.get("host_ops", 0),
                    rows.get("steps", 0))


_SPAN_SLICE_ROWS = 1 << 20


def _time_span(tables: list[pa.Table]) -> tuple[int, int] | None:
    import pyarrow.compute as pc

    lo: int | None = None
    hi: int | None = None
    for t in tables:
        if t.num_rows == 0:
            continue
        start = pc.min(t["start_ns"]).as_py()
        # the ends a slice of rows at a time: over 4.3 M host calls, whole-column sums held 70 MB at the
        # analysis's peak
        ends = [pc.max(pc.add(part["start_ns"], pc.fill_null(part["dur_ns"], 0))).as_py()
                for part in (t.slice(at, _SPAN_SLICE_ROWS) for at in range(0, t.num_rows, _SPAN_SLICE_ROWS))]
        end = max((e for e in ends if e is not None), default=None)
        if start is None or end is None:
            continue
        lo = start if lo is None else min(lo, start)
        hi = end if hi is None else max(hi, end)
    return None if lo is None or hi is None else (lo, hi)


def _summary(meta: ProfileMeta, span: tuple[int, int] | None, kernels: int, host_ops: int,
             steps: int) -> dict[str, Any]:
    warnings, messages = stored_texts(meta.warnings)
    return {
        "format": meta.format,
        "source": meta.source,
        "rank": meta.rank,
        "device": meta.device,
        "simulated": meta.simulated,
        "kernel_count": kernels,
        "host_op_count": host_ops,
        "steps": steps,
        "start_ns": span[0] if span else None,
        "end_ns": span[1] if span else None,
        "duration_ns": (span[1] - span[0]) if span else 0,
        "warnings": warnings,
        "warning_messages": messages,  # per warning, its message (pypto_core.i18n) or None
    }


@dataclass
class ProfileGroup:
    """Several ranks read from one folder or archive (one ``Profile`` per rank)."""

    profiles: list[Profile] = field(default_factory=list)
    source: str = ""
    warnings: list[Text] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        return len(self.profiles)

    def primary(self) -> Profile:
        """The lowest rank, which single-profile consumers use."""
        return min(self.profiles, key=lambda p: (p.meta.rank is None, p.meta.rank or 0))
