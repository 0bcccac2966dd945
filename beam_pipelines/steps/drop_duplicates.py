"""duplicates="drop" (issue 29): every duplicate group's rows but the kept one taken out of their pieces
before shards are planned, and sent to discarded.csv as `duplicate of <kept row>`.

    encoders ─pieces─► key by piece file name ─┐
    find_duplicates ─DROPPED (piece name, [(record, unknown labels, cells, reason)])─┴► CoGroupByKey
        ─► a piece with no dropped record: unchanged; else a new piece of its other records (offsets and
           keys sidecars with it) ─► shard planning, as any piece
        ─► DISCARD (row cells, "duplicate of <row id>") ─► discard_files
        ─► image-free rows: REREAD (part key, [(row number, reason)]) ┐
    source parts ─► key by part key ─────────────────────────────────┴► CoGroupByKey ─► ReadDroppedRows:
           each part holding a dropped row read again, its dropped rows' cells ─► DISCARD

Duplicates are known only once every row is encoded, and their records are in pieces by then; the
dropped rows are joined to their pieces by key inside the pipeline (no list of dropped rows in the
driver or in a side input), and each piece holding one is rewritten without it: shard planning and
assembly never learn that a job dropped anything. Each encoder row carries its place (piece file
name, record number: beam_pipelines.steps.encode_rows) with its digest; a resumable job commits those
places with the part (its quality file), and they name the part's committed pieces, so a resumed job
drops the same records. A rewritten piece has a fresh name per attempt (only the committed attempt's
descriptor is planned; others go with the pieces directory) and a digest made of its source piece's
and the dropped record numbers, so shards come out the same under retries.

Image-free rows (the columnar graph, beam_pipelines.graphs.tabular_graph) carry no cells with their
digests (that would be a second copy of the table travelling to the grouping step): their place names
their source part and row number instead, and the parts holding a dropped row are read once more
(batch by batch, as the encoder read them) to give discarded.csv the row's own cells. Only parts with a
drop are read again; their rows are numbered as the encoder numbered them (Arrow batches only).
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping, Optional

import apache_beam as beam
import numpy as np

import pyarrow as pa

from beam_pipelines.steps.collect_statistics import first_row_number
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.read_rows import read_batches
from beam_pipelines.steps.piece_files import copy_range
from beam_pipelines.steps.shard_planning import Piece
from tfrecorder.format.file_names import piece_file_name
from tfrecorder.format.resume_files import part_key
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig

REREAD = "reread"  # tagged output: (source part key, [(row number, reason)]) of a piece's dropped image-free rows


def piece_name(piece: Piece) -> str:
    """The key a piece is joined by: its file name (fresh per writer attempt, so unique in the job)."""
    return piece.path.rsplit("/", 1)[-1]


def without_records(piece: Piece, dropped: Mapping[int, int], pieces_dir: str) -> Piece:
    """A new piece of `piece`'s records but those in `dropped` (record number → its unknown labels), with
    its offsets sidecar and, when the source piece has one, its keys sidecar. Reads 8 bytes a record of
    the offsets (and 16 of the keys), and copies the kept records' bytes run by run."""
    ends = np.frombuffer(storage.read_bytes(piece.offsets_path), dtype="<u8").astype(np.int64)
    if len(ends) != piece.records:
        raise OSError(f"offsets sidecar of {piece.path} holds {len(ends)} records, not {piece.records}")
    starts = np.concatenate([[0], ends[:-1]])
    keep = np.ones(piece.records, dtype=bool)
    keep[sorted(dropped)] = False
    kept = np.flatnonzero(keep)
    lengths = ends[kept] - starts[kept]
    path = storage.join(pieces_dir, piece_file_name(piece.split))
    runs = np.split(kept, np.flatnonzero(np.diff(kept) != 1) + 1) if len(kept) else []
    with storage.open_read(piece.path) as source, storage.open_write(path) as out:
        for run in runs:
            copy_range(source, out, int(starts[run[0]]), int(ends[run[-1]]))
    size = int(lengths.sum())
    mark = hashlib.blake2b(f"{piece.digest} without {sorted(dropped)}".encode("utf-8"), digest_size=8).hexdigest()
    result = Piece(piece.split, path, len(kept), size, piece.unknown_labels - sum(dropped.values()),
                   f"{mark}-{len(kept)}-{size}", keyed=piece.keyed)
    storage.write_bytes(result.offsets_path, np.cumsum(lengths, dtype=np.int64).astype("<u8").tobytes())
    if piece.keyed:
        keys = np.frombuffer(storage.read_bytes(piece.keys_path), dtype="<u8").reshape(-1, 2)
        storage.write_bytes(result.keys_path, keys[kept].tobytes())
    return result


