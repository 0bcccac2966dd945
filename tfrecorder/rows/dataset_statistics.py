"""Statistics of the rows a job writes, per split and per feature, in bounded memory (issue 29).

A `DatasetStatistics` is what one worker accumulates over the rows it encodes (columns of a batch at a
time: Arrow arrays, vectorised) and what the pipeline merges; every part of it is a mergeable sketch of
tfrecorder.rows.data_sketches, so its size depends on the number of splits and columns, never on rows.
`to_json(vocabularies)` gives the document written as statistics.json (docs/format.md, "statistics.json").

Per feature kind (from the column's role):
- numeric inputs (integer, float, double, datetime): count, missing, min/max/mean/std, zeros,
  quantiles and a histogram;
- string inputs: unique estimate, top values, lengths;
- lists: the length distribution (and the element statistics as above);
- labels: counts of each label (and, with the vocabulary, the classes missing from the split);
- images: width, height and byte-size distributions, channel and format counts.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.core.splits import SPLITS
from tfrecorder.errors import RowError
from tfrecorder.rows.columnar_encoder import FLOAT_TEXT, number_lists, scalar_numbers
from tfrecorder.rows.data_sketches import NumericSketch, TopValues, UniqueSketch, value_hashes
from tfrecorder.rows.value_coercion import input_values, is_missing, multi_label_names, to_epoch_ns

FORMAT_VERSION = 1
NUMERIC, STRING, LABEL, IMAGE = "numeric", "string", "label", "image"
LABEL_CAPACITY = 2000  # label counts are exact below this many classes per split
TOP_VALUES = 20

_NUMERIC_ROLES = ("IntegerInput", "FloatInput", "DoubleInput", "DatetimeInput")


def feature_kind(role: types.ColumnType) -> Optional[str]:
    """The statistics kind of a column role (None: no statistics, the split key)."""
    if role == types.SplitKey:
        return None
    if role == types.ImageUri:
        return IMAGE
    if role.is_label:
        return LABEL
    element = role.element or role
    return NUMERIC if element.name in _NUMERIC_ROLES else STRING


class FeatureStatistics:
    """The sketches of one feature in one split."""

    def __init__(self, kind: str, is_list: bool) -> None:
        self.kind, self.is_list = kind, is_list
        self.present = 0
        self.missing = 0
        self.lengths = NumericSketch() if is_list else None
        self.values = NumericSketch() if kind == NUMERIC else None
        self.unique = UniqueSketch() if kind == STRING else None
        self.top = TopValues(LABEL_CAPACITY if kind == LABEL else 200) if kind in (STRING, LABEL) else None
        self.text_lengths = NumericSketch() if kind == STRING else None
        if kind == IMAGE:
            self.width, self.height, self.bytes = NumericSketch(), NumericSketch(), NumericSketch()
            self.formats, self.channels = TopValues(50), TopValues(10)

    def merge(self, other: "FeatureStatistics") -> "FeatureStatistics":
        self.present += other.present
        self.missing += other.missing
        for name in ("lengths", "values", "unique", "top", "text_lengths", "width", "height", "bytes",
                     "formats", "channels"):
            mine = getattr(self, name, None)
            if mine is not None:
                mine.merge(getattr(other, name))
        return self

    def add_scalars(self, values: pa.Array) -> None:
        """Present (non-null) values of a scalar column, or the flattened elements of a list column."""
        if self.kind == NUMERIC:
            self.values.add(_numbers(values))
        elif self.kind in (STRING, LABEL):
            counts = pc.value_counts(values)
            distinct = counts.field("values")
            numbers = counts.field("counts").to_numpy()
            if _is_text_type(distinct.type):
                # text stays in Arrow: only the top values become str; the hashes are of the UTF-8 bytes
                # (value_hashes hashes a str as its UTF-8 bytes: the same hashes, without encoding each)
                self.top.add_many(distinct, numbers)
                texts = distinct.cast(pa.binary() if pa.types.is_string(distinct.type) else pa.large_binary())
                texts = texts.to_numpy(zero_copy_only=False)
            else:
                texts = np.asarray([_text(v) for v in distinct.to_numpy(zero_copy_only=False).tolist()], dtype=object)
                self.top.add_many(texts, numbers)
            if self.kind == STRING:  # texts: an object array of str, or of their UTF-8 bytes
                self.unique.add_hashes(value_hashes(texts, all_text=True))
                self.text_lengths.add(_lengths(values))

    def to_json(self, vocabulary: Optional[Sequence[str]] = None) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "count": self.present, "missing": self.missing}
        if self.lengths is not None:
            out["list_lengths"] = self.lengths.summary()
        if self.kind == NUMERIC:
            out["numeric"] = self.values.summary()
        elif self.kind == STRING:
            out["string"] = {"unique_estimate": self.unique.estimate(), "top_values": self.top.top(TOP_VALUES),
                             "top_exact": self.top.exact, "lengths": self.text_lengths.summary()}
        elif self.kind == LABEL:
            counts = self.top.top(LABEL_CAPACITY)
            out["labels"] = {"counts": counts, "exact": self.top.exact}
            if vocabulary is not None:
                seen = {entry["value"] for entry in counts}
                out["labels"]["missing_classes"] = [name for name in vocabulary if name not in seen]
        elif self.kind == IMAGE:
            out["image"] = {"width": self.width.summary(), "height": self.height.summary(),
                            "bytes": self.bytes.summary(), "formats": self.formats.top(50),
                            "channels": self.channels.top(10)}
        return out


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _numbers(values: pa.Array) -> np.ndarray:
    if pa.types.is_timestamp(values.type) or pa.types.is_date(values.type) or pa.types.is_duration(values.type):
        values = values.cast(pa.int64()) if not pa.types.is_date32(values.type) else values.cast(pa.int32())
    if pa.types.is_boolean(values.type):
        values = values.cast(pa.int8())
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        return values.to_numpy(zero_copy_only=False).astype(np.float64)
    if _is_text_type(values.type):
        return _text_numbers(values)
    return np.asarray([_number(v) for v in values.to_pylist()], dtype=np.float64)


def _text_numbers(values: pa.Array) -> np.ndarray:
    """float(text) of each (present) text value, NaN where float() fails, column-wise where the text
    decides it: JSON-grammar numbers cast by Arrow (the same correctly rounded doubles); any other text
    value by value (a datetime's text is its epoch nanoseconds first: `_epoch_nanoseconds`)."""
    out = np.full(len(values), np.nan)
    number = pc.match_substring_regex(values, FLOAT_TEXT).fill_null(False).to_numpy(zero_copy_only=False)
    other = ~number
    if number.any():
        try:
            out[number] = values.filter(pa.array(number)).cast(pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            other |= number
    if other.any():
        rows = np.flatnonzero(other)
        out[rows] = [_number(v) for v in values.take(pa.array(rows)).to_pylist()]
    return out


def _epoch_nanoseconds(values: pa.Array, column: str) -> pa.Array:
    """Datetime text as the int64 nanoseconds since the epoch that the encoder stores for it (column-wise
    when every value is ISO text, else value by value; null where a value is no datetime), so that a CSV's
    datetimes have the statistics a DataFrame's have."""
    found = scalar_numbers(values, types.DatetimeInput)
    if found is not None:
        return pa.array(found[0], mask=~found[1])
    return pa.array([_epoch_or_none(value, column) for value in values.to_pylist()], pa.int64())


def _epoch_or_none(value: Any, column: str) -> Optional[int]:
    try:
        return to_epoch_ns(value, column)
    except RowError:
        return None


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def _lengths(values: pa.Array) -> np.ndarray:
    if _is_text_type(values.type):
        return pc.utf8_length(values).to_numpy(zero_copy_only=False)
    if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
        return pc.binary_length(values).to_numpy(zero_copy_only=False)
    return np.asarray([len(_text(v)) for v in values.to_pylist()])


def _as_array(values: Sequence[Any]) -> pa.Array:
    """Python values as an Arrow array (mixed types: as text)."""
    try:
        return pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if is_missing(v) else _text(v) for v in values], type=pa.string())


