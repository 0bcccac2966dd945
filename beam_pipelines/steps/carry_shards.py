"""The carry stage of an append (issue 28): the parent's shards placed in the new version without reading a record.

Shard numbering runs across the parent's and the new rows' shards of each split: the parent's shards
keep their order and come first (`train-00000-of-00005` … `-00002-of-00005` carried, then the new
rows' `-00003-`, `-00004-`), so every shard gets a new name (its `-of-N` changes). A carried shard is
a hard link under that name locally (falling back to a copy across devices or file systems without
links), a server-side copy on gs:// (a batch of shards and index files copied in parallel); its index
file is carried the same way, as its offsets do not depend on the shard's name.

Small shards of earlier appends (tfrecorder.format.lineage, "small_shards") are not carried: each
becomes a piece (its offsets sidecar written from its index file, its records never read here) planned
together with the new rows' pieces, so that ten appends do not leave ten tiny shards per split.

Image keys (issue 28, duplicates across versions): a carried shard keeps its keys sidecar (same
name; written by the duplicates scan when the parent had none), and each new shard of a job of image
rows (any conversion, not only an append) gets one, gathered from its pieces' keys sidecars, which the
encoder wrote beside each record (tfrecorder.format.image_keys): no shard is read for it.

Retry safety: a carried file is (re)created whole under its final name (locally through a temporary
name and one rename), the parent is only read, so carrying twice gives the same files.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import uuid
from typing import Iterable, Mapping, Optional, Sequence, Union

import apache_beam as beam

from tfrecorder.format.file_names import OFFSETS_SUFFIX, keys_file_name, temporary_file_name
from tfrecorder.format.record_index import index_array
from tfrecorder.format.job_directory import job_file
from tfrecorder.format.lineage import CarriedShard, carried_index_name, carried_name, grown_vocabularies
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.base_duplicates import dedupes, shard_key_hashes
from beam_pipelines.steps.piece_files import shard_keys_from_pieces
from beam_pipelines.steps.shard_planning import Piece, ShardPlan, plan_shards

CARRY_BATCH = 32  # carried shards per element: their copies run in parallel on gs://


@dataclasses.dataclass(frozen=True)
class CarryPlan:
    """One parent shard and its place among the new version's shards of its split."""

    shard: CarriedShard
    index: int
    count: int

    @property
    def split(self) -> str:
        return self.shard.split


@dataclasses.dataclass(frozen=True)
class CarryBatch:
    """Parent shards carried by one worker call (remote copies in parallel)."""

    plans: tuple[CarryPlan, ...]


def plan_job_shards(pieces: Iterable[Piece], config: JobConfig) -> list[Union[ShardPlan, CarryBatch]]:
    """The shards of a job: the new rows' shard plans, and for an append the parent's shards to carry,
    numbered across both (the parent's first in each split)."""
    plans = plan_shards(pieces, config.num_shards, config.max_shard_bytes)
    base = config.base
    if base is None:
        return plans
    new_counts: dict[str, int] = {}
    for plan in plans:
        new_counts[plan.split] = plan.count
    renumbered: list[Union[ShardPlan, CarryBatch]] = []
    for plan in plans:
        carried = base.carried_count(plan.split)
        renumbered.append(dataclasses.replace(plan, index=plan.index + carried, count=plan.count + carried))
    carries = []
    for split in dict.fromkeys(shard.split for shard in base.shards):
        shards = base.shards_of(split)
        total = len(shards) + new_counts.get(split, 0)
        carries.extend(CarryPlan(shard, index, total) for index, shard in enumerate(shards))
    renumbered.extend(CarryBatch(tuple(carries[i:i + CARRY_BATCH])) for i in range(0, len(carries), CARRY_BATCH))
    return renumbered


