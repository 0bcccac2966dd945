"""Image-free rows → tf.train.Example bytes a whole Arrow batch at a time (the columnar twin of rows.row_encoding).

`prepare_batch` gives every row of a batch its split (or the reason it is discarded), `TableEncoder.encode`
turns the batch into serialized Examples. Each column is checked and converted column-wise (NumPy /
Arrow compute) into value lists that tfrecorder.format.column_wire frames as map entries and joins
into records (tfrecorder.format.example_encoder's bytes exactly), so no Python code runs per row on
the common paths.

The contract is the row path's, exactly: values arrive as the row path sees them (the driver-staged
Parquet of a DataFrame, a Parquet file, or CSV text), and anything a vectorised path does not
recognise is handed, value by value, to the row path's own functions (`prepare_row`'s checks,
`row_encoding.input_feature`), so reasons and values can only agree. Distinct text values are converted once
(splits, labels, booleans, categories), which keeps even those paths cheap.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfrecorder.core import splits
from tfrecorder.core import types
from tfrecorder.format.column_wire import (ValueLists, binary_rows, bytes_list_entries, entry_key, example_records,
                                           map_entries, packed_numbers)
from tfrecorder.format.example_encoder import Feature, value_list_bytes
from tfrecorder.errors import RowError
from tfrecorder.rows.row_encoding import empty_image_uri, input_feature, split_key
from tfrecorder.rows.value_coercion import INT64_MAX, is_missing, multi_label_names, to_int
from tfrecorder.core.schema import Schema

SPLITS = splits.SPLITS  # split codes index this: 0 TRAIN, 1 VALIDATION, 2 TEST
DISCARDED = -1
_CODE = {name: code for code, name in enumerate(SPLITS)}

# Text (CSV) that Arrow parses exactly as Python's int() / float() / pandas.Timestamp() would.
_INT_TEXT = r"^-?[0-9]{1,18}$"
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"  # JSON's number grammar
FLOAT_TEXT = rf"^{_NUMBER}$"
DATETIME_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})?$"
_INT_ELEMENT = r"-?(?:0|[1-9][0-9]{0,17})"
# Bytes of plain decimal numbers: text of only these that Arrow casts is a number Python parses to the
# same value (hex such as "0x1F", which Arrow's integer cast takes and int() refuses, or "nan" and
# "inf", have other bytes). A quick check on a whole column, before the pattern's value by value.
_INTEGER_BYTES = b"0123456789-"
_DECIMAL_BYTES = _INTEGER_BYTES + b"+.eE"


@dataclasses.dataclass
class Prepared:
    """Each row's split code (DISCARDED when `reasons` holds the row) and the rows discarded so far."""

    codes: np.ndarray  # int8 per row
    reasons: dict[int, str]  # row → the first reason it is discarded for

    def discard(self, row: int, reason: str) -> None:
        if row not in self.reasons:
            self.reasons[row] = reason
            self.codes[row] = DISCARDED


@dataclasses.dataclass
class EncodedBatch:
    """The records of a batch's kept rows, in row order, with their split codes and unknown-label counts."""

    records: pa.LargeBinaryArray
    codes: np.ndarray  # split code of each record
    unknown_labels: np.ndarray  # labels not in the vocabulary, per record
    discards: list[tuple[int, str]]  # (row in the batch, reason), in row order
    parsed: dict[str, pa.Array] = dataclasses.field(default_factory=dict)  # text columns parsed (Column.parsed)

    def parsed_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """`batch` (the one encoded) with its text number columns as the encoder parsed them: what the
        statistics read (tfrecorder.rows.dataset_statistics takes those values as they are, where it
        would parse the text to the same numbers again)."""
        if not self.parsed:
            return batch
        columns = [self.parsed.get(name, batch.column(index)) for index, name in enumerate(batch.schema.names)]
        return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def split_runs(codes: np.ndarray) -> tuple[Optional[np.ndarray], list[tuple[int, int, int]]]:
    """Records grouped by split, each split's in their own order: the stable order that groups them (None
    when they already are, as in a batch of one split) and (split code, start, stop) of each split's run
    in that order. One take of a batch's records and rows then serves every split, where a take per
    split copied them once per split."""
    codes = np.asarray(codes)
    if not len(codes):
        return None, []
    order = None if bool((codes[1:] >= codes[:-1]).all()) else np.argsort(codes, kind="stable")
    grouped = codes if order is None else codes[order]
    starts = np.flatnonzero(np.diff(grouped)) + 1
    bounds = [0, *starts.tolist(), len(codes)]
    return order, [(int(grouped[start]), start, stop) for start, stop in zip(bounds[:-1], bounds[1:])]


