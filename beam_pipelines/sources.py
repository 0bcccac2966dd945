"""Reading table rows into the pipeline as dicts keyed by column name.

CSV files are streamed with Python's csv module through tfrecorder.storage, which handles quoted
fields containing commas and newlines (a line-splitting text reader would break them). DataFrames
arrive as a Parquet file the driver wrote, read batch by batch with pyarrow through tfrecorder.storage,
so rows are never embedded in the job graph, and gs:// files never go through Beam's GCS filesystem
(whose credential lookup stalls when there are none).
"""
from __future__ import annotations

import apache_beam as beam

from tfrecorder import storage
from tfrecorder.annotations import KIND_PREFIX, iter_rows as iter_annotation_rows
from tfrecorder.job_config import JobConfig
from tfrecorder.tables import iter_csv_rows

MALFORMED = "malformed"


class _ReadAnnotations(beam.DoFn):
    """Rows of an AutoML CSV or Vertex AI JSONL file (tfrecorder.annotations); bad lines to MALFORMED."""

    def process(self, source: tuple[str, str]):
        for item in iter_annotation_rows(*source):
            yield beam.pvalue.TaggedOutput(MALFORMED, item) if isinstance(item, tuple) else item


class _ReadCsv(beam.DoFn):
    def process(self, path: str):
        for item in iter_csv_rows(path):
            if isinstance(item, tuple):
                yield beam.pvalue.TaggedOutput(MALFORMED, item)
            else:
                yield item


PARQUET_BATCH_ROWS = 10_000


def iter_parquet_rows(path: str) -> Iterator[dict[str, Any]]:
    """Yield each row of the driver-staged Parquet file as {column: value}, a batch at a time."""
    import pyarrow.parquet as pq

    with storage.open_read(path) as raw:
        for batch in pq.ParquetFile(raw).iter_batches(batch_size=PARQUET_BATCH_ROWS):
            yield from batch.to_pylist()


class ReadRows(beam.PTransform):
    """Source rows as dicts; output tag MALFORMED carries (row, reason) for unparseable CSV lines."""

    def __init__(self, config: JobConfig) -> None:
        super().__init__()
        self.config = config

    def expand(self, pbegin):
        if self.config.source_kind == "parquet":
            rows = (
                pbegin
                | "ParquetPath" >> beam.Create([self.config.source_path])
                | "ReadParquet" >> beam.FlatMap(iter_parquet_rows)
            )
            malformed = pbegin | "NoMalformed" >> beam.Create([])
            return rows, malformed
        if self.config.source_kind.startswith(KIND_PREFIX):
            fmt = self.config.source_kind[len(KIND_PREFIX):]
            results = (
                pbegin
                | "AnnotationPath" >> beam.Create([(self.config.source_path, fmt)])
                | "ReadAnnotations" >> beam.ParDo(_ReadAnnotations()).with_outputs(MALFORMED, main="rows")
            )
            return results.rows, results[MALFORMED]
        results = (
            pbegin
            | "CsvPath" >> beam.Create([self.config.source_path])
            | "ReadCsv" >> beam.ParDo(_ReadCsv()).with_outputs(MALFORMED, main="rows")
        )
        return results.rows, results[MALFORMED]
