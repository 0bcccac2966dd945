"""The conversion graph of image tables, shared by local (DirectRunner), Dataflow and portable runs; each
stage is a module of beam_pipelines/steps/.

    read (read_rows) ─► prepare (prepare_rows) ─► [distributed: SpreadRows] ─► encode (encode_rows: fetch,
         │                                                                   decode, write pieces)
         │                                                     ─► assemble (shard_planning, assemble_shards)
         └► read ─► count (count_table: rows, nullable columns, TRAIN, vocabulary) ─(side input, checked)┘
    quality (collect_statistics, find_duplicates; duplicates="drop": drop_duplicates rewrites the pieces
         holding a dropped row before shards are planned)
    discards (discard_files: a part file per bundle, merged into discarded.csv)
    finalize (finalize_job: metadata.json, TFDS files, publish)

The source is cut into parts (its RowSource: CSV byte slices, Parquet row groups, ...) that workers read in parallel.
Whole-table facts come from a second read of the parts, so the encoding branch streams its rows
straight from the reader: nothing waits for the side input holding rows back, and no collection of
rows is materialised between steps (memory does not grow with the table). When workers run elsewhere
(`config.distributed`: Dataflow, Flink, Spark), batches of
rows are also reshuffled before encoding (SpreadRows, a distributed shuffle) so that image reads
spread over every worker, not only those that read a part; the in-process runner would hold every
row in memory for it, and runs no more workers than there are parts anyway. A table-level error
(no rows, none in TRAIN) fails the job before anything is encoded. Rows travel in batches of
`JobConfig.batch_size` from the reader on (a part's rows, batched as they are read), so Beam's
per-element cost is paid per batch; image bytes flow straight
from the reading worker into a piece file. Tables without image columns take the columnar graph
instead (beam_pipelines.graphs.tabular_graph: each part read, encoded and written a whole Arrow batch at a time).
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.pvalue import AsDict, AsSingleton

from beam_pipelines.graphs import tabular_graph
from beam_pipelines.graphs.job_outputs import write_outputs
from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps import read_rows
from beam_pipelines.steps.base_duplicates import base_keys_of_parts, dedupes, drop_base_duplicates
from beam_pipelines.steps.carry_shards import job_vocabularies
from beam_pipelines.steps.count_table import count_table
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.encode_rows import IMAGE_KINDS, EncodeAndWritePieces, EncodeImageParts, ImageKindsFn
from beam_pipelines.steps.part_commits import DISCARD_PARTS
from beam_pipelines.steps.read_rows import MALFORMED, RECORDS, REASONED
from beam_pipelines.steps.collect_statistics import QUALITY
from beam_pipelines.steps.drop_duplicates import drop_duplicates
from beam_pipelines.steps.find_duplicates import quality_steps
from beam_pipelines.steps.finalize_job import finalize_with_stats
from beam_pipelines.steps.prepare_rows import PrepareRows


def build_image_graph(pipeline: beam.Pipeline, config: JobConfig) -> beam.PCollection:
    """Add the conversion graph to `pipeline`; returns the PCollection holding the final directory.

    Per-job descriptors (pieces, discard parts: O(bundles), never O(rows)) reach later steps as list
    side inputs: each global combine or collection step adds a handful of transforms, and graph size is
    most of a small job's start-up time. The table-stats combine keeps Beam's default value, so that an
    empty table is checked too.
    """
    if tabular_graph.is_tabular(config):  # image-free rows: encoded column-wise (issue 19)
        pieces, found, stats, committed, quality = tabular_graph.encode_table(pipeline, config)
        return write_outputs(pipeline, config, pieces, found, finalize_with_stats, AsSingleton(stats),
                             committed_discards=committed, image_kinds={}, **quality)
    parts = read_rows.SourceParts(pipeline, config)
    stats = count_table(parts, config)
    stats_side = AsSingleton(stats)
    if config.resumable:
        return _resumable_graph(pipeline, config, parts, stats)
    batches, malformed = parts.branch("Rows") | "ReadRows" >> read_rows.ReadRows(config, batch_rows=config.batch_size)
    prepared = batches | "Prepare" >> beam.ParDo(PrepareRows(config)).with_outputs(
        DISCARD, main="rows"
    )
    vocabulary_side = AsSingleton(  # an append's: the parent's, grown (issue 28)
        stats | "Vocabulary" >> beam.Map(lambda found: job_vocabularies(found.vocabularies, config)))
    rows_to_encode = prepared.rows
    found = {"Read": malformed, "Prepare": prepared[DISCARD]}
    if dedupes(config):  # an append: rows whose image is in the base are discarded (issue 28)
        rows_to_encode, found["Duplicates"] = drop_base_duplicates(pipeline, config, rows_to_encode)
    if config.distributed:  # spread image reads over every worker, not only those reading parts
        rows_to_encode = rows_to_encode | "SpreadRows" >> beam.Reshuffle()
    encoded = (
        rows_to_encode
        | "EncodeAndWrite"
        >> beam.ParDo(EncodeAndWritePieces(config), vocabulary_side).with_outputs(
            DISCARD, IMAGE_KINDS, QUALITY, main="pieces"
        )
    )
    image_kinds = encoded[IMAGE_KINDS] | "ImageKinds" >> beam.CombineGlobally(
        ImageKindsFn()
    ).without_defaults()
    found["Encode"] = encoded[DISCARD]
    pieces, quality = _dropping_duplicates(config, encoded.pieces, encoded[QUALITY], found)
    return write_outputs(pipeline, config, pieces, found, finalize_with_stats, stats_side,
                         image_kinds=AsSingleton(image_kinds, default_value={}), **quality)


def _dropping_duplicates(config: JobConfig, pieces: beam.PCollection, quality: beam.PCollection,
                         found: dict) -> tuple[beam.PCollection, dict]:
    """The statistics and duplicates steps (finalize's keyword side inputs); with duplicates="drop" the
    pieces without the dropped rows (found["Dropped"]: their discards), else `pieces` as they are."""
    finalize_inputs, dropped = quality_steps(config, quality)
    if dropped is not None:
        pieces, found["Dropped"] = drop_duplicates(config, pieces, dropped)
    return pieces, finalize_inputs




def _resumable_graph(pipeline: beam.Pipeline, config: JobConfig, parts: read_rows.SourceParts,
                     stats: beam.PCollection) -> beam.PCollection:
    """A resumable job's graph (issue 27): each part read, prepared, encoded and committed whole by one
    step (EncodeImageParts), so that a part done once is never read again; parts are spread over the
    workers, batches of a part over the forked encoding processes."""
    vocabulary_side = AsSingleton(  # an append's: the parent's, grown (issue 28)
        stats | "Vocabulary" >> beam.Map(lambda found: job_vocabularies(found.vocabularies, config)))
    sides = [vocabulary_side]
    if dedupes(config):  # an append: the base keys its new rows meet, decided on by the encoder (issue 28)
        sides.append(base_keys_of_parts(pipeline, config, parts))
    encoded = parts.branch("Rows") | "EncodeParts" >> beam.ParDo(EncodeImageParts(config), *sides).with_outputs(
        DISCARD_PARTS, MALFORMED, RECORDS, REASONED, IMAGE_KINDS, QUALITY, main="pieces")
    numbered = encoded[MALFORMED] | "NumberLines" >> beam.Map(
        read_rows.number_malformed, AsDict(encoded[RECORDS]), len(config.columns))
    image_kinds = encoded[IMAGE_KINDS] | "ImageKinds" >> beam.CombineGlobally(ImageKindsFn()).without_defaults()
    found = {"Read": (numbered, encoded[REASONED]) | "AllMalformed" >> beam.Flatten()}
    pieces, quality = _dropping_duplicates(config, encoded.pieces, encoded[QUALITY], found)
    return write_outputs(pipeline, config, pieces, found, finalize_with_stats, AsSingleton(stats),
                         committed_discards=encoded[DISCARD_PARTS],
                         image_kinds=AsSingleton(image_kinds, default_value={}), **quality)