def _is_text(array: pa.Array) -> bool:
    return pa.types.is_string(array.type) or pa.types.is_large_string(array.type)


def _is_bytes(array: pa.Array) -> bool:
    return _is_text(array) or pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)


def distinct(array: pa.Array) -> Optional[tuple[list, np.ndarray]]:
    """(distinct python values + [None], index of each row's value in it) of a text, bytes, integer or
    boolean column; None for other types (floats: -0.0 and 0.0 are one value to a hash, two to str())."""
    if not (_is_bytes(array) or pa.types.is_integer(array.type) or pa.types.is_boolean(array.type)):
        return None
    encoded = pc.dictionary_encode(array)
    values = encoded.dictionary.to_pylist() + [None]
    return values, encoded.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)


def converted(array: pa.Array, convert: Callable[[Any], Any]) -> tuple[np.ndarray, np.ndarray]:
    """(`convert` of each distinct python value (None for nulls) as an object array, each row's index in
    it): each distinct value of a text, bytes, integer or boolean column is converted once."""
    found = distinct(array)
    values, indices = found if found else (array.to_pylist(), np.arange(len(array)))
    results = np.empty(len(values), dtype=object)
    results[:] = [convert(v) for v in values]
    return results, indices


def per_value(array: pa.Array, convert: Callable[[Any], Any]) -> np.ndarray:
    """`convert` of each row's python value (None for nulls), as an object array (see `converted`)."""
    results, indices = converted(array, convert)
    return results[indices]


def _all_match(array: pa.Array, pattern: str) -> bool:
    """Whether every present (non-null) text value matches `pattern` (and there is at least one)."""
    present = array.drop_null()
    return len(present) > 0 and bool(pc.all(pc.match_substring_regex(present, pattern)).as_py())


def _only_bytes(array: pa.Array, allowed: bytes) -> bool:
    """Whether every byte of a text column's values is one of `allowed` (the bytes under null slots too: a
    stricter answer, never a looser one). Deleting the allowed bytes from a copy of the values' bytes
    leaves nothing exactly then: a C loop at ~0.3 ns a byte, where a NumPy table lookup took ~2 ns."""
    offsets_buffer, data = array.buffers()[1:3]
    width = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=width)[array.offset:array.offset + len(array) + 1]
    if data is None or not len(offsets) or offsets[-1] == offsets[0]:
        return True
    return not memoryview(data)[int(offsets[0]):int(offsets[-1])].tobytes().translate(None, allowed)


def _text_cast(array: pa.Array, target: pa.DataType, allowed: bytes, pattern: str) -> Optional[pa.Array]:
    """Text numbers (at least one present) cast by Arrow to `target` where Python's int() / float() gives
    the same values: when every byte is `allowed` (a whole-column check) or else every present value
    matches `pattern` (a regular expression per value), and Arrow's cast takes every value; None
    otherwise (the row path decides, value by value)."""
    if array.null_count == len(array) or not (_only_bytes(array, allowed) or _all_match(array, pattern)):
        return None
    try:
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. out of range: the row path decides
        return None


# ---------------------------------------------------------------- split and label checks (prepare_row)

def _split_of(value: Any) -> tuple[Optional[str], Optional[str]]:
    split = splits.normalize_split(value)
    if split is None:
        return None, f"unknown split: {value!r} (expected TRAIN, VALIDATION, TEST or UNASSIGNED)"
    return split, None


def _label_check(role: types.ColumnType, column: str) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        if is_missing(value) or (isinstance(value, str) and not value.strip()):
            return f"empty label: column {column!r}"
        try:
            if role == types.IntegerLabel:
                to_int(value, column, "integer label")
            elif role == types.MultiLabel:
                multi_label_names(value, column)
        except RowError as exc:
            return str(exc)
        return None
    return check