class DatasetStatistics:
    """Per split, per feature statistics of the written rows; mergeable, bounded in size."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.rows: dict[str, int] = {}
        self.features: dict[str, dict[str, FeatureStatistics]] = {}
        self._plan = [(column, role, feature_kind(role)) for column, role in schema.items()
                      if feature_kind(role) is not None]

    def _split(self, split: str) -> dict[str, FeatureStatistics]:
        found = self.features.get(split)
        if found is None:
            found = self.features[split] = {column: FeatureStatistics(kind, role.is_list or role == types.MultiLabel)
                                            for column, role, kind in self._plan}
        return found

    def add_batch(self, split: str, batch: pa.RecordBatch) -> None:
        """Add the rows of an Arrow batch written to `split` (the columns the schema names)."""
        if not batch.num_rows:
            return
        self.rows[split] = self.rows.get(split, 0) + batch.num_rows
        features = self._split(split)
        names = batch.schema.names
        for column, role, kind in self._plan:
            if column not in names or kind == IMAGE:
                continue
            self._add_column(features[column], role, column, batch.column(names.index(column)))

    def add_rows(self, split: str, rows: Sequence[Mapping[str, Any]],
                 images: Optional[Mapping[str, Sequence[tuple[str, int, int, int, int]]]] = None) -> None:
        """Add python rows written to `split`; `images[column]`: (format, height, width, channels, bytes)
        of each row's image in that column."""
        if not rows:
            return
        self.rows[split] = self.rows.get(split, 0) + len(rows)
        features = self._split(split)
        for column, role, kind in self._plan:
            if kind == IMAGE:
                facts = (images or {}).get(column, ())
                self.add_images(features[column], facts, len(rows) - len(facts))
                continue
            values = [row.get(column) for row in rows]
            if role.is_list or role == types.MultiLabel:
                values = _parsed_lists(values, role, column)
            self._add_column(features[column], role, column, _as_array(values))

    @staticmethod
    def add_images(feature: FeatureStatistics, facts: Sequence[tuple[str, int, int, int, int]], missing: int) -> None:
        feature.missing += missing
        if not facts:
            return
        feature.present += len(facts)
        formats, heights, widths, channels, sizes = zip(*facts)
        feature.width.add(widths)
        feature.height.add(heights)
        feature.bytes.add(sizes)
        feature.formats.add(formats)
        feature.channels.add(channels)

    def _add_column(self, feature: FeatureStatistics, role: types.ColumnType, column: str, array: pa.Array) -> None:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        missing = array.null_count
        if feature.kind == NUMERIC and not role.is_list and pa.types.is_floating(array.type):
            missing += int(pc.sum(pc.is_nan(array)).as_py() or 0)
        feature.missing += missing
        feature.present += len(array) - missing
        present = array.filter(pc.is_valid(array)) if array.null_count else array
        if not len(present):
            return
        if role == types.DatetimeInput and _is_text_type(present.type):
            present = _epoch_nanoseconds(present, column)
        if role == types.MultiLabel or (role.is_list and not _is_list_type(present.type)):
            present = _listed(present, role, column)
        if _is_list_type(present.type):
            feature.lengths.add(pc.list_value_length(present).to_numpy(zero_copy_only=False))
            present = pc.list_flatten(present)
            present = present.filter(pc.is_valid(present)) if present.null_count else present
        if feature.kind == LABEL and not pa.types.is_string(present.type):
            present = present.cast(pa.string()) if not pa.types.is_binary(present.type) else present
        feature.add_scalars(present)

    def merge(self, other: "DatasetStatistics") -> "DatasetStatistics":
        for split, count in other.rows.items():
            self.rows[split] = self.rows.get(split, 0) + count
        for split, features in other.features.items():
            mine = self._split(split)
            for column, feature in features.items():
                mine[column].merge(feature)
        return self

    def to_json(self, vocabularies: Optional[Mapping[str, Sequence[str]]] = None) -> dict[str, Any]:
        """The statistics.json document (docs/format.md)."""
        vocabularies = vocabularies or {}
        splits = {}
        for split in SPLITS:
            if split not in self.features:
                continue
            splits[split] = {
                "rows": self.rows.get(split, 0),
                "features": {column: feature.to_json(vocabularies.get(column))
                             for column, feature in self.features[split].items()},
            }
        return {"format_version": FORMAT_VERSION, "splits": splits}


