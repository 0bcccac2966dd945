"""A source part as the unit of committed work (issue 27: resumable conversion).

A resumable job's step that reads and encodes a whole part (tabular_graph's EncodePart, image_graph's
EncodeImageParts) closes the part's pieces and its discard part file, then commits the part's manifest
(`_parts/<part key>.json`, tfrecorder.format.resume_files): created exclusively, so the first committed
attempt wins. Every attempt then emits what the manifest holds — the part's pieces, its discard part,
the CSV record count and malformed lines — whether it did the work or found it done: a replayed
bundle and a resumed job emit exactly what the first attempt committed, and the part is neither read
nor encoded again. The part's whole-table facts (TableStats) are committed the same way by the
count step (`_parts/<part key>.stats.json`).

A part's quality output (issue 29: its statistics sketches merged into one, its content digests and
perceptual-hash band keys by bucket, beam_pipelines.steps.collect_statistics) is written to a file of
the attempt's own (`_parts/<part key>.<attempt>.quality.pkl`, laid out by `quality_file_bytes`) before
the manifest is created, and the manifest names it: a committed part's statistics and digests are
emitted from that file (a local job's digests as where they lie in it: `CommittedBuckets`), never
recomputed, and a losing attempt's file is never read (it goes with `_parts/` at finalize). The part's
statistics travel with its key, so that they are merged in part order (find_duplicates), and a resumed
job's quantile sketches are the uninterrupted job's.

Pieces depend only on their part (closed at the part's end, or at each batch of a fixed number of the
part's rows), never on bundling, so a resumed job's shards are the uninterrupted job's.
"""
from __future__ import annotations

import dataclasses
import hashlib
import pickle
import struct
import uuid
from typing import Any, Callable, Iterable, Iterator, Optional

import apache_beam as beam

from beam_pipelines.steps.collect_statistics import BUCKET_KEYS, QUALITY, STATISTICS_KEY, merged_by_key

from beam_pipelines.steps.discard_files import DISCARD, DiscardPart, DiscardPartWriter
from beam_pipelines.steps.read_rows import MALFORMED, RECORDS, REASONED
from beam_pipelines.steps.shard_planning import Piece
from tfrecorder.format import resume_files
from tfrecorder.io import storage
from tfrecorder.rows.dataset_statistics import merge_all
from tfrecorder.rows.duplicate_groups import DigestBlocks
from tfrecorder.rows.near_duplicates import BUCKET_SHIFT
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.table_stats import TableStats

DISCARD_PARTS = "discard_parts"  # tagged output: a committed part's DiscardPart
IMAGE_KINDS = "image_kinds"  # tagged output: (feature prefix, format, channels) of the images written
ROWS_WRITTEN = "rows_written"  # tagged output (detection): rows inside the written Examples


def _relative(config: JobConfig, path: str) -> str:
    prefix = config.temp_dir.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _absolute(config: JobConfig, name: str) -> str:
    return config.temp_dir.rstrip("/") + "/" + name


def committed(config: JobConfig, part: Any) -> Optional[dict]:
    """The part's manifest if a earlier attempt (or run) committed it."""
    return resume_files.read_json(resume_files.manifest_path(config.temp_dir, resume_files.part_key(part)))


