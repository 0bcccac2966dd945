"""The encode stage of image rows: each batch's images read (and decoded), rows encoded into Examples and appended to piece files."""
from __future__ import annotations

import errno
import functools
import hashlib
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Union

import apache_beam as beam

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.launches.runners import usable_cores
from beam_pipelines.steps.bundle_outputs import in_global_window
from beam_pipelines.steps import part_commits
from beam_pipelines.steps.discard_files import DISCARD, cell
from beam_pipelines.steps.part_commits import IMAGE_KINDS
from beam_pipelines.steps.read_rows import read_part
from beam_pipelines.steps.collect_statistics import WrittenRows
from beam_pipelines.steps.fetch_images import Fetched, Fetcher, reader_for
from beam_pipelines.steps.piece_files import PieceWriter
from beam_pipelines.steps.progress_counters import RowsCounted, RowsDone
from beam_pipelines.workers.decode_pool import DecodePool, Pending
from beam_pipelines.workers.fork_pool import ForkPool
from tfrecorder.errors import RowError, StorageReadError
from tfrecorder.format.feature_spec import image_feature_prefix
from tfrecorder.format.image_keys import image_key_slots, key_hash, sha256_key, uri_key
from tfrecorder.format.lineage import DUPLICATE_REASON
from tfrecorder.io import storage
from tfrecorder.io.image_probe import DEFAULT_MAX_IMAGE_BYTES
from tfrecorder.core.splits import split_of_digest
from tfrecorder.rows.duplicate_groups import content_digest_of_first
from tfrecorder.rows.row_encoding import RowEncoder, prepare_row, resolve_uri, unassigned
from tfrecorder.rows.value_coercion import is_missing
from tfrecorder.sources.source_protocol import REASONED, RECORDS



def read_image(uri: str, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> bytes:
    """Read an image file's bytes. Problems of the row's value or of its own file become RowError (a
    discard reason): a missing file, a directory, a FIFO or device, a file over `max_bytes`, a local read
    error (EIO of a bad sector), a URL of no storage tfrecorder reads. Storage failures (a 503 or a timeout
    still failing after retries, a process out of file descriptors) raise StorageReadError, which fails
    the bundle so that the runner retries it and, if it keeps failing, the job stops with nothing
    published: an outage must never turn good rows into discards.

    tfrecorder.io.storage raises gs:// failures as OS errors (404 → FileNotFoundError, 403 →
    PermissionError, 400 → EINVAL, anything still failing after retries → OSError EIO).
    """
    try:
        return storage.read_bytes(uri, max_bytes)
    except storage.UnsupportedLocation as exc:
        raise RowError(f"unsupported image location: {exc}") from None
    except storage.NotRegularFile as exc:
        raise RowError(f"not a regular file: {uri} is {exc.strerror}") from None
    except storage.FileTooLarge as exc:
        raise RowError(f"file too large: {uri} holds {exc.strerror} (max_image_bytes)") from None
    except (FileNotFoundError, NotADirectoryError):
        raise RowError(f"missing file: {uri}") from None
    except IsADirectoryError:
        raise RowError(f"not a file: {uri} is a directory") from None
    except PermissionError:
        raise RowError(f"permission denied: {uri}") from None
    except ValueError as exc:  # e.g. an embedded NUL byte
        raise RowError(f"invalid path: {uri!r}: {exc}") from None
    except OSError as exc:
        if exc.errno in _PATH_ERRNOS:
            raise RowError(f"invalid path: {uri}: {exc.strerror or exc}") from None
        if exc.errno in _LOCAL_FILE_ERRNOS and not storage.is_remote(uri):
            raise RowError(f"unreadable file: {uri}: {exc.strerror or exc}") from None
        raise StorageReadError(exc.errno or errno.EIO, f"could not read {uri}: {exc.strerror or exc}") from None


_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL}  # the value names no readable file
# A local file's own failures (a bad sector, a device gone, an offset the file system cannot give): that
# row's problem. Gave-up retries of gs:// are EIO too, and a remote read's EIO is an outage.
_LOCAL_FILE_ERRNOS = {errno.EIO, errno.ENXIO, errno.ENODEV, errno.EOVERFLOW}


