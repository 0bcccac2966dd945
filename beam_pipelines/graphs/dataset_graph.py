"""The conversion graph of a detection dataset (COCO, Pascal VOC, YOLO): records joined per image in the pipeline.

    read records ─┬► categories + object names ─► label map ─────────────────────(side input)─┐
                  └► spill to buckets by image id ─► GroupByKey(bucket) ─► join per image ─► batch ─► encode
                                                                              └──── discards ◄──────┘
    encode ─QUALITY─► statistics and duplicates (steps/find_duplicates, as detection_graph's)
    pieces ─► plan + assemble shards;  everything ─► finalize (label_map.pbtxt, statistics, metadata.json, publish)

The source yields category, image and object records (tfrecorder.rows.dataset_records); an object meets
its image only here (steps/join_buckets: records spilled to bucket files by image id, a GroupByKey of
the buckets' part files, each bucket grouped by image id in memory), so neither the driver nor any one
DoFn holds the dataset's annotations, and no runner buffers them. Masks are rasterised when an image is
encoded.
Every image and object record read is either inside a written Example or discarded (metadata.json
checks the sum). An UNASSIGNED image is given the split of its image bytes when encoded, and every
written image feeds the statistics and duplicate search (detection_graph.written_image, issue 29).
"""
from __future__ import annotations

import functools

import apache_beam as beam
from apache_beam.pvalue import AsSingleton

from beam_pipelines.graphs.detection_graph import dropping_images, end_of_batch, written_image
from beam_pipelines.graphs.job_outputs import write_outputs
from beam_pipelines.steps.collect_statistics import QUALITY
from beam_pipelines.steps import read_rows
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.encode_rows import EncodeAndWritePieces, read_image
from beam_pipelines.steps.fetch_images import reader_for
from beam_pipelines.steps.finalize_job import finalize_label_mapped_job
from beam_pipelines.steps import part_commits
from beam_pipelines.steps.join_buckets import BUCKETS, JoinRecords, SpilledBuckets, join_bucket
from beam_pipelines.steps.part_commits import DISCARD_PARTS, ROWS_WRITTEN
from tfrecorder.format import detection_keys
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows import dataset_records
from tfrecorder.rows.instance_encoder import InstanceEncoder


class LabelMapFn(beam.CombineFn):
    """The job's label map (id → name) from category records and object names: as small as the classes."""

    def create_accumulator(self) -> dataset_records.LabelMapAccumulator:
        return dataset_records.LabelMapAccumulator()

    def add_input(self, accumulator, row):
        accumulator.add(row)
        return accumulator

    def merge_accumulators(self, accumulators):
        merged = dataset_records.LabelMapAccumulator()
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator) -> dict[int, str]:
        return accumulator.result()


def _labelled(row: dict) -> bool:
    return row.get(dataset_records.RECORD) == dataset_records.CATEGORY or (
        row.get(dataset_records.RECORD) == dataset_records.OBJECT and row.get("label") is not None)


def _counted(row: dict) -> bool:
    return row.get(dataset_records.RECORD) != dataset_records.CATEGORY


class EncodeDatasetImages(EncodeAndWritePieces):
    """Encode batches of joined images into Examples and write pieces; reports records written."""

    image_keys = False  # its records are not image rows of an appendable job

    def _instance_encoder(self) -> InstanceEncoder:
        if self._encoder is None:
            self._encoder = InstanceEncoder(base_dir=self.config.base_dir, image_size=self.config.image_size,
                                            validate=self.config.validate,
                                            max_image_pixels=self.config.max_image_pixels)
        return self._encoder

    def process(self, batch, labels):
        encoder = self._instance_encoder()
        fetched = self._fetcher.fetch(encoder.resolve(joined.uri) for joined in batch)
        read = reader_for(fetched)
        read_file = functools.partial(read_image, max_bytes=self.config.max_image_bytes)
        pending = self._decoder.submit(fetched) if self._decoder else None
        rows_written = 0
        for joined in batch:
            data, inside, discards = encoder.encode(joined, read, read_file, pending.verdict if pending else None)
            for discard in discards:
                yield beam.pvalue.TaggedOutput(DISCARD, discard)
            if data is not None:
                rows_written += inside
                split = written_image(self, joined.split, encoder.resolve(joined.uri), encoder.written, data, pending)
                yield from self._write(split, data, 0)
            self._rows_done.add(1 + len(joined.objects))
        if pending:
            pending.wait()
        yield from end_of_batch(self)
        if rows_written:
            yield beam.pvalue.TaggedOutput(ROWS_WRITTEN, rows_written)