def _is_text_type(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_list_type(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def _parsed_lists(values: Sequence[Any], role: types.ColumnType, column: str) -> list:
    """List cells (lists, arrays, JSON array text) parsed as tfrecorder parses them when encoding (None:
    missing or unparseable)."""
    parsed: list = []
    for value in values:
        try:
            parsed.append(None if is_missing(value) else multi_label_names(value, column) if role == types.MultiLabel
                          else list(input_values(role, value, column)))
        except (RowError, TypeError, ValueError):
            parsed.append(None)
    return parsed


def _listed(values: pa.Array, role: types.ColumnType, column: str) -> pa.Array:
    """List cells given as text, parsed (_parsed_lists); column-wise when every cell is JSON array text of
    numbers of the role's length (columnar_encoder.number_lists: the values the row path would parse)."""
    parsed = number_lists(values, role) if values.null_count == 0 else None
    if parsed is not None:
        return parsed
    return _as_array(_parsed_lists(values.to_pylist(), role, column))


def merge_all(parts: Iterable[DatasetStatistics], schema: Schema) -> DatasetStatistics:
    """The parts merged into a new DatasetStatistics of their own class and schema (a detection job's
    are tfrecorder.rows.detection_statistics'), or an empty one of `schema` when there are none."""
    merged = None
    for part in parts:
        if merged is None:
            merged = type(part)(part.schema)
        merged.merge(part)
    return merged if merged is not None else DatasetStatistics(schema)