def carry_shards(batch: CarryBatch, config: JobConfig) -> list[dict]:
    """Place a batch of parent shards (and their index files) in the job's temporary directory under
    their new names; returns their summaries for metadata.json, each with its "parent_file"."""
    base = config.base
    pairs, summaries = [], []
    for plan in batch.plans:
        name = carried_name(plan.shard, plan.index, plan.count, base.compression)
        pairs.append((job_file(base.tfrecord_dir, plan.shard.parent_file), storage.join(config.temp_dir, name)))
        summary = {"split": plan.split, "index": plan.index, "file": name, "records": plan.shard.records,
                   "bytes": plan.shard.bytes, "parent_file": plan.shard.parent_file}
        if plan.shard.parent_index_file:
            index_name = carried_index_name(name)
            pairs.append((job_file(base.tfrecord_dir, plan.shard.parent_index_file),
                          storage.join(config.temp_dir, *index_name.split("/"))))
            summary["index_file"] = index_name
        if plan.shard.parent_keys_file:
            pairs.append((job_file(base.tfrecord_dir, plan.shard.parent_keys_file),
                          storage.join(config.temp_dir, *plan.shard.parent_keys_file.split("/"))))
            summary["keys_file"] = plan.shard.parent_keys_file
        elif dedupes(config):  # the duplicates scan reads the shard and writes its sidecar
            summary["keys_file"] = keys_file_name(base.job_name, plan.shard.parent_file)
        summaries.append(summary)
    if storage.is_remote(config.temp_dir) or storage.is_remote(base.tfrecord_dir):  # gs://: server-side, in parallel
        storage.copy_files(pairs)
    else:
        for source, destination in pairs:
            link_or_copy(source, destination)
    return summaries


def link_or_copy(source: str, destination: str) -> None:
    """Make local `destination` the file `source` is, whole: a hard link (no bytes copied) or, across
    devices or on file systems without links, a copy; through a temporary name and one rename."""
    directory = os.path.dirname(destination)
    os.makedirs(directory, exist_ok=True)
    staging = os.path.join(directory, temporary_file_name(os.path.basename(destination)))
    try:
        try:
            os.link(source, staging)
        except OSError:
            shutil.copyfile(source, staging)
        os.replace(staging, destination)
    finally:
        if os.path.exists(staging):
            os.remove(staging)


def job_vocabularies(found: Mapping[str, Sequence[str]], config: JobConfig) -> dict[str, list[str]]:
    """The vocabularies a job encodes with: those the table's TRAIN rows hold, or for an append the
    parent's grown by the new TRAIN labels (tfrecorder.format.lineage.grown_vocabularies)."""
    if config.base is None:
        return {column: list(labels) for column, labels in found.items()}
    return grown_vocabularies(config.base.vocabularies, found)


def merged_piece(shard: CarriedShard, position: int, config: JobConfig) -> Piece:
    """A small shard of the parent as a piece of the new job: the parent's file, read in place, with an
    offsets sidecar (each record's end) written from its index file into the job's pieces directory.
    Its digest orders it before the new rows' pieces, in the parent's order."""
    import numpy as np

    entries = index_array(storage.read_bytes(job_file(config.base.tfrecord_dir, shard.parent_index_file)))
    ends = (entries[:, 0] + entries[:, 1]).astype("<u8") if len(entries) else np.zeros(0, "<u8")
    offsets = storage.join(config.pieces_dir, f"merged-{uuid.uuid4().hex}{OFFSETS_SUFFIX}")
    storage.write_bytes(offsets, ends.tobytes() if sys.byteorder == "little" else ends.byteswap().tobytes())
    return Piece(shard.split, job_file(config.base.tfrecord_dir, shard.parent_file), shard.records, shard.bytes,
                 0, f"!{position:06d}", offsets)


def with_merged_pieces(pipeline: beam.Pipeline, config: JobConfig, pieces: beam.PCollection) -> beam.PCollection:
    """The job's pieces, plus for an append the parent's small shards as pieces (beam_pipelines.steps.carry_shards)."""
    if config.base is None or not config.base.merged:
        return pieces
    merged = (pipeline | "SmallBaseShards" >> beam.Create(list(enumerate(config.base.merged)))
              | "MergedPieces" >> beam.MapTuple(lambda position, shard: merged_piece(shard, position, config)))
    return (pieces, merged) | "WithMergedPieces" >> beam.Flatten()


def with_new_keys(summary: dict, config: JobConfig, plan: Optional[ShardPlan] = None) -> dict:
    """A new shard's summary, with the keys sidecar of its records written for a job of image rows: from
    its pieces' keys sidecars (written while encoding), or, when a piece has none (an append's merged
    shards), from the shard's records."""
    data = None if plan is None else shard_keys_from_pieces(plan)
    if data is None:
        if config.base is None or not config.schema.image_columns:  # records of no image rows (detection, ...)
            return summary
        data = shard_key_hashes(storage.join(config.temp_dir, summary["file"]), config.compression,
                                config.schema.image_columns[0])
    name = keys_file_name(config.job_name, summary["file"])
    storage.write_bytes(storage.join(config.temp_dir, *name.split("/")), data)
    return {**summary, "keys_file": name}