class EncodeAndWritePieces(beam.DoFn):
    """Encode batches of rows into Examples and append them to piece files; emits one Piece per file.

    A batch's images are fetched together (concurrently when `fetch_concurrency` > 1) and, with
    validate="decode", decoded by TensorFlow on a thread per core while this thread encodes. Each bundle
    keeps at most one open piece per split and rolls over at max_shard_bytes, so open files and memory
    do not grow with the dataset or with num_shards (shards are cut from the pieces afterwards).

    With `config.encode_processes` > 1 (large local jobs, see beam_pipelines.launches.runners.encode_processes) the
    batches are encoded and written by that many forked copies of this DoFn (beam_pipelines.workers.fork_pool):
    each child keeps its own open pieces for the bundle, and sends back only what the DoFn would emit
    (pieces, discarded rows), never image bytes. Pieces still belong to one bundle attempt: the children
    close them when the bundle finishes and drop them (orphans, removed with the pieces directory) when
    a new bundle starts after a failed one.
    """

    _pool: Optional[ForkPool] = None  # also for subclasses with their own setup (upgrade, detection)
    pieces_per_batch = False  # EncodeImageParts: pieces closed with each unit of a part's batches (boundaries fixed by the part)
    _written: Optional[WrittenRows] = None  # statistics and digests of written rows (issue 29; this class only)
    image_keys = True  # pieces get keys sidecars (issue 28); subclasses writing other records say False
    base_keys: Mapping[int, str] = {}  # an append's: base key hashes the new rows meet → base job (EncodeImageParts)
    _hashed: Optional[tuple[bytes, bytes]] = None  # _base_duplicate's last image bytes and their SHA-256

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.schema = self.config.schema
        self._encoder = None
        self._fetcher = Fetcher(functools.partial(read_image, max_bytes=self.config.max_image_bytes),
                                self.config.fetch_concurrency)
        self._decoder = None
        if self.config.validate == "decode":
            self._decoder = DecodePool(usable_cores(), self.config.max_image_pixels, hashes=self._hashes_images())
        self._rows_done = RowsDone(self.config)
        self.writers: dict[str, PieceWriter] = {}
        self._drops = self.config.statistics and self.config.duplicates == "drop"  # rows carry their place

    def _hashes_images(self) -> bool:
        """Whether written rows get a perceptual hash (near-duplicate search, issue 29)."""
        return self.config.statistics and self.config.near_duplicate_distance > 0

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._fetcher.close()
        if self._decoder is not None:
            self._decoder.close()

    def start_bundle(self) -> None:
        self.writers = {}
        self._written = None  # a failed bundle attempt's statistics are dropped with its pieces
        if self._pool is not None and self._pool.closed:  # a failed bundle closed it: fork afresh
            self._pool = None
        if self._pool is not None:
            self._pool.broadcast(("abandon", None))  # pieces a failed bundle left open are orphans

    def _encoder_for(self, vocabularies: Mapping[str, list[str]]) -> RowEncoder:
        if self._encoder is None:
            self._encoder = RowEncoder(
                self.schema,
                vocabularies,
                base_dir=self.config.base_dir,
                image_size=self.config.image_size,
                validate=self.config.validate,
                max_image_pixels=self.config.max_image_pixels,
            )
        return self._encoder

    def process(self, batch: list[tuple[str, dict[str, Any]]], vocabularies: Mapping[str, list[str]]):
        if self.config.encode_processes > 1:
            pool = self._pool_for(vocabularies)
            for outputs, rows in pool.submit(("batch", batch)):
                self._rows_done.add(rows)
                yield from outputs
            return
        yield from self.encode_batch(batch, vocabularies)

    def start_batch(self, batch: list[tuple[str, dict[str, Any]]],
                    vocabularies: Mapping[str, list[str]]) -> tuple[Fetched, Optional[Pending]]:
        """Read a batch's images and, with validate="decode", start decoding them on every core: what
        `encode_batch` then encodes. A caller may start the next batch before encoding this one, so that
        the decoding threads never wait for this thread's work between batches (EncodeImageParts)."""
        encoder = self._encoder_for(vocabularies)
        fetched = self._fetcher.fetch([uri for _split, row in batch for uri in encoder.image_uris(row)])
        return fetched, self._decoder.submit(fetched) if self._decoder else None

    def encode_batch(self, batch: list[tuple[str, dict[str, Any]]], vocabularies: Mapping[str, list[str]],
                     started: Optional[tuple[Fetched, Optional[Pending]]] = None):
        """Encode and write one batch (`started`: its `start_batch`, when the caller started it already):
        yields rolled-over pieces and (DISCARD) discarded rows."""
        encoder = self._encoder_for(vocabularies)
        if self._written is None and self.config.statistics:
            self._written = WrittenRows(self.schema, near_duplicates=self._hashes_images(),
                                        near_by_part=self.pieces_per_batch,  # a part's batches: banded at commit
                                        near_shift=self.config.near_bucket_shift)
        written = self._written
        fetched, pending = started or self.start_batch(batch, vocabularies)  # decoded on every core meanwhile
        read = reader_for(fetched)
        keyed = self._keys_prefix() is not None
        first_column = self.schema.image_columns[0] if self.schema.image_columns else None
        for split, row in batch:
            duplicate = self._base_duplicate(row, fetched) if self.base_keys else None
            if duplicate is not None:  # issue 28: decided here, with the bytes in hand, inside the committed part
                yield beam.pvalue.TaggedOutput(DISCARD, (row, duplicate))
                continue
            try:
                data, unknown = encoder.encode_pieces(row, read, pending.verdict if pending else None)
            except RowError as exc:
                yield beam.pvalue.TaggedOutput(DISCARD, (row, str(exc)))
                continue
            images = encoder.row_images
            contents = [image[3] for image in images]
            splits_by_content = self.config.content_splits and images and unassigned(row, self.schema)
            # The first image's SHA-256, once: its keys sidecar entry and the row's content digest share it
            sha = self._sha256(contents[0]) if images and (keyed or written is not None or splits_by_content) else None
            digest = (content_digest_of_first(sha, contents)  # issue 29: byte-identical images, one digest
                      if images and (splits_by_content or written is not None) else None)
            if splits_by_content:
                split = split_of_digest(digest, self.config.split_ratios)  # images land in one split
            if written is not None:
                hashed = pending.perceptual_hash(images[0][1]) if pending and images else None
                written.add_row(split, row, images, data, hashed, digest=digest,
                                place=self._place(split, row, unknown) if self._drops else None)
            keys = (image_key_slots(str(row.get(first_column)), sha)
                    if keyed and images and images[0][0] == first_column else None)
            yield from self._write(split, data, unknown, keys)
        if pending:
            pending.wait()
        if written is not None:
            yield from written.end_batch()
        self._rows_done.add(len(batch))

    def encode_unit(self, rows: list[tuple[str, dict[str, Any]]], vocabularies: Mapping[str, list[str]]):
        """A part's unit of pieces (EncodeImageParts): `encode_batch` of each `config.batch_size` rows in
        turn (images read a batch at a time, pieces left open for the next batch), then its pieces closed."""
        size = self.config.batch_size
        for start in range(0, len(rows), size):
            yield from self.encode_batch(rows[start:start + size], vocabularies)
        yield from self.close_pieces()

    def _base_duplicate(self, row: Mapping[str, Any], fetched: Mapping[str, Any]) -> Optional[str]:
        """The discard reason of a row whose first image (its URI as the table names it, or the SHA-256 of
        its bytes) is a key of the base in `base_keys` (an append, issue 28), else None."""
        value = row.get(self.schema.image_columns[0])
        if is_missing(value) or not str(value).strip():
            return None
        keys = [key_hash(uri_key(str(value)))]
        data = fetched.get(resolve_uri(str(value), self.config.base_dir))
        if isinstance(data, bytes):
            self._hashed = (data, hashlib.sha256(data).digest())
            keys.append(key_hash(sha256_key(self._hashed[1])))
        job = next((self.base_keys[key] for key in keys if key in self.base_keys), None)
        return None if job is None else f"{DUPLICATE_REASON}: {job}"

    def _sha256(self, data: bytes) -> bytes:
        """The SHA-256 of an image's bytes: the one `_base_duplicate` took of this very bytes object (the
        row's first image, not resized), else computed here, so an append does not hash an image twice."""
        if self._hashed is not None and self._hashed[0] is data:
            return self._hashed[1]
        return hashlib.sha256(data).digest()

    def _writer(self, split: str) -> PieceWriter:
        writer = self.writers.get(split)
        if writer is None:
            writer = self.writers[split] = PieceWriter(self.config.pieces_dir, split, self._keys_prefix())
        return writer

    def _place(self, split: str, row: Mapping[str, Any], unknown: int) -> tuple:
        """Where the row's record is about to be written (duplicates="drop", issue 29): its piece's file
        name and record number, its unknown labels and its cells for discarded.csv."""
        writer = self._writer(split)
        return (writer.path.rsplit("/", 1)[-1], writer.records, unknown,
                tuple(cell(row.get(column)) for column in self.config.columns))

    def _write(self, split: str, data: Union[bytes, list], unknown: int, keys: Optional[tuple[int, int]] = None):
        writer = self._writer(split)
        writer.write(data, unknown, keys)
        if writer.bytes >= self.config.max_shard_bytes:
            yield self.writers.pop(split).close()

    def _keys_prefix(self) -> Optional[str]:
        """The feature prefix of the image whose keys the pieces record: the first image column's, for a
        job of image rows (an append to it later finds duplicates without reading its records)."""
        if not self.image_keys or not self.schema.image_columns:
            return None
        return image_feature_prefix(self.schema.image_columns[0])

    def close_pieces(self):
        """The bundle's open pieces, closed, and the image kinds (IMAGE_KINDS) it wrote."""
        for writer in self.writers.values():
            yield writer.close()
        self.writers = {}
        if self._encoder is not None and self._encoder.image_kinds:  # a few tuples per bundle
            yield beam.pvalue.TaggedOutput(IMAGE_KINDS, sorted(self._encoder.image_kinds))
            self._encoder.image_kinds.clear()
        if self._written is not None:  # digests still held, and the bundle's sketches (bounded)
            yield from self._written.finish()

    def finish_bundle(self):
        if self._pool is None:
            outputs = list(self.close_pieces())
        else:
            batches, closed = self._pool.broadcast(("finish", None))
            self._rows_done.add(sum(rows for _outputs, rows in batches))
            outputs = [output for found, _rows in batches + closed for output in found]
        for output in outputs:  # finish_bundle's outputs carry their window
            yield in_global_window(output)

    def _pool_for(self, vocabularies: Mapping[str, list[str]]) -> ForkPool:
        if self._pool is None:
            self._vocabularies = vocabularies  # the children inherit it and the encoder
            self._encoder_for(vocabularies)
            self._pool = ForkPool(self.config.encode_processes, self._serve_in_child)
        return self._pool

    def _serve_in_child(self, task: tuple[str, Any]) -> tuple[list, int]:
        """A forked child's handler: ("batch", rows) → (outputs, rows done); ("finish", _) → the closed
        pieces; ("abandon", _) → forget the open pieces of a failed bundle."""
        if not isinstance(self._rows_done, RowsCounted):
            self._rows_done = RowsCounted()  # Beam's counters live in the parent
        operation, batch = task
        if operation == "batch":
            outputs = list(self.encode_unit(batch, self._vocabularies) if self.pieces_per_batch
                           else self.encode_batch(batch, self._vocabularies))
            return outputs, self._rows_done.take()
        if operation == "finish":
            return list(self.close_pieces()), 0
        for writer in self.writers.values():
            writer.abandon()
        self.writers = {}
        self._written = None
        return [], 0


