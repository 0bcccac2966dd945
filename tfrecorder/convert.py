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

from beam_pipelines.job_config import JobConfig
from beam_pipelines.launch import fail_job, launch_for
from beam_pipelines.sharding import DEFAULT_MAX_SHARD_BYTES
from tfrecorder import compat, detection, staging, tables
from tfrecorder.annotations import default_schema, open_annotations
from tfrecorder.convert_options import ConvertOptions, normalise_output_dir
from tfrecorder.format import jobdir
from tfrecorder.io import storage
from tfrecorder.io.decode_check import DEFAULT_VALIDATION
from tfrecorder.io.images import DEFAULT_MAX_IMAGE_BYTES, DEFAULT_MAX_IMAGE_PIXELS
from tfrecorder.parquet_parts import file_parts
from tfrecorder.progress import local_progress
from tfrecorder.quiet import leaves_logging_alone
from tfrecorder.result import ConversionResult, DataflowConversionResult
from tfrecorder.row_values import check_sample, is_missing
from tfrecorder.schema import Schema, check_column_names, infer_arrow_schema, infer_schema
from tfrecorder.splits import DEFAULT_SPLIT_RATIOS
from tfrecorder.table_stats import StatsCounter, TableStats

logger = logging.getLogger("tfrecorder")

REMOTE_FETCH_CONCURRENCY = 16  # default when images live in an object store (tens of ms per read)
LOCAL_FETCH_CONCURRENCY = 1  # default for local files: reads are fast, threads would only add overhead


def _images_remote(table: tables.Table, schema: Schema) -> bool:
    """Whether the (sampled) images live on gs:// or another object store."""
    sample = table.sample.rename(columns=str)
    uris = (str(v) for c in schema.image_columns for v in sample[c] if not is_missing(v))
    return storage.is_remote(table.base_dir) or any(storage.is_remote(u) for u in uris)


def _fetch_concurrency(requested: Optional[int], images_remote: bool) -> int:
    """The requested (checked) bound, or a default chosen by where the (sampled) images live."""
    if requested is None:
        return REMOTE_FETCH_CONCURRENCY if images_remote else LOCAL_FETCH_CONCURRENCY
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


def _open_table(source: Union[pd.DataFrame, str, os.PathLike], schema: Union[Schema, Mapping[str, Any], None],
                options: ConvertOptions) -> tuple[tables.Table, Schema, bool]:
    """The source as a Table (read from a sample only), its resolved Schema, and whether it is an
    object-detection table."""
    table = open_annotations(source, options.annotation_format) or tables.open_table(source)
    check_column_names(table.columns)
    is_detection = detection.is_detection_table(table.columns)
    resolved = (detection.detection_schema(table.columns) if is_detection
                else _resolve_schema(table, schema if schema is not None else default_schema(table)))
    _check_split_column(table, resolved)
    return table, resolved, is_detection


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
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
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

    Hostile or huge images cost one discarded row each: an image declaring more than `max_image_pixels`
    pixels (default 89,478,485, Pillow's default limit) is discarded as `image too large` before any
    decoder allocates it, in both modes; an image file over `max_image_bytes` (default 512 MiB) as
    `file too large` without being read; a FIFO, device, socket or /proc file as `not a regular file`;
    an http(s) URL as `unsupported image location` (see docs/reliability.md, "Limits").

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
    output_dir = normalise_output_dir(output_dir)
    launch = launch_for(runner, output_dir, project, region, job_label, dataflow_options, tfrecorder_wheel)
    options = ConvertOptions.check(
        output_dir, job_label=job_label, num_shards=num_shards, max_shard_bytes=max_shard_bytes,
        compression=compression, image_size=image_size, validate=validate, split_ratios=split_ratios,
        fetch_concurrency=fetch_concurrency, max_image_pixels=max_image_pixels, max_image_bytes=max_image_bytes,
        box_units=box_units, annotation_format=annotation_format, verbose=verbose, progress=progress)
    table, resolved_schema, is_detection = _open_table(source, schema, options)
    launch.check_table(table, resolved_schema)
    images_remote = _images_remote(table, resolved_schema)
    concurrency = _fetch_concurrency(options.fetch_concurrency, images_remote)
    _check_frame(table, resolved_schema, options.split_ratios)

    final_dir, temp_dir = jobdir.reserve_job_dir(options.output_dir, options.job_label)
    try:
        with local_progress(launch.shows_progress(options.progress), table.rows_estimate) as progress_dir:
            config = JobConfig(
                source_kind="", source_path="", schema=resolved_schema, columns=tuple(table.columns),
                base_dir=table.base_dir, final_dir=final_dir, temp_dir=temp_dir,
                job_name=os.path.basename(final_dir), runner=launch.runner, split_ratios=options.split_ratios,
                num_shards=options.num_shards, max_shard_bytes=options.max_shard_bytes,
                compression=options.compression, image_size=options.image_size, validate=options.validate,
                fetch_concurrency=concurrency, max_image_pixels=options.max_image_pixels,
                max_image_bytes=options.max_image_bytes, progress_dir=progress_dir,
                extra_metadata={"task": detection.TASK, "box_units": options.box_units} if is_detection else {},
            )
            config, beam_options = launch.plan(config, table.rows_estimate, images_remote,
                                               encoding_pool=not is_detection)
            config = dataclasses.replace(config, **_stage_rows(table, resolved_schema, config.work_dir))
            if is_detection:
                from beam_pipelines.detection import build_pipeline
            else:
                from beam_pipelines.pipeline import build_pipeline
            submitted = launch.run(build_pipeline, config, beam_options, options.verbose, table.rows_estimate,
                                   rows_estimated=table.kind == "csv")
            if submitted is not None:
                return DataflowConversionResult.of(submitted)
    except BaseException as exc:
        fail_job(exc, temp_dir, final_dir, options.output_dir)
    metadata = jobdir.read_metadata(final_dir)
    return ConversionResult.from_metadata(final_dir, launch.runner, metadata, time.monotonic() - started)