def prepare_batch(batch: pa.RecordBatch, schema: Schema, split_ratios: Sequence[float],
                  content_splits: bool = False) -> Prepared:
    """What `prepare_row` decides for each row: its split, or the first reason it is discarded for.
    `content_splits` (counting a job of image rows): UNASSIGNED rows are left TRAIN, the possible split
    of a row whose split the encoder chooses from its image bytes (table_stats.StatsCounter)."""
    rows = batch.num_rows
    prepared = Prepared(np.full(rows, _CODE[splits.TRAIN], dtype=np.int8), {})
    unassigned = np.ones(rows, dtype=bool)
    if schema.split_column:
        results, indices = converted(batch.column(schema.split_column), _split_of)
        codes = np.array([_CODE.get(split, DISCARDED) for split, _ in results], dtype=np.int8)
        prepared.codes[:] = codes[indices]
        unassigned = np.array([split == splits.UNASSIGNED for split, _ in results], dtype=bool)[indices]
        prepared.codes[unassigned] = _CODE[splits.TRAIN]
        _discard_rows(prepared, [reason for _, reason in results], indices)
    for column in schema.label_columns:
        results, indices = converted(batch.column(column), _label_check(schema[column], column))
        _discard_rows(prepared, list(results), indices)
    for column in schema.image_columns:
        results, indices = converted(batch.column(column), functools.partial(empty_image_uri, column=column))
        _discard_rows(prepared, list(results), indices)
    pending = np.flatnonzero(unassigned & (prepared.codes != DISCARDED))
    if len(pending) and not content_splits:  # assigned by hashing the whole row, as the row path does (python values of the row)
        keys = split_keys(batch.take(pa.array(pending)), schema)
        prepared.codes[pending] = splits.split_indices(keys, split_ratios)  # SPLITS order: the codes
    return prepared


def split_keys(batch: pa.RecordBatch, schema: Schema) -> list[str]:
    """row_encoding.split_key of each row of an image-free batch, built column by column: the JSON text
    json.dumps({column: str(value)}, sort_keys=True) writes, each column's texts made in one pass
    (`_json_texts`), then joined per row by Arrow."""
    if schema.image_columns:
        return [split_key(values, schema) for values in batch.to_pylist()]
    names, pieces = batch.schema.names, []
    for index, column in enumerate(sorted(schema)):
        values = batch.column(names.index(column)) if column in names else pa.nulls(batch.num_rows)
        pieces.append(_json_texts(values, ("{" if index == 0 else ", ") + _JSON_TEXT(column) + ": "))
    if not pieces:
        return ["{}"] * batch.num_rows
    return pc.binary_join_element_wise(*pieces, pa.scalar("}"), "").to_pylist()


_JSON_TEXT = json.encoder.encode_basestring_ascii  # a str as json.dumps writes it (ensure_ascii)
_PLAIN_TEXT = r"^[ !#-\[\]-~]*$"  # printable ASCII but " and \: a JSON string of it is the text in quotes


def _json_texts(values: pa.Array, prefix: str) -> pa.Array:
    """`prefix` + the JSON string of str(value) for each value (a missing one: "None", as str(None)).
    Integers, plain-ASCII strings and lists of numbers are made text by Arrow (str() of an int is its
    decimals, and none of these needs an escape); other values go through str() and json's escaping."""
    kind = values.type
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _is_number(kind.value_type):
        texts = pc.fill_null(_list_texts(values), "None")
    elif pa.types.is_integer(kind):
        texts = _number_texts(values)
    elif pa.types.is_string(kind) and pc.all(pc.match_substring_regex(values, _PLAIN_TEXT)).as_py() is not False:
        texts = pc.fill_null(values, "None")
    else:
        texts = pa.array(list(map(_JSON_TEXT, map(str, values.to_pylist()))), pa.string())
        return pc.binary_join_element_wise(prefix, texts, "")
    return pc.binary_join_element_wise(prefix + '"', texts, '"', "")  # texts JSON escapes nothing in


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) and not pa.types.is_float16(kind)


def _number_texts(values: pa.Array) -> pa.Array:
    """str() of each number (missing: "None"): Arrow's decimals for integers, Python's repr for floats."""
    if pa.types.is_integer(values.type):
        return pc.fill_null(values.cast(pa.string()), "None")
    return pa.array(list(map(str, values.to_pylist())), pa.string())