class EncodeDatasetBuckets(EncodeDatasetImages):
    """A resumable job's join and encode (issue 27): one join bucket (steps/join_buckets: a fixed set of
    image ids, by a stable hash) per element, joined and encoded in image id order in batches whose
    pieces close with them, then committed with its discards (join's and encode's), statistics and
    rows (beam_pipelines.steps.part_commits) — or emitted from the manifest an earlier attempt or run
    committed, without reading the bucket's records or any image. The label map needs every record, so
    a resumed job reads the annotation files again (streaming, no image)."""

    def process(self, element, labels):
        bucket, paths = element
        key = ("dataset bucket", bucket, BUCKETS)
        manifest = part_commits.committed(self.config, key)
        if manifest is None:
            manifest = self._encode_bucket(key, paths, labels)
        yield from part_commits.emit(self.config, manifest)

    def _encode_bucket(self, key, paths, labels) -> dict:
        work = part_commits.PartWork(self.config)
        counted: list[int] = []
        self._written = None  # one collector per bucket: its statistics depend on the bucket only

        def encode(batch: list, last: bool) -> None:
            outputs = list(EncodeDatasetImages.process(self, batch, labels)) if batch else []
            outputs.extend(writer.close() for writer in self.writers.values())
            self.writers = {}
            if last and self._written is not None:
                outputs.extend(self._written.finish())  # the bucket's digests and statistics, committed with it
                self._written = None
            work.add(outputs)

        batch: list = []
        for output in join_bucket(self.config, paths, labels, self._rows_done, counted):  # in image id order
            if isinstance(output, beam.pvalue.TaggedOutput):
                work.add([output])  # a join discard
                continue
            if len(batch) == self.config.batch_size:  # batches fixed by the bucket, not by bundling
                encode(batch, last=False)
                batch = []
            batch.append(output)
        encode(batch, last=True)
        return work.commit(key, counted[0] if counted else 0)


def _count(pcoll, label: str):
    return pcoll | label >> beam.combiners.Count.Globally().without_defaults()


def build_dataset_graph(pipeline: beam.Pipeline, config: JobConfig) -> beam.PCollection:
    """Add the dataset graph to `pipeline`; returns the PCollection holding the final directory."""
    rows, malformed = read_rows.SourceParts(pipeline, config).branch("Rows") | "ReadRows" >> read_rows.ReadRows(config)
    records = rows | "CountedRecords" >> beam.Filter(_counted)
    rows_in = (
        (_count(records, "CountRead"), _count(malformed, "CountMalformed"))
        | "AllRows" >> beam.Flatten()
        | "CountRows" >> beam.CombineGlobally(sum).without_defaults()
    )
    labels = AsSingleton(
        rows | "Labelled" >> beam.Filter(_labelled) | "LabelMap" >> beam.CombineGlobally(LabelMapFn()).without_defaults(),
        default_value={})
    found = {"Read": malformed}
    committed = None
    if config.resumable:  # issue 27: each join bucket joined, encoded and committed as one part
        encoded = (
            records
            | "Spill" >> SpilledBuckets(config)
            | "EncodeBuckets" >> beam.ParDo(EncodeDatasetBuckets(config), labels).with_outputs(
                DISCARD_PARTS, ROWS_WRITTEN, QUALITY, main="pieces")
        )
        committed = encoded[DISCARD_PARTS]
    else:
        joined = records | "Join" >> JoinRecords(config, labels)
        encoded = (
            joined.images  # spread over the workers by the join's GroupByKey already: no reshuffle (nor its buffer)
            | "BatchImages" >> beam.BatchElements(min_batch_size=config.batch_size, max_batch_size=config.batch_size)
            | "EncodeAndWrite" >> beam.ParDo(EncodeDatasetImages(config), labels).with_outputs(
                DISCARD, ROWS_WRITTEN, QUALITY, main="pieces")
        )
        found.update({"Join": joined[DISCARD], "Encode": encoded[DISCARD]})
    rows_written = encoded[ROWS_WRITTEN] | "RowsWritten" >> beam.CombineGlobally(sum).without_defaults()
    pieces, quality = dropping_images(config, encoded.pieces, encoded[QUALITY], found)
    return write_outputs(pipeline, config, pieces, found, finalize_dataset_job, labels,
                         AsSingleton(rows_in, default_value=0), AsSingleton(rows_written, default_value=0),
                         committed_discards=committed, **quality)


def finalize_dataset_job(_, config: JobConfig, shards, labels, rows_in, rows_written, discard_reasons, pieces,
                         statistics=None, duplicates=None):
    """Write label_map.pbtxt (the dataset's own ids), statistics.json/.pb, duplicates.csv and
    metadata.json, clean up, publish; safe to re-run."""
    yield finalize_label_mapped_job(
        config, shards, [name for _id, name in sorted(labels.items())], rows_in, rows_written, discard_reasons,
        detection_keys.dataset_metadata(labels, config.source.kind), detection_keys.dataset_feature_spec(),
        detection_keys.label_map_of(labels), statistics, duplicates)