class EncodeImageParts(EncodeAndWritePieces):
    """A resumable job's encode stage: one whole source part per element — read, prepared (split, label
    checks), encoded and written — then committed with its discards (beam_pipelines.steps.part_commits),
    or emitted from the manifest an earlier attempt or run committed, without reading it.

    Rows are taken in units of `config.unit_batches` batches of `config.batch_size` rows of the part,
    each unit of one split (SplitUnits; images are still read a batch at a time), and each unit's pieces
    are closed with it (also in the forked encoding processes, which get a unit per task), so piece
    boundaries, hence shards, depend only on the part and the job's unit size
    (tfrecorder.options.piece_units: from the job's size, 256 to 1,600 rows), never on which bundle,
    process or run encoded it. Large units of one split make pieces a shard can be on its own (linked,
    not copied at the end) and fewer piece files, sidecars, statistics flushes and answers to the parent.
    """

    pieces_per_batch = True

    def process(self, part, vocabularies: Mapping[str, list[str]], base_keys: Optional[Mapping[int, str]] = None):
        """`base_keys`: an append's base keys met by the new rows (beam_pipelines.steps.base_duplicates):
        rows holding one are discarded as the encoder reads them, so a committed part holds its decisions."""
        if base_keys and not self.base_keys:
            self.base_keys = dict(base_keys)  # before the encoding processes fork: they inherit it
        manifest = part_commits.committed(self.config, part)
        if manifest is None:
            manifest = self._encode_part(part, vocabularies)
        yield from part_commits.emit(self.config, manifest)

    def _encode_part(self, part, vocabularies: Mapping[str, list[str]]) -> dict:
        found = part_commits.PartWork(self.config)
        rows = 0
        units = SplitUnits(self.config.batch_size * self.config.unit_batches)
        ahead: Optional[_Started] = None  # a batch whose images are decoding, encoded once the next one starts
        for item in read_part(self.config, part):
            if isinstance(item, dict):
                rows += 1
                unit = self._prepared_into(item, units, found)
                if unit:
                    ahead = self._encode_unit(unit, vocabularies, found, ahead)
            elif item[0] == RECORDS:
                found.records = item[1]
            elif item[0] == REASONED:
                found.reasoned.append(item[1])
            else:
                found.malformed.append(item)
        for unit in units.rest(merged=self.config.encode_processes == 1):
            ahead = self._encode_unit(unit, vocabularies, found, ahead)
        self._encode_started(ahead, vocabularies, found)
        if self._pool is not None:
            for outputs, rows in self._pool.drain():
                self._rows_done.add(rows)
                found.add(outputs)
        return found.commit(part, rows)

    def _prepared_into(self, row: dict[str, Any], units: SplitUnits,
                       found: part_commits.PartWork) -> Optional[list]:
        """Prepare a row of the part (its split, label checks) and add it to the unit of its split: that
        unit once full, else None. A row prepare_row refuses is written to the part's discards at once.
        Rows whose split comes from their image bytes (content_splits) share a unit of their own."""
        try:
            split = prepare_row(row, self.schema, self.config.split_ratios)
        except RowError as exc:
            found.discards.write(row, str(exc))
            self._rows_done.add(1)  # discarded rows are done
            return None
        by_content = self.config.content_splits and unassigned(row, self.schema)
        return units.add(None if by_content else split, (split, row))

    def _encode_unit(self, unit: list[tuple[str, dict[str, Any]]], vocabularies: Mapping[str, list[str]],
                     found: part_commits.PartWork, ahead: Optional[_Started] = None) -> Optional[_Started]:
        """Encode a unit of the part's prepared rows and close the unit's pieces. With validate="decode"
        in this process each batch of the unit is started (images read, decoding on every core) before
        the batch started before it, `ahead` (across units too), is encoded: returned is the unit's last
        batch, still to encode (`_encode_started`). Written rows and piece boundaries are the same either way."""
        if self.config.encode_processes > 1 or self._decoder is None:
            self._encode_started(ahead, vocabularies, found)
            if self.config.encode_processes > 1:
                for outputs, rows in self._pool_for(vocabularies).submit(("batch", unit)):
                    self._rows_done.add(rows)
                    found.add(outputs)
            else:
                found.add(self.encode_unit(unit, vocabularies))
            return None
        size = self.config.batch_size
        for start in range(0, len(unit), size):
            batch = unit[start:start + size]
            started = _Started(batch, self.start_batch(batch, vocabularies), start + size >= len(unit))
            self._encode_started(ahead, vocabularies, found)
            ahead = started
        return ahead

    def _encode_started(self, started: Optional[_Started], vocabularies: Mapping[str, list[str]],
                        found: part_commits.PartWork) -> None:
        """Encode and write a started batch, then close its unit's pieces if it is the unit's last."""
        if started is None:
            return
        found.add(self.encode_batch(started.prepared, vocabularies, started.images))
        if started.ends_unit:
            found.add(self.close_pieces())


