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

import apache_beam  # noqa: F401  (Beam loads with tfrecorder, so the first conversion does not pay for it)
import pandas as pd

from tfrecorder.core.progress_bar import ProgressReporter, local_progress
from tfrecorder.core.caller_heap import objects_frozen_during
from tfrecorder.core.quiet import leaves_logging_alone
from tfrecorder.core.schema import Schema, check_column_names
from tfrecorder.rows.duplicate_groups import buckets_per_key
from tfrecorder.rows.near_duplicates import bucket_shift
from tfrecorder.rows.row_encoding import content_splits
from tfrecorder.core.splits import DEFAULT_SPLIT_RATIOS
from tfrecorder.format import detection_keys, file_names
from tfrecorder.format.lineage import BaseJob
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.io import storage
from tfrecorder.io.decode_check import DEFAULT_VALIDATION
from tfrecorder.io.image_probe import DEFAULT_MAX_IMAGE_BYTES, DEFAULT_MAX_IMAGE_PIXELS
from tfrecorder.legacy import v2_compat
from tfrecorder.options.conversion_options import DEFAULT_MAX_SHARD_BYTES, ConvertOptions, OutputLocation
from tfrecorder.options.job_config import JobConfig
from tfrecorder.options.job_fingerprint import job_fingerprint
from tfrecorder.options.piece_units import unit_batches
from tfrecorder.options.job_resumption import check_resume, choose_job_dir
from tfrecorder.result import ConversionResult, DataflowConversionResult
from tfrecorder.rows import dataset_records, detection_encoder
from tfrecorder.rows.table_stats import StatsCounter, TableStats
from tfrecorder.rows.value_coercion import check_sample, is_missing
from tfrecorder.sources.csv_text import DEFAULT_ENCODING
from tfrecorder.sources.source_protocol import Table
from tfrecorder.sources.source_registry import Source, open_table

logger = logging.getLogger("tfrecorder")

REMOTE_FETCH_CONCURRENCY = 16  # default when images live in an object store (tens of ms per read)
DETECTION_BUCKET_ROWS = 2_000  # a resumable detection job commits its images in buckets of about this many rows
LOCAL_FETCH_CONCURRENCY = 1  # default for local files: reads are fast, threads would only add overhead


def _images_remote(table: Table, schema: Schema) -> bool:
    """Whether the (sampled) images live on gs:// or another object store."""
    sample = table.sample.rename(columns=str)
    uris = (str(v) for c in schema.image_columns for v in sample[c] if not is_missing(v))
    return storage.is_remote(table.base_dir) or any(storage.is_remote(u) for u in uris)


def _fetch_concurrency(requested: Optional[int], images_remote: bool) -> int:
    """The requested (checked) bound, or a default chosen by where the (sampled) images live."""
    if requested is None:
        return REMOTE_FETCH_CONCURRENCY if images_remote else LOCAL_FETCH_CONCURRENCY
    return requested


def _resolve_schema(table: Table, schema: Union[Schema, Mapping[str, Any], None]) -> Schema:
    """Infer the schema (the table's kind knows how: list lengths from every row of a DataFrame, roles
    from Parquet's Arrow types), or check an explicit one."""
    if schema is None:
        return table.infer_schema()
    resolved = schema if isinstance(schema, Schema) else Schema(schema)
    resolved.validate_columns(table.columns)
    check_sample(resolved, table.sample)
    return resolved


def _open_table(source: Source, schema: Union[Schema, Mapping[str, Any], None], options: ConvertOptions,
                image_root: Optional[str] = None, split: Optional[str] = None) -> tuple[Table, Schema, bool]:
    """The source as a Table (read from a sample only), its resolved Schema, and whether it is an
    object-detection table."""
    table = open_table(source, options.annotation_format, options.encoding, image_root, split)
    if dataset_records.is_dataset_table(table.columns):
        return table, dataset_records.dataset_schema(), True
    check_column_names(table.columns)
    is_detection = detection_encoder.is_detection_table(table.columns)
    resolved = (detection_encoder.detection_schema(table.columns) if is_detection
                else _resolve_schema(table, schema if schema is not None else table.default_schema()))
    _check_split_column(table, resolved)
    return table, resolved, is_detection


