"""A source part as the unit of committed work (issue 27: resumable conversion).

A resumable job's step that reads and encodes a whole part (tabular_graph's EncodePart, image_graph's
EncodeImageParts) closes the part's pieces and its discard part file, then commits the part's manifest
(`_parts/<part key>.json`, tfrecorder.format.resume_files): created exclusively, so the first committed
attempt wins. Every attempt then emits what the manifest holds — the part's pieces, its discard part,
the CSV record count and malformed lines — whether it did the work or found it done: a replayed
bundle and a resumed job emit exactly what the first attempt committed, and the part is neither read
nor encoded again. The part's whole-table facts (TableStats) are committed the same way by the
count step (`_parts/<part key>.stats.json`).

Pieces depend only on their part (closed at the part's end, or at each batch of a fixed number of the
part's rows), never on bundling, so a resumed job's shards are the uninterrupted job's.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional

import apache_beam as beam

from beam_pipelines.steps.discard_files import DiscardPart
from beam_pipelines.steps.read_rows import MALFORMED, RECORDS, REASONED
from beam_pipelines.steps.shard_planning import Piece
from tfrecorder.format import resume_files
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


def commit(config: JobConfig, part: Any, rows: int, pieces: Iterable[Piece], discards: Optional[DiscardPart],
           records: Optional[tuple] = None, malformed: Iterable[tuple] = (), reasoned: Iterable[tuple] = (),
           image_kinds: Iterable[tuple] = (), rows_written: Optional[int] = None) -> dict:
    """Commit the part's closed work; returns the manifest that won (this one, or an earlier attempt's).
    `rows_written`: detection jobs, the part's rows inside written Examples."""
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
    }
    return resume_files.commit_json(resume_files.manifest_path(config.temp_dir, resume_files.part_key(part)),
                                    manifest)


def pieces_of(config: JobConfig, manifest: dict) -> list[Piece]:
    return [Piece(p["split"], _absolute(config, p["file"]), p["records"], p["bytes"], p["unknown_labels"], p["digest"],
                  keyed=bool(p.get("keyed"))) for p in manifest["pieces"]]


def emit(config: JobConfig, manifest: dict) -> Iterator[Any]:
    """What the part's step outputs, from its manifest: pieces (main output), then its DiscardPart,
    RECORDS, MALFORMED, REASONED and IMAGE_KINDS tagged outputs."""
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
    path = resume_files.stats_path(config.temp_dir, resume_files.part_key(part))
    document = resume_files.read_json(path)
    if document is None:
        document = resume_files.commit_json(path, stats_document(count()))
    return stats_from(document)
