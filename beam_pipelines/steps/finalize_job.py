"""The finalize stage: metadata.json and the TFDS files written, scratch files removed, the job directory published."""
from __future__ import annotations

import collections
import dataclasses

from tfrecorder.options.job_config import JobConfig
from tfrecorder.format import job_directory, tfds_files
from tfrecorder.format.file_names import LABEL_MAP_FILE
from tfrecorder.format.lineage import lineage_entry, merged_images
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.io import storage
from tfrecorder.rows.detection_statistics import DetectionStatistics
from tfrecorder.rows.duplicate_groups import DROPPED_REASON
from tfrecorder.rows.table_stats import TableStats
from beam_pipelines.steps.carry_shards import job_vocabularies
from beam_pipelines.steps.data_quality import write_quality_files


def finalize_job(_, config: JobConfig, shards, vocabularies, rows_in, discard_reasons, pieces, image_kinds=None,
                 statistics=None, duplicates=None):
    """Write metadata.json (and the TFDS files), clean temporary files, and publish the job directory.

    Safe to run again after any part of it ran: once the job is published it only cleans up.
    """
    if not job_directory.is_published(config.final_dir):
        unknown: collections.Counter = collections.Counter()
        for piece in pieces:
            unknown[piece.split] += piece.unknown_labels
        new_rows_in = rows_in
        if config.base is not None:  # an append: the parent's records are in the version (issue 28)
            unknown.update(config.base.unknown_labels)
            rows_in += config.base.records_written
            image_kinds = merged_images(config.base.images, image_kinds or {})
        quality = write_quality_files(config, vocabularies, statistics, duplicates)  # issue 29
        metadata = JobMetadata.build(config, shards, vocabularies, rows_in, discard_reasons, unknown,
                                     images=image_kinds or {})
        if quality:
            metadata = metadata.updated(**quality)
        if config.base is not None:
            metadata = metadata.updated(lineage=lineage_entry(
                config.base, new_rows_in, sum(discard_reasons.values()), shards, vocabularies, config.image_size,
                small_bytes=config.max_shard_bytes // 2, compression=config.compression))
        for scratch in config.scratch_dirs:
            storage.delete_tree(scratch)
        tfds_files.write_tfds_files(config.temp_dir, metadata.document)  # issue 15: before metadata.json, the completion marker
        metadata.write(config.temp_dir)
    job_directory.finalize(config.temp_dir, config.final_dir)
    yield config.final_dir


def finalize_with_stats(_, config: JobConfig, shards, stats: TableStats, discard_reasons, pieces, image_kinds=None,
                        statistics=None, duplicates=None):
    """finalize_job with the whole-table facts the pipeline computed (row count, nullable columns)."""
    nullable = stats.nullable_columns
    if config.base is not None:  # the version's feature spec parses the parent's records too
        nullable = tuple(sorted(set(nullable) | set(config.base.nullable_columns)))
    config = dataclasses.replace(config, nullable_columns=nullable)
    yield from finalize_job(_, config, shards, job_vocabularies(stats.vocabularies, config), stats.rows_in,
                            discard_reasons, pieces, image_kinds=image_kinds,
                            statistics=statistics, duplicates=duplicates)


def finalize_label_mapped_job(config: JobConfig, shards, label_names: list, rows_in: int, rows_written: int,
                              discard_reasons, fields: dict, features: dict, label_map: str,
                              statistics=None, duplicates=None) -> str:
    """finalize_job for a detection or dataset job (OD API records): metadata.json gets `fields` and
    the OD API feature spec, `label_map.pbtxt` is written beside the shards, statistics.json/.pb and
    duplicates.csv when computed (issue 29: `statistics` a DetectionStatistics, `duplicates` the
    duplicate buckets); then the job is published.
    Safe to run again after any part of it ran: once the job is published it only cleans up."""
    if not job_directory.is_published(config.final_dir):
        if statistics is None and duplicates is not None:  # every image was discarded: statistics of nothing
            statistics = DetectionStatistics()
        quality = write_quality_files(config, {"label": list(label_names)}, statistics, duplicates)
        if config.duplicates == "drop":  # the rows of dropped images were inside Examples when counted
            rows_written -= discard_reasons.get(DROPPED_REASON, 0)
        metadata = JobMetadata.build(config, shards, {"label": list(label_names)}, rows_in, discard_reasons, {},
                                     rows_written=rows_written)
        metadata = metadata.updated(**fields, **quality, input_schema=metadata.document["schema"], schema={},
                                    features=features)
        storage.write_bytes(storage.join(config.temp_dir, LABEL_MAP_FILE), label_map.encode("utf-8"))
        for scratch in config.scratch_dirs:
            storage.delete_tree(scratch)
        metadata.write(config.temp_dir)
    job_directory.finalize(config.temp_dir, config.final_dir)
    return config.final_dir
