"""Whole-table facts the pipeline computes from every row (the driver only reads a sample).

Row count, which columns hold a missing value (only those get allow_missing in metadata.json),
whether any row reaches TRAIN, and the vocabulary of each StringLabel column (its TRAIN labels).
Each worker adds rows to a `TableStats`; the pipeline merges them and `check()` raises the same
table-level ValueErrors the driver raised when it scanned the whole table itself.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from tfrecorder.core import types
from tfrecorder.errors import RowError, TableError
from tfrecorder.rows.row_encoding import prepare_row, unassigned
from tfrecorder.rows.value_coercion import multi_label_names
from tfrecorder.core.schema import Schema
from tfrecorder.core.splits import TRAIN


@dataclasses.dataclass
class TableStats:
    rows: int = 0  # well-formed rows
    malformed: int = 0  # CSV lines that could not be parsed into a row (discarded)
    nullable: set = dataclasses.field(default_factory=set)  # schema columns with a missing value
    train_found: bool = False
    labels: dict = dataclasses.field(default_factory=dict)  # StringLabel column → its TRAIN labels

    @property
    def rows_in(self) -> int:
        return self.rows + self.malformed

    @property
    def nullable_columns(self) -> tuple[str, ...]:
        return tuple(sorted(self.nullable))

    @property
    def vocabularies(self) -> dict[str, list[str]]:
        return {column: sorted(labels) for column, labels in self.labels.items() if labels}

    def merge(self, other: "TableStats") -> "TableStats":
        self.rows += other.rows
        self.malformed += other.malformed
        self.nullable |= other.nullable
        self.train_found = self.train_found or other.train_found
        for column, labels in other.labels.items():
            self.labels.setdefault(column, set()).update(labels)
        return self

    def check(self, require_train: bool = True) -> None:
        """The table-level errors: no rows at all, or none assigned to TRAIN (rows appended to a job
        need none: `require_train=False`)."""
        if self.rows == 0:
            raise TableError("the table is empty: there are no rows to convert")
        if require_train and not self.train_found:
            raise TableError("no rows are assigned to TRAIN (check the split column and split_ratios)")


class StatsCounter:
    """Adds rows to a TableStats; assigns splits only as far as the vocabulary and TRAIN check need.

    `content_splits` (a job of image rows, issue 29): an UNASSIGNED row's split is chosen from its image
    bytes when it is encoded, so here, before any image is read, it counts as a possible TRAIN row: its
    labels join the vocabulary and it satisfies the TRAIN check (split_ratios give TRAIN a share)."""

    def __init__(self, schema: Schema, split_ratios: Sequence[float], content_splits: bool = False) -> None:
        self.schema, self.split_ratios = schema, split_ratios
        self.content_splits = content_splits
        self.columns = list(schema)
        self.label_columns = schema.columns_of(types.StringLabel)
        self.multi_label_columns = schema.columns_of(types.MultiLabel)  # each name of a list counts

    def count(self, rows: Iterable[Mapping[str, Any]], stats: TableStats) -> TableStats:
        columns, label_columns = self.columns, self.label_columns
        for row in rows:
            stats.rows += 1
            for column in columns:
                if row.get(column) is None and column not in stats.nullable:
                    stats.nullable.add(column)
            if stats.train_found and not (label_columns or self.multi_label_columns):
                continue
            try:
                split = prepare_row(row, self.schema, self.split_ratios)
            except RowError:
                continue
            if split == TRAIN or (self.content_splits and unassigned(row, self.schema)):
                stats.train_found = True
                for column in label_columns:
                    stats.labels.setdefault(column, set()).add(str(row[column]))
                for column in self.multi_label_columns:
                    try:
                        stats.labels.setdefault(column, set()).update(multi_label_names(row[column], column))
                    except RowError:  # discarded when encoded; its names are not labels
                        pass
        return stats
