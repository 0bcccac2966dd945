"""The conversion graph of a detection job (one row per box, one Example per image).

    read rows ─► check boxes ─► GroupByKey(image URI) ─► split per image ─► batch ─► encode + write pieces
                     │                                        │    └► TRAIN labels ─► vocabulary ─(side input)┘
                     └──────────── discards ◄─────────────────┘
    encode ─QUALITY─► statistics and duplicates (steps/find_duplicates, as image jobs)
    pieces ─► plan + assemble shards;  everything ─► finalize (label_map.pbtxt, statistics, metadata.json, publish)

Only small row dicts are grouped (never image bytes). Rows are accounted exactly: every row read is
either inside a written Example (counted by the encoder) or discarded, and metadata.json checks that.

Issue 29: each written image feeds the bundle's statistics (tfrecorder.rows.detection_statistics:
images, boxes per image, boxes per class, image sizes, box areas and aspects) and its content digest
goes to the duplicate buckets, through the same WrittenRows collector and grouping step as image jobs
(`written_image`, shared with the dataset graph). An UNASSIGNED image keeps that split until it is
encoded, and is then given the split of its image bytes' digest (splits.split_of_digest): byte-identical
images land in one split whatever their URIs; the vocabulary takes UNASSIGNED images' labels as
possibly TRAIN ones, as the count step of image jobs does.
"""
from __future__ import annotations

import hashlib
from typing import Any

import apache_beam as beam
from apache_beam.pvalue import AsSingleton

from beam_pipelines.steps import part_commits, read_rows
from beam_pipelines.steps.part_commits import DISCARD_PARTS, ROWS_WRITTEN
from beam_pipelines.graphs.job_outputs import write_outputs
from beam_pipelines.steps.count_table import VocabularyFn
from beam_pipelines.steps.discard_files import DISCARD, cell
from beam_pipelines.steps.encode_rows import EncodeAndWritePieces
from beam_pipelines.steps.progress_counters import RowsDone
from beam_pipelines.steps.collect_statistics import QUALITY, WrittenRows
from beam_pipelines.steps.fetch_images import reader_for
from beam_pipelines.steps.drop_duplicates import drop_duplicates
from beam_pipelines.steps.find_duplicates import quality_steps
from beam_pipelines.steps.finalize_job import finalize_label_mapped_job
from tfrecorder.format import detection_keys
from tfrecorder.rows import detection_encoder
from tfrecorder.rows.detection_statistics import IMAGE, STATISTICS_SCHEMA, DetectionStatistics, EncodedImage
from tfrecorder.rows.duplicate_groups import content_digest
from tfrecorder.core import splits
from tfrecorder.options.job_config import JobConfig
from tfrecorder.errors import RowError
from tfrecorder.core.schema import SPLIT_COLUMN



def _box_units(config: JobConfig) -> str:
    return config.extra_metadata.get("box_units", "relative")


class CheckBoxes(beam.DoFn):
    """Check each box row on its own (numbers, order, range, split name); emits (image URI, (row, box))."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._rows_done = RowsDone(self.config)

    def process(self, row: dict[str, Any]):
        try:
            if splits.normalize_split(row.get(SPLIT_COLUMN)) is None:
                raise RowError(f"unknown split: {row.get(SPLIT_COLUMN)!r} (expected TRAIN, VALIDATION, TEST or UNASSIGNED)")
            box = detection_encoder.check_box_row(row, _box_units(self.config))
        except RowError as exc:
            self._rows_done.add(1)
            yield beam.pvalue.TaggedOutput(DISCARD, (row, str(exc)))
            return
        yield str(row["image_uri"]).strip(), (row, box)


class SplitImages(beam.DoFn):
    """(image URI, rows) → (split, URI, rows); all rows of an image whose rows disagree are discarded."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._rows_done = RowsDone(self.config)

    def process(self, element):
        uri, rows = element
        rows = list(rows)
        try:
            split = detection_encoder.merge_image_rows(uri, (row.get(SPLIT_COLUMN) for row, _ in rows),
                                                       self.config.split_ratios, self.config.content_splits)
        except RowError as exc:
            self._rows_done.add(len(rows))
            for row, _box in rows:
                yield beam.pvalue.TaggedOutput(DISCARD, (row, str(exc)))
            return
        yield split, uri, rows


def train_labels(image) -> Any:
    split, _uri, rows = image
    if split in (splits.TRAIN, splits.UNASSIGNED):  # UNASSIGNED: split from its bytes when encoded, maybe TRAIN
        labels = {box.label for _row, box in rows if box is not None}
        if labels:
            yield {"label": labels}


