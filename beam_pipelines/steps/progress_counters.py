"""Counters the pipeline reports while it runs; the driver reads them back to show progress."""
from __future__ import annotations

import apache_beam as beam

NAMESPACE = "tfrecorder"
ROWS_PROCESSED = "rows_processed"  # rows written or discarded (by the prepare or the encode step)

rows_processed_counter = beam.metrics.Metrics.counter(NAMESPACE, ROWS_PROCESSED)
