"""`convert()`: check the request, plan the job, run the Beam pipeline, return a ConversionResult.

Every table-level problem the driver can see from a sample (or from a DataFrame in memory) raises
ValueError here, before any pipeline starts; whole-table facts of a file source (row count, no TRAIN
rows, missing values, vocabulary) are computed by the pipeline, which fails with the same ValueError
text and publishes nothing. Row-level problems are the pipeline's to record in discarded.csv.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any, Mapping, Optional, Sequence, Union

import pandas as pd

from tfrecorder import compat, dataflow, detection, runners, staging, tables
from tfrecorder.format import jobdir
from tfrecorder.io import storage
from tfrecorder.annotations import default_schema, open_annotations
from tfrecorder.io.decode_check import DECODE, DEFAULT_VALIDATION, VALIDATIONS
from tfrecorder.errors import translate_pipeline_error
from tfrecorder.job_config import JobConfig
from tfrecorder.parquet_parts import file_parts
from tfrecorder.progress import local_progress, should_show
from tfrecorder.quiet import leaves_logging_alone, quiet_libraries
from tfrecorder.result import ConversionResult
from tfrecorder.row_encoder import check_sample, is_missing
from tfrecorder.schema import Schema, check_column_names, infer_arrow_schema, infer_schema
from tfrecorder.sharding import DEFAULT_MAX_SHARD_BYTES
from tfrecorder.splits import DEFAULT_SPLIT_RATIOS, validate_split_ratios
from tfrecorder.table_stats import StatsCounter, TableStats
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


def _images_remote(table: tables.Table, schema: Schema) -> bool:
    """Whether the (sampled) images live on gs:// or another object store."""
    sample = table.sample.rename(columns=str)
    uris = (str(v) for c in schema.image_columns for v in sample[c] if not is_missing(v))
    return storage.is_remote(table.base_dir) or any(storage.is_remote(u) for u in uris)


def _fetch_concurrency(requested: Optional[int], images_remote: bool) -> int:
    """The requested bound, or a default chosen by where the (sampled) images live."""
    if requested is None:
        return REMOTE_FETCH_CONCURRENCY if images_remote else LOCAL_FETCH_CONCURRENCY
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_FETCH_CONCURRENCY:
        raise ValueError(f"fetch_concurrency must be an integer from 1 to {MAX_FETCH_CONCURRENCY}, got {requested!r}")
    return requested


def _resolve_schema(table: tables.Table, schema: Union[Schema, Mapping[str, Any], None]) -> Schema:
    """Infer the schema (list lengths from every row of a DataFrame, roles from Parquet's Arrow types),
    or check an explicit one."""
    if schema is None and table.parquet is not None:
        return infer_arrow_schema(table.parquet.schema, table.sample)
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


def _check_frame(table: tables.Table, schema: Schema, split_ratios) -> None:
    """A DataFrame is in memory, so its table-level errors are raised before any pipeline starts (a CSV's
    are found by the pipeline, which fails with the same message). Stops at the first TRAIN row.

    An annotation file is still checked here too (streamed until its first TRAIN row): the detection
    graph has no in-pipeline table check yet."""
    if table.kind in ("csv", "parquet"):
        return
    counter, stats = StatsCounter(schema, split_ratios), TableStats()
    for row in table.iter_rows():
        counter.count([row], stats)
        if stats.train_found:
            break
    stats.check()


def _stage_rows(table: tables.Table, schema: Schema, work_dir: str) -> dict[str, Any]:
    """Where and how the pipeline reads rows: the CSV itself in byte slices, an annotation file streamed
    whole, Parquet files by row groups, or the DataFrame written as typed Parquet row groups. Returns the
    JobConfig fields that say so."""
    if table.parquet is not None:
        return dict(source_kind="parquet", source_path=table.parquet.source,
                    source_parts=table.parquet.parts)
    if table.kind == "csv":
        return dict(source_kind="csv", source_path=table.csv_path, source_size=table.csv_size,
                    source_data_start=table.csv_data_start)
    if table.frame is None:  # an annotation file
        return dict(source_kind=table.kind, source_path=table.csv_path)
    path = storage.join(work_dir, "rows.parquet")
    row_groups = staging.stage_frame(table.frame, schema, path)
    return dict(source_kind="parquet", source_path=path, source_parts=file_parts(path, row_groups))


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
    """Convert a DataFrame, CSV file, Parquet files (a file, a directory or a glob) or SPLIT/LABEL image
    folder into sharded TFRecords.

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
        dataflow.check_table_reachable(table, resolved_schema)
    images_remote = _images_remote(table, resolved_schema)
    concurrency = _fetch_concurrency(fetch_concurrency, images_remote)
    _check_frame(table, resolved_schema, ratios)

    decodes_images = validate == DECODE and bool(resolved_schema.image_columns)
    final_dir, temp_dir = jobdir.reserve_job_dir(output_dir, job_label)
    try:
        with local_progress(request is None and should_show(progress), table.rows_estimate) as progress_dir:
            config = JobConfig(
                source_kind="", source_path="", schema=resolved_schema.to_json(), columns=tuple(table.columns),
                base_dir=table.base_dir, final_dir=final_dir, temp_dir=temp_dir,
                job_name=os.path.basename(final_dir), runner=runner, split_ratios=ratios, num_shards=num_shards,
                max_shard_bytes=max_shard_bytes, compression=compression, image_size=image_size, validate=validate,
                fetch_concurrency=concurrency, progress_dir=progress_dir,
                extra_metadata={"task": detection.TASK, "box_units": box_units} if is_detection else {},
            )
            if request is None and not is_detection and resolved_schema.image_columns:  # the image graph's pool
                config = dataclasses.replace(config, encode_processes=runners.encode_processes(
                    table.rows_estimate, dataflow_options, threads_use_every_core=decodes_images,
                    local_files=not (storage.is_remote(temp_dir) or images_remote)))
            options = (dataflow.pipeline_options(request, config.job_name) if request
                       else runners.local_options(table.rows_estimate, dataflow_options,
                                                  threads_use_every_core=decodes_images,
                                                  encode_processes=config.encode_processes,
                                                  tabular=not resolved_schema.image_columns))
            config = dataclasses.replace(config, **_stage_rows(table, resolved_schema, config.work_dir))
            if is_detection:
                from beam_pipelines.detection import build_pipeline
            else:
                from beam_pipelines.pipeline import build_pipeline

            if decodes_images and request is None:
                import_tensorflow()  # the decoding threads' TensorFlow, imported once, here

            with quiet_libraries(verbose):
                pipeline = runners.make_pipeline(runner, options)
                build_pipeline(pipeline, config)
                if request is not None:
                    return dataflow.submit(pipeline, request, config, table.rows_estimate,
                                           rows_estimated=table.kind == "csv")
                pipeline.run().wait_until_finish()
    except BaseException as exc:
        jobdir.abandon(temp_dir, final_dir)
        translated = translate_pipeline_error(exc, output_dir)
        if translated is exc:
            raise
        raise translated from exc
    metadata = jobdir.read_metadata(final_dir)
    return ConversionResult.from_metadata(final_dir, runner, metadata, time.monotonic() - started)
