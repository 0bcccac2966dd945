"""`convert()`: check the request, plan the job, run the Beam pipeline, return a ConversionResult.

Every table-level problem raises ValueError here, before any pipeline starts; row-level problems
are the pipeline's to record in discarded.csv.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any, Mapping, Optional, Sequence, Union

import pandas as pd

from tfrecorder import dataflow, jobdir, runners, storage, tables, types
from tfrecorder.job_config import JobConfig
from tfrecorder.result import ConversionResult
from tfrecorder.row_encoder import RowError, is_missing, prepare_row
from tfrecorder.schema import Schema, check_column_names, infer_schema
from tfrecorder.sharding import DEFAULT_MAX_SHARD_BYTES
from tfrecorder.splits import DEFAULT_SPLIT_RATIOS, TRAIN, validate_split_ratios

logger = logging.getLogger("tfrecorder")

COMPRESSIONS = (None, "gzip")
VALIDATIONS = ("header", "decode")


def _check_options(num_shards: int, max_shard_bytes: int, compression: Optional[str],
                   image_size: Optional[Sequence[int]], validate: str) -> Optional[tuple[int, int]]:
    if not isinstance(num_shards, int) or num_shards < 0:
        raise ValueError(f"num_shards must be an integer >= 0 (0 = automatic), got {num_shards!r}")
    if not isinstance(max_shard_bytes, int) or max_shard_bytes <= 0:
        raise ValueError(f"max_shard_bytes must be a positive integer, got {max_shard_bytes!r}")
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be None or 'gzip', got {compression!r}")
    if validate not in VALIDATIONS:
        raise ValueError(f"validate must be one of {VALIDATIONS}, got {validate!r}")
    if image_size is None:
        return None
    if len(image_size) != 2 or not all(isinstance(v, int) and v > 0 for v in image_size):
        raise ValueError(f"image_size must be (height, width) with positive integers, got {image_size!r}")
    return int(image_size[0]), int(image_size[1])


def _check_output_dir(output_dir: str) -> str:
    output_dir = os.fspath(output_dir)
    if not output_dir:
        raise ValueError("output_dir must not be empty")
    if not storage.is_remote(output_dir):
        output_dir = os.path.abspath(output_dir)
        if os.path.exists(output_dir) and not os.path.isdir(output_dir):
            raise ValueError(f"output_dir {output_dir} is a file, not a directory")
        parent = output_dir
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.access(parent, os.W_OK):
            raise ValueError(f"output_dir {output_dir} is not writable")
    return output_dir


def _resolve_schema(table: tables.Table, schema: Union[Schema, Mapping[str, Any], None]) -> Schema:
    if schema is None:
        return infer_schema(table.sample)
    resolved = schema if isinstance(schema, Schema) else Schema(schema)
    resolved.validate_columns(table.columns)
    return resolved


def _scan_table(table: tables.Table, schema: Schema, split_ratios) -> int:
    """Count rows and make sure some reach TRAIN; returns the row count."""
    rows = train = 0
    for row in table.iter_rows():
        rows += 1
        try:
            train += prepare_row(row, schema, split_ratios) == TRAIN
        except RowError:
            pass
    if rows == 0:
        raise ValueError("the table is empty: there are no rows to convert")
    if train == 0:
        raise ValueError("no rows are assigned to TRAIN (check the split column and split_ratios)")
    return rows


def _stage_rows(table: tables.Table, schema: Schema, work_dir: str) -> tuple[str, str]:
    """Where the pipeline reads rows from: the CSV itself, or the DataFrame written as Parquet."""
    if table.kind == "csv":
        return "csv", table.csv_path
    frame = table.frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    for column, role in schema.items():
        if role in (types.SplitKey, types.ImageUri, types.StringLabel, types.StringInput):
            frame[column] = frame[column].map(lambda v: None if is_missing(v) else str(v)).astype(object)
    path = storage.join(work_dir, "rows.parquet")
    with storage.open_write(path) as stream:
        frame.to_parquet(stream, index=False)
    return "parquet", path


def convert(
    source: Union[pd.DataFrame, str, os.PathLike],
    output_dir: Union[str, os.PathLike],
    *,
    schema: Union[Schema, Mapping[str, Any], None] = None,
    runner: str = "DirectRunner",
    num_shards: int = 0,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    compression: Optional[str] = None,
    job_label: Optional[str] = None,
    image_size: Optional[Sequence[int]] = None,
    split_ratios: Sequence[float] = DEFAULT_SPLIT_RATIOS,
    validate: str = "header",
    dataflow_options: Optional[Mapping[str, Any]] = None,
    project: Optional[str] = None,
    region: Optional[str] = None,
    tfrecorder_wheel: Optional[str] = None,
) -> ConversionResult:
    """Convert a DataFrame, CSV file or SPLIT/LABEL image folder into sharded TFRecords.

    Returns a ConversionResult; `result["tfrecord_dir"]` is the new job directory holding the shards,
    `metadata.json` and `discarded.csv`. With runner="DataflowRunner" (needs project, region and a gs://
    output_dir) it returns a DataflowConversionResult as soon as the job is submitted; call `.wait()`.
    """
    started = time.monotonic()
    runners.check_runner(runner)
    request = None
    if runner == "DataflowRunner":
        request = dataflow.check_request(os.fspath(output_dir), project, region, job_label, dataflow_options,
                                         tfrecorder_wheel)
    image_size = _check_options(num_shards, max_shard_bytes, compression, image_size, validate)
    ratios = validate_split_ratios(split_ratios)
    output_dir = _check_output_dir(os.fspath(output_dir))
    table = tables.open_table(source)
    check_column_names(table.columns)
    resolved_schema = _resolve_schema(table, schema)
    if request is not None:
        dataflow.check_table_reachable(table.kind, table.csv_path, table.base_dir, table.sample, resolved_schema)
    rows = _scan_table(table, resolved_schema, ratios)

    final_dir, temp_dir = jobdir.reserve_job_dir(output_dir, job_label, request and request.unique_suffix)
    try:
        config = JobConfig(
            source_kind="", source_path="", schema=resolved_schema.to_json(), columns=tuple(table.columns),
            base_dir=table.base_dir, final_dir=final_dir, temp_dir=temp_dir,
            job_name=os.path.basename(final_dir), runner=runner, split_ratios=ratios, num_shards=num_shards,
            max_shard_bytes=max_shard_bytes, compression=compression, image_size=image_size, validate=validate,
        )
        options = dataflow.pipeline_options(request, config.job_name) if request else dataflow_options
        pipeline = runners.make_pipeline(runner, options)
        source_kind, source_path = _stage_rows(table, resolved_schema, config.work_dir)
        config = dataclasses.replace(config, source_kind=source_kind, source_path=source_path)
        from beam_pipelines.pipeline import build_pipeline

        build_pipeline(pipeline, config)
        if request is not None:
            return dataflow.submit(pipeline, request, config, rows)
        pipeline.run().wait_until_finish()
    except BaseException:
        storage.delete_tree(temp_dir)
        raise
    metadata = jobdir.read_metadata(final_dir)
    return ConversionResult.from_metadata(final_dir, runner, metadata, time.monotonic() - started)
