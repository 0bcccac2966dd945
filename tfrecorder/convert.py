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

from tfrecorder import compat, dataflow, detection, jobdir, runners, staging, storage, tables
from tfrecorder.annotations import default_schema, open_annotations
from tfrecorder.decode_check import DECODE, DEFAULT_VALIDATION, VALIDATIONS
from tfrecorder.errors import translate_pipeline_error
from tfrecorder.job_config import JobConfig
from tfrecorder.progress import local_progress, should_show
from tfrecorder.quiet import leaves_logging_alone, quiet_libraries
from tfrecorder.result import ConversionResult
from tfrecorder.row_encoder import RowError, check_sample, is_missing, prepare_row
from tfrecorder.schema import Schema, check_column_names, infer_schema
from tfrecorder.sharding import DEFAULT_MAX_SHARD_BYTES
from tfrecorder.splits import DEFAULT_SPLIT_RATIOS, TRAIN, validate_split_ratios
from tfrecorder.tensorflow_import import import_tensorflow

logger = logging.getLogger("tfrecorder")

COMPRESSIONS = (None, "gzip")
MAX_FETCH_CONCURRENCY = 128
REMOTE_FETCH_CONCURRENCY = 16  # default when images live in an object store (tens of ms per read)
LOCAL_FETCH_CONCURRENCY = 1  # default for local files: reads are fast, threads would only add overhead


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
    storage.check_writable_dir(output_dir)
    return output_dir


def _fetch_concurrency(requested: Optional[int], table: tables.Table, schema: Schema) -> int:
    """The requested bound, or a default chosen by where the (sampled) images live."""
    if requested is None:
        sample = table.sample.rename(columns=str)
        uris = (str(v) for c in schema.image_columns for v in sample[c] if not is_missing(v))
        remote = storage.is_remote(table.base_dir) or any(storage.is_remote(u) for u in uris)
        return REMOTE_FETCH_CONCURRENCY if remote else LOCAL_FETCH_CONCURRENCY
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_FETCH_CONCURRENCY:
        raise ValueError(f"fetch_concurrency must be an integer from 1 to {MAX_FETCH_CONCURRENCY}, got {requested!r}")
    return requested


def _resolve_schema(table: tables.Table, schema: Union[Schema, Mapping[str, Any], None]) -> Schema:
    """Infer the schema (list lengths from every row of a DataFrame), or check an explicit one."""
    if schema is None:
        return infer_schema(table.frame if table.frame is not None else table.sample)
    resolved = schema if isinstance(schema, Schema) else Schema(schema)
    resolved.validate_columns(table.columns)
    check_sample(resolved, table.sample)
    return resolved


