"""The conversion graph of image-free tables: each source part read as Arrow batches and encoded column-wise.

    source parts ─► read batches ─► prepare + encode (tfrecorder.rows.columnar_encoder) + write pieces ─► (common tail)
         └► read batches ─► table stats per batch ─(side input: vocabulary, checked)┘
            (a staged DataFrame's table stats: counted by the driver while it staged the frame, not read)
    quality (collect_statistics, find_duplicates; duplicates="drop": drop_duplicates rewrites the pieces
         holding a dropped row, and reads the dropped rows' cells back from their source parts)

A part (a CSV byte slice or a Parquet row group) is one element: the worker reads it batch by batch
(BATCH_ROWS rows: memory does not grow with the table), so Beam's per-element cost is paid per part,
and rows never travel between steps as python dicts. Discards, malformed CSV lines and their
numbering, pieces and retry safety are those of the row graph (beam_pipelines.graphs.image_graph).
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.pvalue import AsDict, AsSingleton

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps import read_rows
from beam_pipelines.steps.carry_shards import job_vocabularies
from beam_pipelines.steps.collect_statistics import QUALITY
from beam_pipelines.steps.count_table import count_table
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.drop_duplicates import drop_duplicates
from beam_pipelines.steps.find_duplicates import quality_steps
from beam_pipelines.steps.encode_columns import EncodePart
from beam_pipelines.steps.part_commits import DISCARD_PARTS
from beam_pipelines.steps.read_rows import MALFORMED, RECORDS, reads_batches


def is_tabular(config: JobConfig) -> bool:
    """Whether the job's rows go through the columnar graph: a source read as batches, without image
    columns."""
    return reads_batches(config) and not config.schema.image_columns


def encode_table(pipeline: beam.Pipeline, config: JobConfig) -> tuple:
    """The columnar graph up to the common tail (pipeline.write_outputs): (pieces, discards found by
    each step, checked table stats, DiscardParts of committed parts: resumable jobs, finalize's statistics
    and duplicates side inputs)."""
    parts = read_rows.SourceParts(pipeline, config)
    stats = count_table(parts, config)
    vocabulary_side = AsSingleton(  # an append's: the parent's, grown (issue 28)
        stats | "Vocabulary" >> beam.Map(lambda found: job_vocabularies(found.vocabularies, config)))
    encoded = parts.branch("Rows") | "EncodeAndWrite" >> beam.ParDo(EncodePart(config), vocabulary_side).with_outputs(
        DISCARD, MALFORMED, RECORDS, DISCARD_PARTS, QUALITY, main="pieces")
    malformed = encoded[MALFORMED] | "NumberLines" >> beam.Map(
        read_rows.number_malformed, AsDict(encoded[RECORDS]), len(config.columns))
    found = {"Read": malformed, "Encode": encoded[DISCARD]}
    quality, dropped = quality_steps(config, encoded[QUALITY])
    pieces = encoded.pieces
    if dropped is not None:  # duplicates="drop" (issue 29)
        pieces, found["Dropped"] = drop_duplicates(config, pieces, dropped, parts.branch("Dropped"))
    return pieces, found, stats, encoded[DISCARD_PARTS], quality
