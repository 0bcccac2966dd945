"""Parquet files as a conversion source: one file, a directory of them or a glob, local or gs://.

The driver reads only the files' footers (Arrow schema, row groups, row counts; in parallel for
remote files) and the first rows of the first row group (a sample for the checks that look at
values, such as image paths); the pipeline reads every row group on its own (`ParquetPart`). The
files must agree on their columns and Arrow types; that is checked before any work starts, as are a
directory or glob that holds no Parquet file, duplicate column names, and a column Arrow cannot read
(a fixed-size list of 0 elements: Arrow writes it but fails reading it back), found by the sample.

A file is recognised by its name (.parquet, .parq, .pq). In a directory (read recursively) and in a
glob's matches, names starting with "_" or "." (Spark's _SUCCESS, .crc checksums, _temporary/) are
skipped; a directory's other non-Parquet files are ignored, a glob's must all be Parquet files.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tfrecorder.io import storage
from tfrecorder.core.schema import check_column_names
from tfrecorder.sources.parquet_parts import ParquetPart, read_row_group_batches, row_group_parts

logger = logging.getLogger("tfrecorder")

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
FOOTER_THREADS = 16  # remote footers read at once
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclasses.dataclass(frozen=True)
class ParquetFiles:
    source: str  # as given: a file, a directory or a glob
    files: tuple[str, ...]
    parts: tuple[ParquetPart, ...]  # every non-empty row group (large ones as slices), file by file
    schema: pa.Schema  # the files' common Arrow schema
    rows: int  # exact, from the footers
    base_dir: str  # relative image paths are resolved against this


def is_parquet_name(path: str) -> bool:
    return path.rstrip("/").lower().endswith(PARQUET_SUFFIXES)


def is_glob(path: str) -> bool:
    return bool(_GLOB_CHARS.search(path))


def _skipped(relative: str) -> bool:
    return any(name.startswith(("_", ".")) for name in relative.split("/"))


def _relative(path: str, root: str) -> str:
    return path[len(root):].replace(os.sep, "/").strip("/")


def parquet_files_in(root: str, listed: list[str]) -> list[str]:
    """The Parquet files among a directory's listing (hidden and _-prefixed names skipped)."""
    return [path for path in listed if is_parquet_name(path) and not _skipped(_relative(path, root))]


def glob_root(pattern: str) -> str:
    """The directory part of a glob before its first wildcard: `gs://b/data/*/x.parquet` → `gs://b/data`."""
    head = pattern[: _GLOB_CHARS.search(pattern).start()]
    root = head[: head.rfind("/")] if "/" in head else ""
    return root or ("/" if head.startswith("/") else ".")


