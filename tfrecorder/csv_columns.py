"""CSV text → Arrow record batches of text columns (empty fields as nulls), for the columnar encoder.

Parses exactly as `tables.CsvRecords` does (Python's csv module, same records, same malformed lines and
record numbering), but hands the well-formed rows over column by column: no dict per row.
"""
from __future__ import annotations

import csv
import io
from typing import Iterator, Union

import pyarrow as pa
import pyarrow.compute as pc

BATCH_ROWS = 16_384


def _column(values: tuple) -> pa.Array:
    array = pa.array(values, pa.string())
    return pc.if_else(pc.equal(array, ""), pa.scalar(None, pa.string()), array)


class CsvBatches:
    """Data records of CSV text (no header) as batches of text columns.

    Iterating yields a pa.RecordBatch per `batch_rows` well-formed rows and each malformed record as
    (row, record index, field count), as CsvRecords does; `records` is the number of records read
    (blank lines included).
    """

    def __init__(self, text: io.TextIOBase, header: list[str], batch_rows: int = BATCH_ROWS) -> None:
        self.text, self.header, self.batch_rows, self.records = text, header, batch_rows, 0

    def _batch(self, rows: list[list[str]]) -> pa.RecordBatch:
        columns = list(zip(*rows))
        return pa.RecordBatch.from_arrays([_column(values) for values in columns], names=self.header)

    def __iter__(self) -> Iterator[Union[pa.RecordBatch, tuple[dict, int, int]]]:
        header, width, rows = self.header, len(self.header), []
        for fields in csv.reader(self.text):
            index = self.records
            self.records += 1
            if len(fields) == width:
                rows.append(fields)
                if len(rows) >= self.batch_rows:
                    yield self._batch(rows)
                    rows = []
            elif fields:  # not a blank line
                yield {name: (value if value != "" else None) for name, value in zip(header, fields)}, index, len(fields)
        if rows:
            yield self._batch(rows)
