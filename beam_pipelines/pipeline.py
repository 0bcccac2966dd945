"""The conversion graph, shared by local (DirectRunner) and Dataflow runs.

    read rows ─► prepare (split, label checks) ─► Reshuffle ─► encode + write pieces ─► plan shards
                      │                                               │                 ─► Reshuffle ─► assemble shards
                      └► TRAIN labels ─► vocabulary combine ──(side input)┘
    discards (all stages) ─► discarded.csv;   everything ─► finalize (metadata.json, publish directory)

Only rows, labels and small descriptors are combined; image bytes flow straight from the reading
worker into a piece file.
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.pvalue import AsList, AsSingleton

from beam_pipelines import sources, transforms
from tfrecorder.job_config import JobConfig
from tfrecorder.sharding import plan_shards


def build_pipeline(pipeline: beam.Pipeline, config: JobConfig) -> beam.PCollection:
    """Add the conversion graph to `pipeline`; returns the PCollection holding the final directory."""
    rows, malformed = pipeline | "ReadRows" >> sources.ReadRows(config)
    rows_in = (
        (rows, malformed) | "AllRows" >> beam.Flatten() | "CountRows" >> beam.combiners.Count.Globally()
    )
    prepared = rows | "Prepare" >> beam.ParDo(transforms.PrepareRows(config)).with_outputs(
        transforms.DISCARD, main="rows"
    )
    vocabularies = (
        prepared.rows
        | "TrainLabels" >> beam.FlatMap(transforms.train_labels, transforms.string_label_columns(config))
        | "Vocabulary" >> beam.CombineGlobally(transforms.VocabularyFn())
    )
    encoded = (
        prepared.rows
        | "SpreadRows" >> beam.Reshuffle()
        | "BatchRows" >> beam.BatchElements(min_batch_size=1, max_batch_size=config.batch_size)
        | "EncodeAndWrite"
        >> beam.ParDo(transforms.EncodeAndWritePieces(config), AsSingleton(vocabularies)).with_outputs(
            transforms.DISCARD, main="pieces"
        )
    )
    pieces = encoded.pieces | "CollectPieces" >> beam.combiners.ToList()
    shards = (
        pieces
        | "PlanShards" >> beam.FlatMap(lambda ps: plan_shards(ps, config.num_shards, config.max_shard_bytes))
        | "SpreadShards" >> beam.Reshuffle()
        | "AssembleShards" >> beam.ParDo(transforms.AssembleShard(config))
    )
    discard_reasons = (
        (malformed, prepared[transforms.DISCARD], encoded[transforms.DISCARD])
        | "AllDiscards" >> beam.Flatten()
        | "CollectDiscards" >> beam.combiners.ToList()
        | "WriteDiscards" >> beam.Map(transforms.write_discards, config)
    )
    return (
        pipeline
        | "Start" >> beam.Create([None])
        | "Finalize"
        >> beam.FlatMap(
            transforms.finalize_job,
            config,
            AsList(shards),
            AsSingleton(vocabularies),
            AsSingleton(rows_in),
            AsSingleton(discard_reasons),
            AsSingleton(pieces),
        )
    )