def written_image(dofn: EncodeAndWritePieces, split: str, resolved_uri: str, image: EncodedImage,
                  example: bytes, pending) -> str:
    """An image a detection or dataset encoder wrote (issue 29): its split (an UNASSIGNED image's chosen
    from its bytes' digest) and, when the job computes statistics, its statistics row and digest added
    to the bundle's WrittenRows (`dofn._written`, emptied at the bundle's end as image jobs' is)."""
    digest = content_digest(image.data)
    if split == splits.UNASSIGNED:
        split = splits.split_of_digest(digest, dofn.config.split_ratios)
    if dofn.config.statistics:
        if dofn._written is None:
            dofn._written = WrittenRows(STATISTICS_SCHEMA, near_duplicates=dofn._hashes_images(),
                                        statistics=DetectionStatistics, near_shift=dofn.config.near_bucket_shift)
        phash = pending.perceptual_hash(resolved_uri) if pending is not None and dofn._hashes_images() else None
        dofn._written.add_row(split, image.row, [(IMAGE, resolved_uri, image.info, image.data)], example, phash,
                              digest=digest, place=image_place(dofn, split, image) if dofn._drops else None)
    return split


def image_place(dofn: EncodeAndWritePieces, split: str, image: EncodedImage) -> tuple:
    """Where the image's record is about to be written (duplicates="drop"): its piece's file name and
    record number, no unknown labels, and the cells of every source row inside it — a tuple of rows
    (beam_pipelines.steps.drop_duplicates discards each of them when the image is dropped)."""
    writer = dofn._writer(split)
    rows = tuple(tuple(cell(row.get(column)) for column in dofn.config.columns) for row in image.inside)
    return writer.path.rsplit("/", 1)[-1], writer.records, 0, rows


def end_of_batch(dofn: EncodeAndWritePieces):
    """The QUALITY outputs a batch's end releases (digests by bucket, once enough are held)."""
    if dofn._written is not None:
        yield from dofn._written.end_batch()


class EncodeImages(EncodeAndWritePieces):
    """Encode batches of images into detection Examples and write pieces; reports rows written."""

    image_keys = False  # its records are not image rows of an appendable job

    def _detection_encoder(self, vocabularies) -> detection_encoder.DetectionEncoder:
        if self._encoder is None:
            self._encoder = detection_encoder.DetectionEncoder(
                detection_keys.label_ids(vocabularies.get("label", [])), base_dir=self.config.base_dir,
                box_units=_box_units(self.config), image_size=self.config.image_size,
                validate=self.config.validate, max_image_pixels=self.config.max_image_pixels)
        return self._encoder

    def process(self, batch, vocabularies):
        encoder = self._detection_encoder(vocabularies)
        fetched = self._fetcher.fetch(encoder.resolve(uri) for _split, uri, _rows in batch)
        read = reader_for(fetched)
        pending = self._decoder.submit(fetched) if self._decoder else None  # decoded on every core meanwhile
        rows_written = 0
        for split, uri, rows in batch:
            data, inside, discards = encoder.encode(uri, rows, read, pending.verdict if pending else None)
            for discard in discards:
                yield beam.pvalue.TaggedOutput(DISCARD, discard)
            if data is not None:
                rows_written += inside
                split = written_image(self, split, encoder.resolve(uri), encoder.written, data, pending)
                yield from self._write(split, data, 0)
            self._rows_done.add(len(rows))
        if pending:
            pending.wait()
        yield from end_of_batch(self)
        if rows_written:
            yield beam.pvalue.TaggedOutput(ROWS_WRITTEN, rows_written)


def image_bucket(uri: str, buckets: int) -> int:
    """The commit bucket of an image: a stable hash of its URI (the same in every process and run)."""
    return int(hashlib.sha256(uri.encode("utf-8")).hexdigest()[:8], 16) % buckets


class EncodeImageBuckets(EncodeImages):
    """A resumable job's encode stage (issue 27): one bucket of images (image_bucket) per element,
    encoded in URI order in batches whose pieces close with them, then committed with its discards
    (beam_pipelines.steps.part_commits) — or emitted from the manifest an earlier attempt or run
    committed, without fetching an image. Grouping rows by image needs every row read, so a resumed
    detection job reads the annotations again (no image) and encodes only the buckets not committed."""

    def process(self, element, vocabularies):
        bucket, images = element
        key = ("detection bucket", bucket, self.config.commit_buckets)
        manifest = part_commits.committed(self.config, key)
        if manifest is None:
            manifest = self._encode_bucket(key, sorted(images, key=lambda image: image[1]), vocabularies)
        yield from part_commits.emit(self.config, manifest)

    def _encode_bucket(self, key, images, vocabularies) -> dict:
        work = part_commits.PartWork(self.config)
        self._written = None  # one collector per bucket: its statistics depend on the bucket only
        for start in range(0, len(images), self.config.batch_size):
            outputs = list(EncodeImages.process(self, images[start:start + self.config.batch_size], vocabularies))
            outputs.extend(writer.close() for writer in self.writers.values())
            self.writers = {}
            if start + self.config.batch_size >= len(images) and self._written is not None:
                outputs.extend(self._written.finish())  # the bucket's digests and statistics, committed with it
                self._written = None
            work.add(outputs)
        return work.commit(key, sum(len(image_rows) for _split, _uri, image_rows in images))