class DropFromPieces(beam.DoFn):
    """One piece with the rows dropped from it (a CoGroupByKey's {"pieces": [Piece], "dropped": [lists]}):
    the piece itself when none is, else its rewrite; each dropped row on DISCARD (an image-free row's,
    whose cells are in its source part, on REREAD)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def process(self, item: tuple[str, Mapping[str, Iterable[Any]]]):
        name, joined = item
        pieces, lists = list(joined["pieces"]), [found for batch in joined["dropped"] for found in batch]
        if len(pieces) != 1:
            if not lists and not pieces:
                return
            raise RuntimeError(f"duplicates='drop': {len(pieces)} pieces named {name} hold dropped rows")
        piece = pieces[0]
        if not lists:
            yield piece
            return
        dropped: dict[int, tuple] = {}
        for record, unknown, cells, reason, *source in sorted(lists, key=_order):  # a row dropped twice: once
            dropped.setdefault(int(record), (int(unknown), cells, reason, *source))
        yield without_records(piece, {record: found[0] for record, found in dropped.items()}, self.config.pieces_dir)
        reread: dict[str, list] = {}  # image-free rows: their cells are read from their part (one element a part)
        for _record, (_unknown, cells, reason, *source) in sorted(dropped.items()):
            if cells is None:
                reread.setdefault(source[0], []).append((int(source[1]), reason))
                continue
            # a detection image's record holds several source rows: its cells are a tuple of rows
            for row in cells if cells and isinstance(cells[0], tuple) else (cells,):
                yield beam.pvalue.TaggedOutput(DISCARD, (dict(zip(self.config.columns, row)), reason))
        for key in sorted(reread):
            yield beam.pvalue.TaggedOutput(REREAD, (key, reread[key]))


def _order(found: tuple) -> tuple:
    """How a piece's dropped entries sort (a record found by two groups keeps the first): cells may be None."""
    record, unknown, cells, reason, *source = found
    return (record, unknown, () if cells is None else tuple(cells), reason, *source)


def rows_of_part(config: JobConfig, part: Any, wanted: Mapping[int, str]) -> Iterable[tuple[dict, str]]:
    """(values, reason) of the rows `wanted` (row number in the part → reason) of an image-free table's
    part, read batch by batch and numbered as the encoder numbers them (beam_pipelines.steps.encode_columns)."""
    rows = np.array(sorted(wanted), dtype=np.int64)
    offset = first_row_number(part)
    for item in read_batches(config, part):
        if not isinstance(item, pa.RecordBatch):
            continue  # a malformed CSV line, or the part's record count: not numbered
        end = offset + item.num_rows
        chosen = rows[(rows >= offset) & (rows < end)]
        if len(chosen):
            for number, values in zip(chosen.tolist(), item.take(pa.array(chosen - offset)).to_pylist()):
                yield values, wanted[number]
        offset = end
        if offset > rows[-1]:
            return


class ReadDroppedRows(beam.DoFn):
    """One source part with the dropped rows in it (a CoGroupByKey's {"parts": [part], "rows": [[(row,
    reason)], ...]}: a list per piece holding some): those rows' cells, read from the part, as discards."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def process(self, item: tuple[str, Mapping[str, Iterable[Any]]]):
        key, joined = item
        wanted = dict(sorted(row for rows in joined["rows"] for row in rows))  # a row reported twice: once
        if not wanted:
            return
        parts = list(joined["parts"])
        if len(parts) != 1:
            raise RuntimeError(f"duplicates='drop': {len(parts)} source parts have the key {key}")
        found = list(rows_of_part(self.config, parts[0], wanted))
        if len(found) != len(wanted):
            raise RuntimeError(f"duplicates='drop': {len(wanted) - len(found)} dropped rows are not in their part "
                               "any more (did the source change during the job?)")
        yield from found


def drop_duplicates(config: JobConfig, pieces: beam.PCollection, dropped: beam.PCollection,
                    parts: Optional[beam.PCollection] = None) -> tuple[beam.PCollection, beam.PCollection]:
    """(`pieces` without the dropped rows, the dropped rows as (row, reason) discards). An image-free
    table's graph passes its source `parts`: its dropped rows' cells are read back from them."""
    keyed = pieces | "KeyPieces" >> beam.Map(lambda piece: (piece_name(piece), piece))
    kept = (
        {"pieces": keyed, "dropped": dropped}
        | "JoinDropped" >> beam.CoGroupByKey()
        | "DropFromPieces" >> beam.ParDo(DropFromPieces(config)).with_outputs(DISCARD, REREAD, main="pieces")
    )
    if parts is None:
        return kept.pieces, kept[DISCARD]
    reread = (
        {"parts": parts | "KeyParts" >> beam.Map(lambda part: (part_key(part), part)), "rows": kept[REREAD]}
        | "JoinDroppedRows" >> beam.CoGroupByKey()
        | "ReadDroppedRows" >> beam.ParDo(ReadDroppedRows(config))
    )
    return kept.pieces, (kept[DISCARD], reread) | "AllDroppedRows" >> beam.Flatten()