class PartWork:
    """A part's encode outputs gathered for its commit: its closed pieces (its discards go to its own
    discard part file), image kinds, QUALITY pairs, the rows inside its written Examples (detection),
    and what reading it found (`records`, `malformed`, `reasoned`: set by the caller)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self.discards = DiscardPartWriter(config.discards_dir, config.columns)
        self.pieces: list[Piece] = []
        self.image_kinds: set = set()
        self.quality: list = []
        self.rows_written = 0
        self.records: Optional[tuple] = None
        self.malformed: list = []
        self.reasoned: list = []

    def add(self, outputs: Iterable[Any]) -> None:
        for output in outputs:
            if not isinstance(output, beam.pvalue.TaggedOutput):
                self.pieces.append(output)
            elif output.tag == DISCARD:
                self.discards.write(*output.value)
            elif output.tag == QUALITY:
                self.quality.append(output.value)
            elif output.tag == IMAGE_KINDS:
                self.image_kinds.update(tuple(kind) for kind in output.value)
            elif output.tag == ROWS_WRITTEN:
                self.rows_written += output.value
            else:
                raise ValueError(f"a part's encode gave an output tagged {output.tag!r}, which is not committed")

    def commit(self, part: Any, rows: int) -> dict:
        """Close the discard part file and commit the part (`commit`); returns the manifest that won."""
        closed = self.discards.close()
        return commit(self.config, part, rows, self.pieces, closed if closed.rows else None, self.records,
                      self.malformed, self.reasoned, self.image_kinds, rows_written=self.rows_written or None,
                      quality=self.quality if self.config.statistics else None)


def commit(config: JobConfig, part: Any, rows: int, pieces: Iterable[Piece], discards: Optional[DiscardPart],
           records: Optional[tuple] = None, malformed: Iterable[tuple] = (), reasoned: Iterable[tuple] = (),
           image_kinds: Iterable[tuple] = (), rows_written: Optional[int] = None,
           quality: Optional[list] = None) -> dict:
    """Commit the part's closed work; returns the manifest that won (this one, or an earlier attempt's).
    `rows_written`: detection jobs, the part's rows inside written Examples. `quality`: the part's
    QUALITY pairs (issue 29; None when the job computes no statistics), written to the attempt's own
    file before the manifest."""
    key = resume_files.part_key(part)
    quality_file = None
    if quality is not None:
        quality_file = storage.join(resume_files.parts_dir(config.temp_dir),
                                    f"{key}.{uuid.uuid4().hex[:12]}{QUALITY_SUFFIX}")
        storage.write_bytes(quality_file, quality_file_bytes(part_quality(quality, config.schema,
                                                                          config.near_bucket_shift,
                                                                          config.buckets_per_key)))
    manifest = {
        "part": repr(part)[:300],
        "rows": rows,
        "pieces": [{"split": p.split, "file": _relative(config, p.path), "records": p.records, "bytes": p.bytes,
                    "unknown_labels": p.unknown_labels, "digest": p.digest, **({"keyed": True} if p.keyed else {})}
                   for p in pieces],
        "discards": None if discards is None else {
            "file": _relative(config, discards.path), "rows": discards.rows,
            "reasons": [list(reason) for reason in discards.reasons]},
        "records": None if records is None else list(records),
        "malformed": [list(item) for item in malformed],
        "reasoned": [list(item) for item in reasoned],
        "image_kinds": sorted(list(kind) for kind in image_kinds),
        **({} if rows_written is None else {"rows_written": rows_written}),
        **({} if quality_file is None else {"quality": _relative(config, quality_file)}),
    }
    return resume_files.commit_json(resume_files.manifest_path(config.temp_dir, key), manifest)


QUALITY_SUFFIX = ".quality.pkl"


def part_quality(pairs: Iterable[tuple], schema: Any, near_shift: int = BUCKET_SHIFT,
                 buckets_per_key: int = 1) -> list[tuple]:
    """A part's QUALITY pairs as committed: its statistics (one per batch: batches are fixed by the part)
    merged into one in an order of their content (the digest of each one pickled), so that the forked
    encoding processes, however many and in whatever order they return batches, give the same sketch;
    digest and band-key pairs one per bucket (collect_statistics.merged_by_key; their groups are sorted
    where they are written). Exact buckets holding DigestBlocks go `buckets_per_key` under one key
    (BUCKET_KEYS + bucket // buckets_per_key), as the bytes of the pickle of their (bucket, blocks): Beam's
    in-process runner pays for every grouping element, and decodes every grouped value and encodes it again
    (its GroupingBuffer), which costs bytes a copy and blocks two pickle passes; the grouping unpickles them
    once (find_duplicates.quality_group). A million-row DataFrame: 2.39 → 2.31 s as bytes, 2.48 → 2.44 s
    with 16 buckets a key. The part's file keeps those bytes after its head (`quality_file_bytes`), where
    a local job's grouping reads them (`quality_of`)."""
    statistics = [value for key, value in pairs if key == STATISTICS_KEY]
    kept, keyed = [], {}
    for key, value in merged_by_key([(key, value) for key, value in pairs if key != STATISTICS_KEY], near_shift):
        if isinstance(value, DigestBlocks):
            keyed.setdefault(BUCKET_KEYS + key // buckets_per_key, []).append((key, value))
        else:
            kept.append((key, value))
    kept.extend((key, pickle.dumps(buckets, protocol=pickle.HIGHEST_PROTOCOL)) for key, buckets in sorted(keyed.items()))
    if statistics:
        statistics.sort(key=lambda found: hashlib.sha256(pickle.dumps(found, protocol=4)).digest())
        kept.append((STATISTICS_KEY, merge_all(statistics, schema)))
    return kept


_HEAD_LENGTH = struct.Struct("<Q")


@dataclasses.dataclass(frozen=True)
class CommittedBuckets:
    """A committed part's exact buckets of one grouping key where they lie: bytes [offset, offset + length)
    of its quality file, the pickle of their [(bucket, DigestBlocks)] (find_duplicates.write_buckets)."""

    path: str
    offset: int
    length: int

    def load(self) -> list:
        return pickle.loads(storage.read_range(self.path, self.offset, self.length))


def quality_file_bytes(pairs: list[tuple]) -> bytes:
    """A part's quality file (`part_quality`'s pairs): the length of its head (8 bytes, little-endian), its
    head (the pickle of the pairs, each exact-bucket key's value (key ≥ BUCKET_KEYS) replaced by the
    (offset, length) of its bytes after the head), then those bytes back to back. A reader takes the head
    alone and finds each key's buckets where they lie (`committed_quality`)."""
    head, payloads, offset = [], [], 0
    for key, value in pairs:
        if key >= BUCKET_KEYS:
            head.append((key, (offset, len(value))))
            payloads.append(value)
            offset += len(value)
        else:
            head.append((key, value))
    pickled = pickle.dumps(head, protocol=4)
    return b"".join([_HEAD_LENGTH.pack(len(pickled)), pickled, *payloads])


def committed_quality(path: str, by_reference: bool = False) -> list[tuple]:
    """A committed part's quality pairs from its file (`quality_file_bytes`), each exact-bucket key's value
    as its bytes, or with `by_reference` as the CommittedBuckets naming them in the file."""
    if by_reference:
        head_length = _HEAD_LENGTH.unpack(storage.read_range(path, 0, _HEAD_LENGTH.size))[0]
        head, data = pickle.loads(storage.read_range(path, _HEAD_LENGTH.size, head_length)), None
    else:
        data = storage.read_bytes(path)
        head_length = _HEAD_LENGTH.unpack_from(data)[0]
        head = pickle.loads(memoryview(data)[_HEAD_LENGTH.size:_HEAD_LENGTH.size + head_length])
    start = _HEAD_LENGTH.size + head_length
    pairs = []
    for key, value in head:
        if key >= BUCKET_KEYS:
            offset, length = value
            value = (CommittedBuckets(path, start + offset, length) if data is None
                     else data[start + offset:start + offset + length])
        pairs.append((key, value))
    return pairs


def quality_of(config: JobConfig, manifest: dict) -> Iterator[Any]:
    """A committed part's QUALITY outputs, read from the file its manifest names; its statistics keyed
    by the part's key ((STATISTICS_KEY, (part key, statistics))), merged in that order. A job whose work
    directory is local sends its exact buckets as CommittedBuckets, read where they lie by the grouping:
    Beam's in-process runner copies every grouped value four times (encoded, decoded into its grouping
    buffer, encoded per key, decoded by the worker), ≈17 MB of digests a million rows each time. A
    remote job's workers send the bytes through the shuffle: a reference would cost one ranged read per
    part and key."""
    name = manifest.get("quality")
    if not name:
        return
    order = name.rsplit("/", 1)[-1].split(".", 1)[0]  # the part's key
    path = _absolute(config, name)
    for key, value in committed_quality(path, by_reference=not storage.is_remote(path)):
        yield beam.pvalue.TaggedOutput(QUALITY, (key, (order, value) if key == STATISTICS_KEY else value))


def pieces_of(config: JobConfig, manifest: dict) -> list[Piece]:
    return [Piece(p["split"], _absolute(config, p["file"]), p["records"], p["bytes"], p["unknown_labels"], p["digest"],
                  keyed=bool(p.get("keyed"))) for p in manifest["pieces"]]


def emit(config: JobConfig, manifest: dict) -> Iterator[Any]:
    """What the part's step outputs, from its manifest: pieces (main output), then its DiscardPart,
    RECORDS, MALFORMED, REASONED, IMAGE_KINDS and QUALITY tagged outputs."""
    yield from pieces_of(config, manifest)
    discards = manifest.get("discards")
    if discards:
        yield beam.pvalue.TaggedOutput(DISCARD_PARTS, DiscardPart(
            _absolute(config, discards["file"]), discards["rows"],
            tuple((reason, count) for reason, count in discards["reasons"])))
    if manifest.get("records") is not None:
        yield beam.pvalue.TaggedOutput(RECORDS, tuple(manifest["records"]))
    for item in manifest.get("malformed", []):
        yield beam.pvalue.TaggedOutput(MALFORMED, tuple(item))
    for item in manifest.get("reasoned", []):
        yield beam.pvalue.TaggedOutput(REASONED, tuple(item))
    if manifest.get("image_kinds"):
        yield beam.pvalue.TaggedOutput(IMAGE_KINDS, [tuple(kind) for kind in manifest["image_kinds"]])
    if manifest.get("rows_written"):
        yield beam.pvalue.TaggedOutput(ROWS_WRITTEN, manifest["rows_written"])
    yield from quality_of(config, manifest)


def stats_document(stats: TableStats) -> dict:
    return {"rows": stats.rows, "malformed": stats.malformed, "nullable": sorted(stats.nullable),
            "train_found": stats.train_found, "labels": {c: sorted(v) for c, v in sorted(stats.labels.items())}}


def stats_from(document: dict) -> TableStats:
    return TableStats(rows=document["rows"], malformed=document["malformed"], nullable=set(document["nullable"]),
                      train_found=document["train_found"],
                      labels={c: set(v) for c, v in document["labels"].items()})


def part_stats(config: JobConfig, part: Any, count: Callable[[], TableStats]) -> TableStats:
    """The part's TableStats: committed ones when a resumable job has them, else counted (and committed)."""
    if not config.resumable:
        return count()
    committed = committed_stats(config, part)
    if committed is not None:
        return committed
    path = resume_files.stats_path(config.temp_dir, resume_files.part_key(part))
    return stats_from(resume_files.commit_json(path, stats_document(count())))


def committed_stats(config: JobConfig, part: Any) -> Optional[TableStats]:
    """The part's TableStats a resumable job committed (a run before, an attempt before, or its scan:
    beam_pipelines.steps.read_rows.SourceParts.count_while_scanning), else None."""
    if not config.resumable:
        return None
    document = resume_files.read_json(resume_files.stats_path(config.temp_dir, resume_files.part_key(part)))
    return None if document is None else stats_from(document)