def _list_texts(values: pa.Array) -> pa.Array:
    """str() of each list of numbers, "[1.5, nan, None]" (a missing list: null), which JSON needs no escape
    for: the elements' texts joined by Arrow, no Python list made per row."""
    if not len(values):
        return pa.array([], pa.string())
    offsets = values.offsets.to_numpy()
    start, stop = int(offsets[0]), int(offsets[-1])
    elements = _number_texts(values.values.slice(start, stop - start))
    lists = type(values).from_arrays(pa.array(offsets - start, values.offsets.type), elements, mask=values.is_null())
    return pc.binary_join_element_wise("[", pc.binary_join(lists, ", "), "]", "")


def _discard_rows(prepared: Prepared, reasons: list, indices: np.ndarray) -> None:
    """Discard the rows whose distinct value has a reason (reasons[indices[row]] is not None)."""
    bad = np.array([reason is not None for reason in reasons], dtype=bool)
    if bad.any():
        for row in np.flatnonzero(bad[indices]).tolist():
            prepared.discard(row, reasons[indices[row]])


def _row_sums(lengths: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    cumulative = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=cumulative[1:])
    return cumulative[offsets[1:]] - cumulative[offsets[:-1]]


@dataclasses.dataclass
class Column:
    """One feature's value lists (tfrecorder.format.column_wire) and the rows its values discard."""

    values: ValueLists
    errors: dict[int, str]
    parsed: Optional[pa.Array] = None  # a text column's values as parsed column-wise: float64 / int64, or
    # lists of them (null where missing), the numbers the statistics would parse from the same text


def _fallback(array: pa.Array, column: str, role: types.ColumnType) -> Column:
    """The row path's own `input_feature`, value by value (each distinct text once)."""
    errors: dict[int, str] = {}

    def convert(value: Any) -> Any:
        if is_missing(value):
            return None
        try:
            return value_list_bytes(input_feature(role, value, column))
        except RowError as exc:
            return exc

    out = per_value(array, convert).tolist() if _is_bytes(array) else [convert(v) for v in array.to_pylist()]
    for row, result in enumerate(out):
        if isinstance(result, RowError):
            errors[row] = str(result)
            out[row] = None
    return Column(ValueLists.of_values(pa.array(out, pa.large_binary())), errors)