def glob_regex(pattern: str) -> re.Pattern:
    """A glob as a regular expression over whole paths: `*` and `?` stay inside one path segment,
    `**` spans segments (`a/**/b` also matches `a/b`), `[...]` / `[!...]` are character classes."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + re.escape(body[1:]) if body.startswith("!") else re.escape(body)) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def match_glob(pattern: str) -> list[str]:
    """Files matching a glob (local or gs://), sorted, hidden and _-prefixed names skipped."""
    if not storage.is_remote(pattern):
        pattern = os.path.abspath(pattern).replace(os.sep, "/")
    root = glob_root(pattern)
    if storage.is_remote(pattern) and not root.partition("://")[2]:
        raise ValueError(f"glob {pattern}: name a bucket before the first wildcard (gs://bucket/...)")
    regex = glob_regex(pattern)
    return [path for path in storage.list_files(root)
            if regex.match(path.replace(os.sep, "/")) and not _skipped(_relative(path, root))]


def _footer(path: str) -> tuple[pa.Schema, list[int]]:
    """(Arrow schema, rows of each row group) from a file's footer; ValueError if it is not Parquet."""
    with storage.open_read(path) as raw:
        try:
            parquet = pq.ParquetFile(raw)
        except (pa.ArrowInvalid, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise  # a storage failure (tfrecorder.io.storage errors carry an errno), not a bad file
            raise ValueError(f"{path} is not a readable Parquet file: {exc}") from None
        metadata = parquet.metadata
        return parquet.schema_arrow, [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


def read_footers(paths: list[str]) -> list[tuple[pa.Schema, list[int]]]:
    """Every file's footer (see _footer); remote files in parallel."""
    if len(paths) > 1 and any(storage.is_remote(p) for p in paths):
        with ThreadPoolExecutor(min(FOOTER_THREADS, len(paths)), thread_name_prefix="tfrecorder-footers") as pool:
            return list(pool.map(_footer, paths))
    return [_footer(path) for path in paths]


_PANDAS_INDEX = re.compile(r"__index_level_\d+__")  # an unnamed index pandas stored as a column


def _logical(kind: pa.DataType) -> object:
    """What two files must agree on about a column's type: writers differ in offsets (string or
    large_string: pandas 3 writes large ones; list or large_list) and in timestamp units, which
    change neither the role nor the values."""
    if pa.types.is_large_string(kind) or getattr(pa.types, "is_string_view", bool)(kind):
        return pa.string()
    if pa.types.is_large_binary(kind) or getattr(pa.types, "is_binary_view", bool)(kind):
        return pa.binary()
    if pa.types.is_large_list(kind) or pa.types.is_list(kind):
        return ("list", _logical(kind.value_type))
    if pa.types.is_timestamp(kind):
        return ("timestamp", kind.tz)
    if pa.types.is_dictionary(kind):
        return ("dictionary", _logical(kind.value_type))
    return kind


def check_schemas_agree(paths: list[str], schemas: list[pa.Schema]) -> pa.Schema:
    """The files' common schema: same column names in the same order, same types (see _logical; a
    column that is all null in one file, Arrow type null, takes the other files' type); nullability
    and file metadata may differ. Unnamed pandas index columns are left out, as pd.read_parquet leaves them out of the
    frame's columns. One ValueError naming the first file that differs, and how."""
    schemas = [pa.schema([field for field in schema if not _PANDAS_INDEX.fullmatch(field.name)]) for schema in schemas]
    fields, origins = list(schemas[0]), [paths[0]] * len(schemas[0])
    for path, schema in zip(paths[1:], schemas[1:]):
        if schema.names != schemas[0].names:
            raise ValueError(f"Parquet files disagree on their columns: {paths[0]} has {schemas[0].names}, "
                             f"{path} has {schema.names}")
        for i, field in enumerate(schema):
            if pa.types.is_null(fields[i].type):
                fields[i], origins[i] = field, path
            elif _logical(field.type) != _logical(fields[i].type) and not pa.types.is_null(field.type):
                raise ValueError(f"Parquet files disagree on column {field.name!r}: {fields[i].type} in "
                                 f"{origins[i]}, {field.type} in {path}")
    return pa.schema([field.with_nullable(True).remove_metadata() for field in fields])


def find_files(source: str, listed: Optional[list[str]] = None) -> tuple[list[str], str]:
    """(Parquet files of a source, directory relative image paths are resolved against).

    `source` is one .parquet file, a directory (whose listing the caller may pass as `listed`) or a
    glob. ValueError when a directory or glob holds no Parquet file."""
    remote = storage.is_remote(source)
    if listed is not None or storage.is_dir(source):
        root = source.rstrip("/") if remote else os.path.abspath(source)
        files = parquet_files_in(root, listed if listed is not None else storage.list_files(root))
        if not files:
            raise ValueError(f"directory {root} holds no Parquet files (*.parquet)")
        return files, root
    if is_glob(source) and not storage.exists(source):
        files = match_glob(source)
        if not files:
            raise ValueError(f"no files match {source}")
        root = glob_root(source if remote else os.path.abspath(source))
        return files, root if remote else os.path.normpath(root)
    path = source if remote else os.path.abspath(source)
    return [path], posixpath.dirname(path) if remote else os.path.dirname(path)


def open_parquet_files(source: str, listed: Optional[list[str]] = None) -> ParquetFiles:
    """Read the footers of a Parquet source's files and check they agree (see find_files)."""
    files, base_dir = find_files(source, listed)
    footers = read_footers(files)
    schema = check_schemas_agree(files, [schema for schema, _ in footers])
    check_column_names(schema.names)
    parts = tuple(part for path, (_, groups) in zip(files, footers)
                  for index, rows in enumerate(groups) if rows > 0 for part in row_group_parts(path, index, rows))
    rows = sum(sum(groups) for _, groups in footers)
    if len(files) > 1:
        logger.info("Parquet source %s: %d files, %d row groups, %d rows", source, len(files), len(parts), rows)
    return ParquetFiles(source, tuple(files), parts, schema, rows, base_dir)


_UNREADABLE = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)  # data Arrow refuses, not storage


def read_sample(source: ParquetFiles, rows: int) -> pd.DataFrame:
    """The first `rows` rows as a DataFrame (Arrow's pandas conversion), read from the first row groups.
    ValueError naming the first column Arrow cannot read."""
    try:
        table = _read_rows(source, source.schema.names, rows)
    except _UNREADABLE as exc:
        for field in source.schema:  # which column: each read alone, only once reading them all failed
            try:
                _read_rows(source, [field.name], rows)
            except _UNREADABLE as column_exc:
                raise ValueError(f"Parquet column {field.name!r} ({field.type}) cannot be read: "
                                 f"{str(column_exc).splitlines()[0]}") from None
        raise ValueError(f"Parquet source {source.source} cannot be read: {str(exc).splitlines()[0]}") from None
    try:
        return table.to_pandas()
    except (pa.ArrowException, ValueError, TypeError, OverflowError):  # types pandas cannot hold: python values
        return pd.DataFrame(table.to_pylist(), columns=table.column_names, dtype=object)


def _read_rows(source: ParquetFiles, columns: list[str], rows: int) -> pa.Table:
    """The first `rows` rows of `columns` as one Arrow table, read page by page: only the row groups'
    first pages, however large the row groups are."""
    tables, count = [], 0
    for part in source.parts:
        for batch in read_row_group_batches(part, columns=columns, batch_size=rows, streamed=True):
            tables.append(pa.Table.from_batches([batch.slice(0, rows - count)]))
            count += tables[-1].num_rows
            if count >= rows:
                break
        if count >= rows:
            break
    return pa.concat_tables(tables, promote_options="permissive") if tables else source.schema.empty_table()
