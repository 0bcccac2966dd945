"""Everything a conversion pipeline needs to know, decided by the driver before the pipeline starts.

Plain frozen data (no open files, no DataFrames; the Schema itself, whose roles are frozen dataclasses),
so Beam can pickle it to forked processes and remote workers.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tfrecorder.format import file_names
from tfrecorder.format.lineage import BaseJob
from tfrecorder.io import storage
from tfrecorder.io.image_probe import DEFAULT_MAX_IMAGE_BYTES, DEFAULT_MAX_IMAGE_PIXELS
from tfrecorder.core.schema import Schema
from tfrecorder.sources.source_protocol import RowSource

BATCH_ROWS = 64  # rows per batch an image job reads, encodes and hands to an encoding process


@dataclasses.dataclass(frozen=True)
class JobConfig:
    source: Optional[RowSource]  # how workers read the rows (one plug-in per source kind); None: an upgrade
    schema: Schema  # column → role
    columns: tuple[str, ...]  # the table's columns in order (for discarded.csv)
    base_dir: str  # relative image paths are resolved against this
    final_dir: str
    temp_dir: str
    job_name: str
    runner: str  # recorded in metadata.json
    split_ratios: tuple[float, float, float]
    num_shards: int
    max_shard_bytes: int
    compression: Optional[str]
    image_size: Optional[tuple[int, int]]
    validate: str  # "decode" (TensorFlow decodes every image: the default) or "header" (cheap checks)
    batch_size: int = BATCH_ROWS  # rows per Beam element from the source on (amortises per-element overhead)
    unit_batches: int = 4  # resumable image jobs: a unit of this many batches closes its pieces (options.piece_units)
    fetch_concurrency: int = 1  # images of a batch read in parallel (raise for remote storage)
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS  # larger images are discarded before any decode
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES  # larger image files are discarded unread
    distributed: bool = False  # workers elsewhere (Dataflow, portable runners): reshuffles spread the work
    encode_processes: int = 1  # local jobs: forked processes that encode and write batches (1: in-process)
    progress_dir: Optional[str] = None  # local directory workers report rows done into (None: no bar)
    resumable: bool = False  # parts commit a manifest (tfrecorder.format.resume_files) and are skipped once done
    commit_buckets: int = 1  # resumable detection jobs: images are committed in this many buckets (by URI hash)
    statistics: bool = True  # statistics.json/.pb and duplicates.csv computed while encoding (issue 29)
    duplicates: str = "report"  # duplicate groups: "report" them, "drop" all rows but one, or "fail" on a leak (issue 29)
    near_duplicate_distance: int = 0  # near-duplicate images: pHash bits apart at most (0: not searched)
    near_bucket_shift: int = 8  # their LSH buckets: band keys >> this (tfrecorder.rows.near_duplicates.bucket_shift)
    buckets_per_key: int = 1  # exact buckets a committed part sends under one grouping key (duplicate_groups.buckets_per_key)
    content_splits: bool = False  # rows of images: an UNASSIGNED row's split is chosen from its image bytes
    nullable_columns: tuple[str, ...] = ()  # input columns with a missing value somewhere (allow_missing)
    extra_metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    base: Optional[BaseJob] = None  # an append (issue 28): the parent whose shards the new version carries

    @property
    def forks_part_passes(self) -> bool:
        """Whether an image-free job's other passes over its parts (the CSV scan, the count) run in forked
        processes too, as many as encode (an image job's are small next to its images)."""
        return self.encode_processes > 1 and not self.schema.image_columns

    @property
    def pieces_dir(self) -> str:
        return storage.join(self.temp_dir, file_names.PIECES_DIR)

    @property
    def work_dir(self) -> str:
        return storage.join(self.temp_dir, file_names.WORK_DIR)

    @property
    def discards_dir(self) -> str:
        return storage.join(self.temp_dir, file_names.DISCARDS_DIR)

    @property
    def parts_dir(self) -> str:
        return storage.join(self.temp_dir, file_names.PARTS_DIR)

    @property
    def scratch_dirs(self) -> tuple[str, ...]:
        """Directories of intermediate files under temp_dir, removed before the job is published, in
        this order: part manifests first (a run killed after that redoes every part rather than trust
        pieces being removed). The fingerprint is not among them: it is beside temp_dir
        (format/job_directory.resume_dir_for) and goes only after publishing, so until then a killed
        job can be continued."""
        return (self.parts_dir, self.pieces_dir, self.work_dir, self.discards_dir)