class SplitUnits:
    """A part's prepared rows gathered into units of `size` rows of one split each (key: the split, or
    None for rows whose split their image bytes decide): every piece of a unit then holds one split, so
    a validation or test piece is as large as a training piece and becomes a shard on its own, by a
    hard link, instead of being copied together with others at the end (a second write of a fifth of
    the image bytes under the default split). Which rows form a unit depends only on the part's rows
    in order, never on the process or run that encodes it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._open: dict[Optional[str], list] = {}

    def add(self, key: Optional[str], prepared: tuple[str, dict[str, Any]]) -> Optional[list]:
        """Add a prepared row to its key's unit; returns that unit once it holds `size` rows."""
        unit = self._open.setdefault(key, [])
        unit.append(prepared)
        if len(unit) < self.size:
            return None
        del self._open[key]
        return unit

    def rest(self, merged: bool = True) -> list[list]:
        """The units not yet full, once the part is read, in the order their keys first came. `merged`:
        as one unit when they fit in one (a unit's pieces are one per split, so the pieces are the same
        either way): a small part encoded in this process takes as few batches as before. Units dealt to
        forked processes stay apart, so that a part's last units are encoded side by side (a job's last
        part's rest, its validation and test rows, would otherwise run on one core while the others idle)."""
        rest, self._open = list(self._open.values()), {}
        if merged and len(rest) > 1 and sum(map(len, rest)) <= self.size:
            return [[prepared for unit in rest for prepared in unit]]
        return rest


class _Started(NamedTuple):
    """A batch of a unit's prepared rows, its images read and decoding (`images`: start_batch's);
    `ends_unit`: the unit's pieces close once it is encoded."""

    prepared: list
    images: tuple[Fetched, Optional[Pending]]
    ends_unit: bool


class ImageKindsFn(beam.CombineFn):
    """Lists of (feature prefix, format, channels) → {prefix: {"channels": [...], "formats": [...]}}.

    The accumulator holds the distinct kinds only (a handful), so memory does not grow with rows.
    """

    def create_accumulator(self) -> set:
        return set()

    def add_input(self, accumulator: set, kinds: Iterable[tuple[str, str, int]]) -> set:
        accumulator.update(tuple(kind) for kind in kinds)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[set]) -> set:
        return set().union(*accumulators)

    def extract_output(self, accumulator: set) -> dict[str, dict[str, list]]:
        out: dict[str, dict[str, list]] = {}
        for prefix, image_format, channels in sorted(accumulator):
            entry = out.setdefault(prefix, {"channels": [], "formats": []})
            entry["channels"] = sorted({*entry["channels"], channels})
            entry["formats"] = sorted({*entry["formats"], image_format})
        return out


