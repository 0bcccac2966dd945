"""Reading table rows into the pipeline as dicts keyed by column name.

CSV files are streamed with Python's csv module through Beam's FileSystems, which handles quoted
fields containing commas and newlines (a line-splitting text reader would break them). DataFrames
arrive as a Parquet file the driver wrote, read with Beam's Parquet IO, so rows are never embedded in
the job graph.
"""
from __future__ import annotations

import apache_beam as beam

from tfrecorder.job_config import JobConfig
from tfrecorder.tables import iter_csv_rows

MALFORMED = "malformed"


class _ReadCsv(beam.DoFn):
    def process(self, path: str):
        for item in iter_csv_rows(path):
            if isinstance(item, tuple):
                yield beam.pvalue.TaggedOutput(MALFORMED, item)
            else:
                yield item


class ReadRows(beam.PTransform):
    """Source rows as dicts; output tag MALFORMED carries (row, reason) for unparseable CSV lines."""

    def __init__(self, config: JobConfig) -> None:
        super().__init__()
        self.config = config

    def expand(self, pbegin):
        if self.config.source_kind == "parquet":
            rows = pbegin | "ReadParquet" >> beam.io.ReadFromParquet(self.config.source_path)
            malformed = pbegin | "NoMalformed" >> beam.Create([])
            return rows, malformed
        results = (
            pbegin
            | "CsvPath" >> beam.Create([self.config.source_path])
            | "ReadCsv" >> beam.ParDo(_ReadCsv()).with_outputs(MALFORMED, main="rows")
        )
        return results.rows, results[MALFORMED]