def _datetime_text(array: pa.Array) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(UTC epoch nanoseconds, present mask) of text that matches DATETIME_TEXT; None when a value is beyond
    1677..2262 or no date (the row path gives the reason). Arrow casts zone-less text itself, as UTC, to
    the values pandas parses (0.3 ms a 16k-row batch, not 2 ms); text with a zone, or that Arrow refuses
    for any other reason, is parsed by pandas, as the row path parses it."""
    try:
        nanos = array.cast(pa.timestamp("ns")).cast(pa.int64())
        return nanos.fill_null(0).to_numpy(), array.is_valid().to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    import pandas as pd

    try:
        stamps = pd.to_datetime(array.to_numpy(zero_copy_only=False), format="ISO8601", utc=True).as_unit("ns")
    except (ValueError, OverflowError):
        return None
    return np.asarray(stamps.asi8).copy(), ~np.asarray(stamps.isna())


def scalar_numbers(array: pa.Array, role: types.ColumnType) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(values as int64 or float64 in the role's stored form, present mask) of a numeric or text column;
    None when the row path must decide (values that do not all convert the plain way)."""
    kind = array.type
    text = _is_text(array)
    if role == types.DatetimeInput:
        if pa.types.is_timestamp(kind):
            try:
                nanos = array.cast(pa.timestamp("ns", kind.tz)).cast(pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            return nanos.fill_null(0).to_numpy(), array.is_valid().to_numpy(zero_copy_only=False)
        if text and _all_match(array, DATETIME_TEXT):
            return _datetime_text(array)
        if pa.types.is_integer(kind) and not pa.types.is_uint64(kind):
            return array.cast(pa.int64()).fill_null(0).to_numpy(), array.is_valid().to_numpy(zero_copy_only=False)
        return None
    present = array.is_valid().to_numpy(zero_copy_only=False)
    if role == types.DoubleInput:  # stored as the float64's bits
        doubles = _doubles(array, text)
        return None if doubles is None else (doubles[0].view(np.int64), doubles[1])
    if role.dtype == "int64":  # IntegerInput, IntegerLabel
        if pa.types.is_boolean(kind) or (pa.types.is_integer(kind) and not pa.types.is_uint64(kind)):
            return array.cast(pa.int64()).fill_null(0).to_numpy(), present
        if pa.types.is_uint64(kind):
            if pc.max(array).as_py() is not None and pc.max(array).as_py() > INT64_MAX:
                return None
            return array.cast(pa.int64()).fill_null(0).to_numpy(), present
        integers = _text_cast(array, pa.int64(), _INTEGER_BYTES, _INT_TEXT) if text else None
        return None if integers is None else (integers.fill_null(0).to_numpy(), present)
    if role == types.FloatInput:
        return _doubles(array, text)
    return None


def _doubles(array: pa.Array, text: bool) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """float64 values and present mask (NaN counts as missing, as is_missing says) of a number column."""
    kind = array.type
    if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        values = array.cast(pa.float64()).fill_null(np.nan).to_numpy()
        if pa.types.is_floating(kind):
            present = ~np.isnan(values)
        else:
            present = array.is_valid().to_numpy(zero_copy_only=False)
        return values, present
    doubles = _text_cast(array, pa.float64(), _DECIMAL_BYTES, FLOAT_TEXT) if text else None
    return None if doubles is None else (doubles.fill_null(np.nan).to_numpy(), array.is_valid().to_numpy(zero_copy_only=False))


def _list_elements(array: pa.Array, role: types.ColumnType) -> Optional[pa.Array]:
    """A list column as an Arrow list array with elements of the element role's plain type, or None."""
    kind = array.type
    if pa.types.is_fixed_size_list(kind):
        array = array.cast(pa.list_(kind.value_type))
        kind = array.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return array
    if not _is_text(array):
        return None
    element = role.element
    number = _INT_ELEMENT if element == types.IntegerInput else _NUMBER if element != types.StringInput else None
    if number is None or not _all_match(array, rf"^\[{number}(?:, ?{number})*\]$"):
        return None
    inner = pc.utf8_slice_codeunits(array, 1, -1)  # JSON arrays of numbers, as json.dumps writes them
    parts = pc.split_pattern(inner, ",")
    trimmed = pc.utf8_trim_whitespace(pc.list_flatten(parts))
    target = pa.int64() if element == types.IntegerInput else pa.float64()
    offsets = parts.offsets
    try:
        values = trimmed.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. out of range: the row path decides
        return None
    return pa.LargeListArray.from_arrays(offsets.cast(pa.int64()), values, mask=parts.is_null())


def number_lists(array: pa.Array, role: types.ColumnType) -> Optional[pa.Array]:
    """A text list column of a number element role (IntegerInput, FloatInput) parsed column-wise as the row
    path parses each cell (value_coercion.input_values): every present cell JSON array text of numbers, of
    the role's length when it has one; None when any is not (the row path decides, cell by cell)."""
    if role.element not in (types.IntegerInput, types.FloatInput) or not _is_text(array):
        return None
    lists = _list_elements(array, role)
    if lists is None:
        return None
    if role.length is not None:
        lengths = pc.list_value_length(lists).drop_null()
        if len(lengths) and not pc.all(pc.equal(lengths, role.length)).as_py():
            return None
    return lists


def _list_column(array: pa.Array, column: str, role: types.ColumnType) -> Optional[Column]:
    lists = _list_elements(array, role)
    if lists is None:
        return None
    element, flat = role.element, pc.list_flatten(lists)
    if element == types.StringInput and not _is_bytes(flat) or element != types.StringInput and not (
            pa.types.is_floating(flat.type) or pa.types.is_integer(flat.type) or pa.types.is_boolean(flat.type)):
        return None
    if pa.types.is_uint64(flat.type) or (element == types.IntegerInput and pa.types.is_floating(flat.type)):
        return None
    present = lists.is_valid().to_numpy(zero_copy_only=False)
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    bad = np.zeros(len(lengths), dtype=bool)
    if flat.null_count:
        bad |= _row_sums(flat.is_null().to_numpy(zero_copy_only=False).astype(np.int64), offsets) > 0
    if role.length is not None:
        bad |= present & (lengths != role.length)
    errors: dict[int, str] = {}
    for row in np.flatnonzero(bad & present).tolist():  # the row path says why, in its own words
        try:
            input_feature(role, array.slice(row, 1).to_pylist()[0], column)
        except RowError as exc:
            errors[row] = str(exc)
    keep = present & ~bad
    if element == types.StringInput:
        entries = bytes_list_entries(flat.fill_null(""))
        sizes = pc.binary_length(entries).to_numpy(zero_copy_only=False).astype(np.int64)
        buffer = entries.buffers()[2]
        data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.empty(0, np.uint8)
        row_bytes = _row_sums(sizes, offsets)
        return Column(ValueLists.of_values(binary_rows(data[:int(sizes.sum())], row_bytes, keep)), errors)
    numbers = flat.cast(pa.float64()).fill_null(0).to_numpy() if element != types.IntegerInput else \
        flat.cast(pa.int64()).fill_null(0).to_numpy()
    if element == types.DoubleInput:
        numbers = numbers.view(np.int64)
    packed, sizes = packed_numbers(numbers, role.feature_dtype)
    parsed = lists if _is_text(array) and element in (types.IntegerInput, types.FloatInput) else None  # as number_lists
    return Column(ValueLists.of_values(binary_rows(packed, _row_sums(sizes, offsets), keep), packed=True), errors,
                  parsed)


def _labels(array: pa.Array, index: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Vocabulary index of each StringLabel value (-1: not in the vocabulary), as the row path looks it up."""
    results, indices = converted(array, lambda value: index.get(str(value), -1))
    found = np.array(results.tolist(), dtype=np.int64)[indices]
    return found, found < 0


class TableEncoder:
    """Encode batches of image-free rows of one table (see the module docstring)."""

    def __init__(self, schema: Schema, vocabularies: Mapping[str, Sequence[str]]) -> None:
        if schema.image_columns:
            raise ValueError("the columnar encoder writes image-free rows only")
        self.schema = schema
        self.label_index = {col: {label: i for i, label in enumerate(v)} for col, v in vocabularies.items()}
        self.keys = {column: entry_key(column) for column in schema}

    def column(self, array: pa.Array, column: str, unknown: np.ndarray) -> Column:
        role = self.schema[column]
        if role == types.StringLabel:
            found, missing = _labels(array, self.label_index.get(column, {}))
            unknown += missing
            return Column(ValueLists.one_number(found, np.ones(len(found), dtype=bool), "int64"), {})
        if role == types.MultiLabel:
            known = self.label_index.get(column, {})
            out, errors = [], {}
            for row, value in enumerate(array.to_pylist()):
                try:
                    names = multi_label_names(value, column)
                except RowError as exc:
                    errors[row] = str(exc)
                    out.append(None)
                    continue
                unknown[row] += sum(name not in known for name in names)
                out.append(value_list_bytes(Feature("int64", [known[n] for n in names if n in known])))
            return Column(ValueLists.of_values(pa.array(out, pa.large_binary())), errors)
        if role.is_list:
            return _list_column(array, column, role) or _fallback(array, column, role)
        if role == types.StringInput:
            if not _is_bytes(array):
                return _fallback(array, column, role)
            return Column(ValueLists.of_values(array, packed=True, single=True), {})
        numbers = scalar_numbers(array, role)
        if numbers is None:
            return _fallback(array, column, role)
        parsed = None
        if _is_text(array) and role in (types.IntegerInput, types.FloatInput, types.DoubleInput, types.DatetimeInput):
            values = numbers[0].view(np.float64) if role == types.DoubleInput else numbers[0]
            parsed = pa.array(values, mask=~numbers[1])  # a datetime: its epoch nanoseconds
        return Column(ValueLists.one_number(numbers[0], numbers[1], role.feature_dtype), {}, parsed)

    def encode(self, batch: pa.RecordBatch, prepared: Prepared) -> EncodedBatch:
        """The Examples of the rows `prepared` kept; rows an input value discards are added to `prepared`."""
        rows = batch.num_rows
        unknown = np.zeros(rows, dtype=np.int64)
        entries, sizes, parsed = {}, np.zeros(rows, dtype=np.int64), {}
        for column in self.schema:
            if self.schema[column] == types.SplitKey:
                continue
            found = self.column(batch.column(column), column, unknown)
            if found.parsed is not None:
                parsed[column] = found.parsed
            for row, reason in sorted(found.errors.items()):
                prepared.discard(row, reason)
            entries[column], lengths = map_entries(self.keys[column], self.schema[column].feature_dtype, found.values)
            sizes += lengths
        records = example_records([entries[name] for name in sorted(entries)], sizes)
        keep = np.flatnonzero(prepared.codes != DISCARDED)
        if len(keep) < rows:
            records = records.take(pa.array(keep))
        return EncodedBatch(records, prepared.codes[keep], unknown[keep], sorted(prepared.reasons.items()), parsed)


def _rows_with_new_labels(batch: pa.RecordBatch, columns: Sequence[str], known: dict[str, set]) -> pa.RecordBatch:
    """The rows whose label in one of `columns` is not among its `known` labels yet. Once a TRAIN row was
    found, only they can add to the vocabularies, so the others' splits need not be decided: for a table
    without a split column that is a hash of each row's text, most of counting such a table."""
    keep = None
    for column in columns:
        values = batch.column(column)
        distinct = pc.unique(values)
        labels = known.get(column, ())
        new = distinct.filter(pa.array([str(label) not in labels for label in distinct.to_pylist()], pa.bool_()))
        if len(new):
            rows = pc.is_in(values, value_set=new)  # a missing label too: its row is discarded, not counted
            keep = rows if keep is None else pc.or_(keep, rows)
    return batch.slice(0, 0) if keep is None else batch.filter(keep)


def splits_whole_rows(batch: pa.RecordBatch, schema: Schema, content_splits: bool = False) -> bool:
    """Whether `prepare_batch` splits a row of `batch` by a hash of its every column: an UNASSIGNED row of
    a table whose splits are not chosen from image bytes (each distinct split value decided once)."""
    if content_splits:
        return False
    if not schema.split_column:
        return True
    results, indices = converted(batch.column(schema.split_column), _split_of)
    unassigned = np.array([split == splits.UNASSIGNED for split, _reason in results], dtype=bool)
    return bool(unassigned[indices].any())


def columns_counting_needs(schema: Schema) -> set[str]:
    """The columns `count_batch` needs besides those whose missing values it counts (the split, label and
    image columns), unless `splits_whole_rows` says a row's split is a hash of the whole row."""
    return {column for column in (schema.split_column, *schema.label_columns, *schema.image_columns)
            if column is not None}


def count_batch(batch: pa.RecordBatch, schema: Schema, split_ratios: Sequence[float], stats,
                content_splits: bool = False) -> None:
    """Add a batch to a TableStats exactly as StatsCounter.count adds its rows (tfrecorder.rows.table_stats)."""
    stats.rows += batch.num_rows
    for column in batch.schema.names:  # the schema's columns (those read: see count_table.counted_columns)
        if column in schema and column not in stats.nullable and batch.column(column).null_count:
            stats.nullable.add(column)
    label_columns = schema.columns_of(types.StringLabel)
    multi_label_columns = schema.columns_of(types.MultiLabel)
    if stats.train_found and not (label_columns or multi_label_columns):
        return
    if stats.train_found and not multi_label_columns:
        batch = _rows_with_new_labels(batch, label_columns, stats.labels)
        if not batch.num_rows:
            return
    train = np.flatnonzero(prepare_batch(batch, schema, split_ratios, content_splits).codes == _CODE[splits.TRAIN])
    if not len(train):
        return
    stats.train_found = True
    rows = batch.take(pa.array(train))
    for column in label_columns:
        values = rows.column(column)
        labels = pc.unique(values).to_pylist() if _is_bytes(values) else values.to_pylist()
        stats.labels.setdefault(column, set()).update(str(label) for label in labels)
    for column in multi_label_columns:
        for value in rows.column(column).to_pylist():
            stats.labels.setdefault(column, set()).update(multi_label_names(value, column))