def _check_split_column(table: Table, schema: Schema) -> None:
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


def _check_in_driver(table: Table, schema: Schema, split_ratios, require_train: bool = True,
                     content_splits: bool = False) -> None:
    """Table-level errors of a source the driver holds (a DataFrame, an annotation file) are raised before
    any pipeline starts; a CSV's or Parquet's are found by the pipeline, which fails with the same
    message. Stops at the first TRAIN row (rows appended to a job need none: `require_train=False`)."""
    rows = table.rows_for_driver_check()
    if rows is None:
        return
    counter, stats = StatsCounter(schema, split_ratios, content_splits), TableStats()
    for row in rows:
        counter.count([row], stats)
        if stats.train_found or (stats.rows and not require_train):
            break
    stats.check(require_train)


@leaves_logging_alone
@objects_frozen_during
def convert(
    source: Source,
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
    beam_options: Optional[Mapping[str, Any]] = None,
    dataflow_options: Optional[Mapping[str, Any]] = None,
    shared_filesystem: bool = False,
    project: Optional[str] = None,
    region: Optional[str] = None,
    verbose: bool = False,
    progress: bool = True,
    tfrecorder_wheel: Optional[str] = None,
    annotation_format: Optional[str] = None,
    box_units: str = "relative",
    encoding: str = DEFAULT_ENCODING,
    image_root: Optional[Union[str, os.PathLike]] = None,
    split: Optional[str] = None,
    resume: Union[str, bool] = "auto",
    _base: Optional[BaseJob] = None,
    duplicates: str = "report",
    near_duplicate_distance: int = 0,
    statistics: bool = True,
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
    DataflowConversionResult as soon as the job is submitted; call `.wait()`. runner="PortableRunner",
    "FlinkRunner" or "SparkRunner" runs on that job service and returns when the job is done (its bar
    follows the job's row counter as the job service reports it); files must be on gs:// unless the workers run on this machine or `shared_filesystem=True`
    (docs/runners.md). `beam_options` are Beam pipeline options for the runner (`dataflow_options` is
    their older name).

    Object detection: a table with columns image_uri, label, xmin, ymin, xmax, ymax (one row per box;
    `box_units="pixels"` for pixel coordinates), a headerless AutoML Vision CSV or a Vertex AI JSONL
    file writes one Example per image with the TF Object Detection API keys and a label_map.pbtxt.
    `annotation_format` forces how a headerless file is read (see tfrecorder.sources.annotation_files.FORMATS).
    A COCO instances file, a Pascal VOC folder or a YOLO folder (or its data.yaml) is recognised from its
    content and written with instance masks, crowd flags, areas and semantic masks where the dataset has
    them, and a label_map.pbtxt of the dataset's own ids; `image_root` is where a COCO file's image names
    resolve (docs/object-detection.md). A COCO dataset delivered as one file per split converts as one
    job: pass a list of the files, a glob (`"annotations/instances_*2017.json"`) or their folder; each
    file's split comes from its name (train/val/test), or from `split=` ("train", "validation", "test",
    "unassigned": assigned by hash), which every image of the COCO file(s) takes.

    `encoding` is a CSV file's text encoding (default UTF-8, a byte-order mark skipped): any codec Python
    knows, e.g. "latin-1" or "utf-16". A row holding bytes invalid in it is discarded as `invalid text`
    with its line number; a gzip-compressed CSV (`.csv.gz`) is read as it streams.

    `resume` (issue 27): a local job killed part-way (SIGKILL, out of memory, a lost session) leaves its
    `.incomplete-` directory; calling convert() again with the same source and output-affecting options
    continues it, reading and encoding only the source parts not yet committed, and publishes what an
    uninterrupted run publishes. "auto" (default) continues a matching incomplete job, else starts a
    new one (logging why a near match was passed over); True fails unless one matches; False always
    starts a new job, leaving old ones alone. `tfrecorder.incomplete_jobs(output_dir)` lists them.

    Every job also writes statistics.json / statistics.pb (per split and feature) and duplicates.csv
    (rows with identical images, or identical values for image-free rows); a duplicate group spanning
    TRAIN and VALIDATION/TEST is a leak, counted in metadata.json. `duplicates="fail"` fails the job on a
    leak, before anything is published (docs/statistics.md); `duplicates="drop"` keeps one row (detection
    and COCO/VOC/YOLO tables: one image with its boxes) per group (the one duplicates.csv marks kept) and
    discards the others as `duplicate of <uri>` (image-free rows: `duplicate of <part> row <i>`,
    duplicates.csv's name of the kept row);
    `tfrecorder.report(job_dir)` shows it all. UNASSIGNED rows of images get their split from their image
    bytes, so byte-identical images always share a split.
    `near_duplicate_distance=7` also groups near-duplicate images (re-encoded, resized, slightly cropped
    copies: 64-bit perceptual hashes at most that many bits apart); off (0) by default, as it costs a
    small decode of each image.
    `statistics=False` skips all of it (no statistics files, no duplicates.csv).

    TFRecorder 2.0's `header=`, `names=` and `schema_map=` keywords work as they did there
    (see `tfrecorder.legacy.v2_compat.legacy_arguments`).

    `_base` is set by `tfrecorder.append` only: the parent job whose records the new version carries.
    """
    # The graph's own modules are imported here, not with tfrecorder: a Beam worker that imports a step
    # first must not meet a half-initialised tfrecorder package (tests/behaviour/test_import_order.py).
    from beam_pipelines.launches.launch import fail_job, launch_for

    started = time.monotonic()
    if legacy_options:
        source, schema = v2_compat.legacy_arguments(source, schema, legacy_options)
    output = OutputLocation.of(output_dir)  # normalised once; the launch constrains it, the options check it
    if isinstance(source, (list, tuple)):
        source = [storage.user_path(path, "source") if isinstance(path, (str, os.PathLike)) else path
                  for path in source]
    elif not isinstance(source, pd.DataFrame):
        source = storage.user_path(source, "source")
    launch = launch_for(runner, output, project, region, job_label, beam_options, tfrecorder_wheel,
                        dataflow_options=dataflow_options, shared_filesystem=shared_filesystem)
    options = ConvertOptions.check(
        output, job_label=job_label, num_shards=num_shards, max_shard_bytes=max_shard_bytes,
        compression=compression, image_size=image_size, validate=validate, split_ratios=split_ratios,
        fetch_concurrency=fetch_concurrency, max_image_pixels=max_image_pixels, max_image_bytes=max_image_bytes,
        box_units=box_units, annotation_format=annotation_format, encoding=encoding, verbose=verbose,
        progress=progress, duplicates=duplicates, near_duplicate_distance=near_duplicate_distance,
        statistics=statistics)
    if image_root is not None:
        image_root = storage.user_path(image_root, "image_root")
    table, resolved_schema, is_detection = _open_table(source, schema, options, image_root, split)
    is_dataset = dataset_records.is_dataset_table(table.columns)
    if _base is not None:  # an append: the new rows must fit the parent (issue 28)
        if is_detection or is_dataset or _base.task:
            raise ValueError("appending to an object-detection job is not supported yet; convert the whole table")
        _base.check_columns(table.columns)
        _base = dataclasses.replace(_base, new_rows_estimate=int(table.rows_estimate or 0))
    launch.check_table(table, resolved_schema)
    images_remote = _images_remote(table, resolved_schema)
    concurrency = _fetch_concurrency(options.fetch_concurrency, images_remote)
    by_content = content_splits(resolved_schema, is_detection or is_dataset)  # UNASSIGNED rows split by image bytes
    _check_in_driver(table, resolved_schema, options.split_ratios, require_train=_base is None,
                     content_splits=by_content)
    resume = check_resume(resume)
    shows_progress = launch.shows_progress(options.progress)  # asked first: loading the kernels redirects stderr
    launch.preload_decoder(options.validate, resolved_schema)  # the table is valid: a decoding job starts loading

    resumable = getattr(launch, "resumable", False)
    counted = not (is_detection or is_dataset)  # (their graphs count no table stats)
    staged = table.stage(resolved_schema, options.output_dir, options.split_ratios if counted else None,
                         by_content)  # a DataFrame: the fingerprint names its staged bytes; its table stats are counted
    try:
        fingerprint = job_fingerprint(table, resolved_schema, options, launch.runner, is_detection,
                                      dataset_split=split, is_dataset=is_dataset) if resumable else None
        if fingerprint is not None and _base is not None:  # an append continues only onto the same parent, same mode
            fingerprint["options"]["base"] = {"job_name": _base.job_name, "metadata_sha256": _base.metadata_sha256,
                                              "duplicates": _base.duplicates}
        job = choose_job_dir(options.output_dir, options.job_label, fingerprint, resume, table.rows_estimate, None,
                             version=None if _base is None else _base.next_version,
                             job_ended=getattr(launch, "job_ended", None))
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    final_dir, temp_dir = job.final_dir, job.temp_dir
    try:
        with local_progress(shows_progress, table.rows_estimate) as progress_dir:
            if progress_dir and job.rows_done:  # a continued job's bar starts at the rows carried over
                ProgressReporter(progress_dir).add(job.rows_done)
            rows = table.row_source(resolved_schema, storage.join(temp_dir, file_names.WORK_DIR))  # stages a DataFrame
            config = JobConfig(
                source=rows, schema=resolved_schema, columns=tuple(table.columns),
                base_dir=table.base_dir, final_dir=final_dir, temp_dir=temp_dir,
                job_name=os.path.basename(final_dir), runner=launch.runner, distributed=launch.distributed,
                split_ratios=options.split_ratios,
                num_shards=options.num_shards, max_shard_bytes=options.max_shard_bytes,
                compression=options.compression, image_size=options.image_size, validate=options.validate,
                fetch_concurrency=concurrency, max_image_pixels=options.max_image_pixels,
                max_image_bytes=options.max_image_bytes, progress_dir=progress_dir, duplicates=options.duplicates,
                near_duplicate_distance=options.near_duplicate_distance, statistics=options.statistics,
                content_splits=by_content,
                extra_metadata={**({"task": detection_keys.TASK, "box_units": options.box_units} if is_detection
                                   else {"image_size": list(options.image_size)} if options.image_size else {}),
                                **job.resumed_entry()},
                resumable=resumable, commit_buckets=max(1, -(-table.rows_estimate // DETECTION_BUCKET_ROWS)),
                near_bucket_shift=bucket_shift(table.rows_estimate),  # LSH buckets as many as the size needs
                buckets_per_key=buckets_per_key(table.rows_estimate),  # grouping keys too
                unit_batches=unit_batches(table.rows_estimate, resolved_schema, options.validate),
                base=_base,
            )
            config, beam_options = launch.plan(config, table.rows_estimate, images_remote,
                                               encoding_pool=not is_detection)
            if is_dataset:
                from beam_pipelines.graphs.dataset_graph import build_dataset_graph as build_graph
            elif is_detection:
                from beam_pipelines.graphs.detection_graph import build_detection_graph as build_graph
            else:
                from beam_pipelines.graphs.image_graph import build_image_graph as build_graph
            submitted = launch.run(build_graph, config, beam_options, options.verbose, table.rows_estimate,
                                   rows_estimated=table.rows_estimated, progress=options.progress)
            if submitted is not None:  # a Dataflow job: it holds the job's lock from now on
                job.hand_over(launch.lock_owner(submitted) if resumable else None)
                return DataflowConversionResult.of(submitted)
    except BaseException as exc:
        if staged is not None:  # not taken into the job yet
            staged.discard()
        job.release()
        fail_job(exc, temp_dir, final_dir, options.output_dir, keep_resumable=resumable)
    job.release()
    metadata = JobMetadata.read(final_dir).document
    return ConversionResult.from_metadata(final_dir, launch.runner, metadata, time.monotonic() - started)
