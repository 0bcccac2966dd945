"""The conversion graph, shared by local (DirectRunner) and Dataflow runs.

    read rows ─► batch ─► prepare (split, label checks) ─► Reshuffle ─► encode + write pieces ─► plan shards
                                │                                               │              ─► Reshuffle ─► assemble shards
                                └► TRAIN labels ─► vocabulary combine ──(side input)┘
    discards (each stage) ─► part file per bundle ─► merge into discarded.csv
    everything ─► finalize (metadata.json, publish directory)

Rows travel in batches of `JobConfig.batch_size` from the source on, so Beam's per-element cost is
paid per batch. Only rows, labels and small descriptors are combined; image bytes flow straight from
the reading worker into a piece file.
"""
from __future__ import annotations

from typing import Mapping

import apache_beam as beam
from apache_beam.pvalue import AsList, AsSingleton

from beam_pipelines import sources, transforms
from tfrecorder.job_config import JobConfig
from tfrecorder.sharding import plan_shards


def build_pipeline(pipeline: beam.Pipeline, config: JobConfig) -> beam.PCollection:
    """Add the conversion graph to `pipeline`; returns the PCollection holding the final directory.

    Per-job descriptors (pieces, discard parts: O(bundles), never O(rows)) reach later steps as list
    side inputs and the two global combines skip Beam's default-value branch: each global combine or
    collection step adds a handful of transforms, and graph size is most of a small job's start-up time.
    """
    rows, malformed = pipeline | "ReadRows" >> sources.ReadRows(config)
    batches = rows | "BatchRows" >> beam.BatchElements(
        min_batch_size=config.batch_size, max_batch_size=config.batch_size
    )
    rows_in = (
        (batches | "BatchSizes" >> beam.Map(len), malformed | "OneEach" >> beam.Map(lambda _: 1))
        | "AllRows" >> beam.Flatten()
        | "CountRows" >> beam.CombineGlobally(sum).without_defaults()
    )
    prepared = batches | "Prepare" >> beam.ParDo(transforms.PrepareRows(config)).with_outputs(
        transforms.DISCARD, main="rows"
    )
    vocabularies = (
        prepared.rows
        | "TrainLabels" >> beam.FlatMap(transforms.train_labels, transforms.string_label_columns(config))
        | "Vocabulary" >> beam.CombineGlobally(transforms.VocabularyFn()).without_defaults()
    )
    vocabulary_side = AsSingleton(vocabularies, default_value={})
    encoded = (
        prepared.rows
        | "SpreadRows" >> beam.Reshuffle()
        | "EncodeAndWrite"
        >> beam.ParDo(transforms.EncodeAndWritePieces(config), vocabulary_side).with_outputs(
            transforms.DISCARD, transforms.IMAGE_KINDS, main="pieces"
        )
    )
    image_kinds = encoded[transforms.IMAGE_KINDS] | "ImageKinds" >> beam.CombineGlobally(
        transforms.ImageKindsFn()
    ).without_defaults()
    found = {"Read": malformed, "Prepare": prepared[transforms.DISCARD], "Encode": encoded[transforms.DISCARD]}
    return write_outputs(pipeline, config, encoded.pieces, found, transforms.finalize_job, vocabulary_side,
                         AsSingleton(rows_in, default_value=0), image_kinds=AsSingleton(image_kinds, default_value={}))


def write_outputs(pipeline: beam.Pipeline, config: JobConfig, pieces: beam.PCollection,
                  found: dict[str, beam.PCollection], finalize, *finalize_inputs, **finalize_options) -> beam.PCollection:
    """The graph's common tail: assemble shards from `pieces`, write discarded.csv from the discards
    `found` by each step, then `finalize(_, config, shards, *finalize_inputs, discard reasons, pieces,
    **finalize_options)`."""
    start = pipeline | "Start" >> beam.Create([None])
    shards = (
        start
        | "PlanShards"
        >> beam.FlatMap(lambda _, ps: plan_shards(ps, config.num_shards, config.max_shard_bytes), AsList(pieces))
        | "SpreadShards" >> beam.Reshuffle()
        | "AssembleShards" >> beam.ParDo(transforms.AssembleShard(config))
    )
    discard_parts = [  # written where they are found (fused with the step): discards are never buffered
        discards | f"{step}DiscardParts" >> beam.ParDo(transforms.WriteDiscardParts(config))
        for step, discards in found.items()
    ] | "AllDiscardParts" >> beam.Flatten()
    discard_reasons = start | "WriteDiscards" >> beam.Map(
        lambda _, parts: transforms.write_discards(parts, config), AsList(discard_parts)
    )
    return start | "Finalize" >> beam.FlatMap(
        finalize, config, AsList(shards), *finalize_inputs, AsSingleton(discard_reasons), AsList(pieces),
        **finalize_options,
    )