def _check_split_column(table: tables.Table, schema: Schema) -> None:
    """Split cells are text (TRAIN/VALIDATION/TEST/UNASSIGNED); numbers or booleans are a table error."""
    column = schema.split_column
    if column is None or column not in table.sample:
        return
    values = table.sample[column].dropna()
    if len(values) and (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
        raise ValueError(
            f"split column {column!r} holds {values.dtype} values such as {values.iloc[0]!r}; "
            "expected TRAIN, VALIDATION, TEST or UNASSIGNED"
        )


def _scan_table(table: tables.Table, schema: Schema, split_ratios) -> tuple[int, frozenset[str]]:
    """Count rows, make sure some reach TRAIN, and find the columns holding a missing value.

    Returns (row count, nullable columns): only those columns get allow_missing in metadata.json.
    A DataFrame is checked column-wise (no row dicts); a CSV is streamed once.
    """

    def reaches_train(row: Mapping[str, Any]) -> bool:
        try:
            return prepare_row(row, schema, split_ratios) == TRAIN
        except RowError:
            return False

    if table.frame is not None:
        rows = len(table.frame)
        nullable = {c for c in schema if c in table.frame.columns and table.frame[c].isna().any()}
        train_found = any(reaches_train(row) for row in table.iter_rows())  # stops at the first
    else:
        rows, train_found, nullable = 0, False, set()
        for row in table.iter_rows():
            rows += 1
            nullable.update(column for column in schema if row.get(column) is None)
            train_found = train_found or reaches_train(row)
    if rows == 0:
        raise ValueError("the table is empty: there are no rows to convert")
    if not train_found:
        raise ValueError("no rows are assigned to TRAIN (check the split column and split_ratios)")
    return rows, frozenset(nullable)


def _stage_rows(table: tables.Table, schema: Schema, work_dir: str) -> tuple[str, str]:
    """Where the pipeline reads rows from: the CSV itself, or the DataFrame written as typed Parquet."""
    if table.frame is None:  # a CSV or annotation file: the pipeline streams it
        return table.kind, table.csv_path
    path = storage.join(work_dir, "rows.parquet")
    with storage.open_write(path) as stream:
        staging.write_parquet(table.frame, schema, stream)
    return "parquet", path


@leaves_logging_alone
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
    validate: str = DEFAULT_VALIDATION,
    fetch_concurrency: Optional[int] = None,
    dataflow_options: Optional[Mapping[str, Any]] = None,
    project: Optional[str] = None,
    region: Optional[str] = None,
    verbose: bool = False,
    progress: bool = True,
    tfrecorder_wheel: Optional[str] = None,
    annotation_format: Optional[str] = None,
    box_units: str = "relative",
    **legacy_options: Any,
) -> ConversionResult:
    """Convert a DataFrame, CSV file or SPLIT/LABEL image folder into sharded TFRecords.

    `validate="decode"` (default) writes an image only if `tf.io.decode_image` decodes it and discards
    it only if it does not; `validate="header"` is the fast opt-in with cheap structural checks only.
    `fetch_concurrency` bounds how many images each worker reads at once (default: 16 when images are
    on gs:// or another object store, 1 for local files).

    Returns a ConversionResult; `result["tfrecord_dir"]` is the new job directory holding the shards,
    `metadata.json` and `discarded.csv`. Beam's and TensorFlow's logs are kept quiet unless verbose;
    a progress bar (rows processed / total) shows in terminals and notebooks unless progress=False.
    With runner="DataflowRunner" (needs project, region and a gs:// output_dir) it returns a
    DataflowConversionResult as soon as the job is submitted; call `.wait()`.

    Object detection: a table with columns image_uri, label, xmin, ymin, xmax, ymax (one row per box;
    `box_units="pixels"` for pixel coordinates), a headerless AutoML Vision CSV or a Vertex AI JSONL
    file writes one Example per image with the TF Object Detection API keys and a label_map.pbtxt.
    `annotation_format` forces how a headerless file is read (see tfrecorder.annotations.FORMATS).

    TFRecorder 2.0's `header=`, `names=` and `schema_map=` keywords work as they did there
    (see `tfrecorder.compat.legacy_arguments`).
    """
    started = time.monotonic()
    if legacy_options:
        source, schema = compat.legacy_arguments(source, schema, legacy_options)
    runners.check_runner(runner)
    request = None
    if runner == "DataflowRunner":
        request = dataflow.check_request(os.fspath(output_dir), project, region, job_label, dataflow_options,
                                         tfrecorder_wheel)
    image_size = _check_options(num_shards, max_shard_bytes, compression, image_size, validate)
    ratios = validate_split_ratios(split_ratios)
    output_dir = _check_output_dir(os.fspath(output_dir))
    table = open_annotations(source, annotation_format) or tables.open_table(source)
    check_column_names(table.columns)
    is_detection = detection.is_detection_table(table.columns)
    box_units = detection.check_box_units(box_units)
    resolved_schema = (detection.detection_schema(table.columns) if is_detection
                       else _resolve_schema(table, schema if schema is not None else default_schema(table)))
    _check_split_column(table, resolved_schema)
    if request is not None:
        dataflow.check_table_reachable(table.kind, table.csv_path, table.base_dir, table.sample, resolved_schema)
    concurrency = _fetch_concurrency(fetch_concurrency, table, resolved_schema)
    total_rows, nullable_columns = _scan_table(table, resolved_schema, ratios)

    final_dir, temp_dir = jobdir.reserve_job_dir(output_dir, job_label)
    try:
        with local_progress(request is None and should_show(progress), total_rows) as progress_dir:
            config = JobConfig(
                source_kind="", source_path="", schema=resolved_schema.to_json(), columns=tuple(table.columns),
                base_dir=table.base_dir, final_dir=final_dir, temp_dir=temp_dir,
                job_name=os.path.basename(final_dir), runner=runner, split_ratios=ratios, num_shards=num_shards,
                max_shard_bytes=max_shard_bytes, compression=compression, image_size=image_size, validate=validate,
                fetch_concurrency=concurrency, progress_dir=progress_dir,
                nullable_columns=tuple(sorted(nullable_columns)),
                extra_metadata={"task": detection.TASK, "box_units": box_units} if is_detection else {},
            )
            options = (dataflow.pipeline_options(request, config.job_name) if request
                       else runners.local_options(total_rows, dataflow_options,
                                                  threads_use_every_core=validate == DECODE))
            source_kind, source_path = _stage_rows(table, resolved_schema, config.work_dir)
            config = dataclasses.replace(config, source_kind=source_kind, source_path=source_path)
            if is_detection:
                from beam_pipelines.detection import build_pipeline
            else:
                from beam_pipelines.pipeline import build_pipeline

            if validate == DECODE and request is None:
                import_tensorflow()  # the decoding threads' TensorFlow, imported once, here

            with quiet_libraries(verbose):
                pipeline = runners.make_pipeline(runner, options)
                build_pipeline(pipeline, config)
                if request is not None:
                    return dataflow.submit(pipeline, request, config, total_rows)
                pipeline.run().wait_until_finish()
    except BaseException as exc:
        jobdir.abandon(temp_dir, final_dir)
        translated = translate_pipeline_error(exc, output_dir)
        if translated is exc:
            raise
        raise translated from exc
    metadata = jobdir.read_metadata(final_dir)
    return ConversionResult.from_metadata(final_dir, runner, metadata, time.monotonic() - started)