def _count(pcoll, label: str):
    return pcoll | label >> beam.combiners.Count.Globally().without_defaults()


def build_detection_graph(pipeline: beam.Pipeline, config: JobConfig) -> beam.PCollection:
    """Add the detection graph to `pipeline`; returns the PCollection holding the final directory."""
    rows, malformed = read_rows.SourceParts(pipeline, config).branch("Rows") | "ReadRows" >> read_rows.ReadRows(config)
    rows_in = (
        (_count(rows, "CountRead"), _count(malformed, "CountMalformed"))
        | "AllRows" >> beam.Flatten()
        | "CountRows" >> beam.CombineGlobally(sum).without_defaults()
    )
    checked = rows | "CheckBoxes" >> beam.ParDo(CheckBoxes(config)).with_outputs(DISCARD, main="boxes")
    images = (
        checked.boxes
        | "GroupByImage" >> beam.GroupByKey()
        | "SplitImages" >> beam.ParDo(SplitImages(config)).with_outputs(DISCARD, main="images")
    )
    vocabulary_side = AsSingleton(
        images.images
        | "TrainLabels" >> beam.FlatMap(train_labels)
        | "Vocabulary" >> beam.CombineGlobally(VocabularyFn()).without_defaults(),
        default_value={},
    )
    found = {"Read": malformed, "Check": checked[DISCARD], "Split": images[DISCARD]}
    committed = None
    if config.resumable:  # issue 27: images encoded and committed bucket by bucket
        buckets = config.commit_buckets
        encoded = (
            images.images
            | "BucketImages" >> beam.Map(lambda image: (image_bucket(image[1], buckets), image))
            | "GroupByBucket" >> beam.GroupByKey()
            | "EncodeBuckets" >> beam.ParDo(EncodeImageBuckets(config), vocabulary_side).with_outputs(
                DISCARD_PARTS, ROWS_WRITTEN, QUALITY, main="pieces")
        )
        committed = encoded[DISCARD_PARTS]
    else:
        encoded = (
            images.images
            | "SpreadImages" >> beam.Reshuffle()
            | "BatchImages" >> beam.BatchElements(min_batch_size=config.batch_size, max_batch_size=config.batch_size)
            | "EncodeAndWrite" >> beam.ParDo(EncodeImages(config), vocabulary_side).with_outputs(
                DISCARD, ROWS_WRITTEN, QUALITY, main="pieces")
        )
        found["Encode"] = encoded[DISCARD]
    rows_written = encoded[ROWS_WRITTEN] | "RowsWritten" >> beam.CombineGlobally(sum).without_defaults()
    pieces, quality = dropping_images(config, encoded.pieces, encoded[QUALITY], found)
    return write_outputs(pipeline, config, pieces, found, finalize_detection_job, vocabulary_side,
                         AsSingleton(rows_in, default_value=0), AsSingleton(rows_written, default_value=0),
                         committed_discards=committed, **quality)


def dropping_images(config: JobConfig, pieces: beam.PCollection, quality: beam.PCollection,
                    found: dict) -> tuple[beam.PCollection, dict]:
    """The statistics and duplicates steps (finalize's keyword side inputs); with duplicates="drop" the
    pieces without the dropped images (found["Dropped"]: each of their rows discarded as `duplicate of
    <kept image>`), else `pieces` as they are. As image_graph's, for images."""
    finalize_inputs, dropped = quality_steps(config, quality)
    if dropped is not None:
        pieces, found["Dropped"] = drop_duplicates(config, pieces, dropped)
    return pieces, finalize_inputs


def finalize_detection_job(_, config: JobConfig, shards, vocabularies, rows_in, rows_written, discard_reasons, pieces,
                           statistics=None, duplicates=None):
    """Write label_map.pbtxt, statistics.json/.pb, duplicates.csv and metadata.json, clean temporary
    files, and publish the job directory; safe to re-run."""
    vocabulary = list(vocabularies.get("label", []))
    yield finalize_label_mapped_job(
        config, shards, vocabulary, rows_in, rows_written, discard_reasons,
        detection_keys.detection_metadata(vocabulary, _box_units(config)), detection_keys.feature_spec(),
        detection_keys.label_map_pbtxt(vocabulary), statistics, duplicates)
