"""discarded.csv in bounded memory: part files written per bundle, merged by an external sort at the end.

Each bundle that discards rows streams them into its own part file (a fresh random name per attempt)
and emits a small DiscardPart descriptor with its reason counts; only descriptors of committed bundles
reach the merge, so rows of a failed or replayed attempt are never counted twice (their orphan part
files are removed with the job's temporary directory). The merge sorts the rows (reason, then row) in
runs of bounded size on the worker's local disk and streams the merged result into discarded.csv, so
neither step holds more than one run of rows in memory, however many rows are discarded.
"""
from __future__ import annotations

import collections
import csv
import dataclasses
import heapq
import io
import json
import os
import tempfile
import uuid
from typing import Any, Iterable, Iterator, Mapping, Sequence

import apache_beam as beam

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.bundle_outputs import in_global_window
from tfrecorder.format import file_names
from tfrecorder.format.file_names import discard_part_name
from tfrecorder.io import storage
from tfrecorder.format.metadata_file import reason_category
from tfrecorder.format.framing import read_records, write_record

RUN_BYTES = 8 * 1024 * 1024  # rows sorted in memory at a time (as JSON text; Python objects take ~4× more)
MERGE_FAN_IN = 64  # runs merged at once (open files)

Entry = list  # [reason, str(row), [cell, ...]]: sorts by reason, then row


@dataclasses.dataclass(frozen=True)
class DiscardPart:
    """One bundle attempt's part file of discarded rows, with its row count per reason category."""

    path: str
    rows: int
    reasons: tuple[tuple[str, int], ...]


def cell(value: Any) -> str:
    """A table value as discarded.csv shows it (missing → empty)."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


DISCARD = "discard"  # the tagged output every step sends its discarded (row, reason) pairs to


class DiscardPartWriter:
    """Streams (row, reason) pairs into a new part file; `close()` returns its DiscardPart."""

    def __init__(self, directory: str, columns: Sequence[str]) -> None:
        self.path = storage.join(directory, discard_part_name())
        self._columns = columns
        self._stream = storage.open_write(self.path)
        self._reasons: collections.Counter = collections.Counter()

    def write(self, row: Mapping[str, Any], reason: str) -> None:
        entry = [reason, str(row), [cell(row.get(c)) for c in self._columns]]
        write_record(self._stream, json.dumps(entry).encode("utf-8"))
        self._reasons[reason_category(reason)] += 1

    def close(self) -> DiscardPart:
        self._stream.close()
        return DiscardPart(self.path, sum(self._reasons.values()), tuple(sorted(self._reasons.items())))


def reason_counts(parts: Iterable[DiscardPart]) -> dict[str, int]:
    """Discarded rows per reason category over all parts (exact: each committed part counted once)."""
    counts: collections.Counter = collections.Counter()
    for part in parts:
        counts.update(dict(part.reasons))
    return dict(counts)


def _entries(path: str) -> Iterator[Entry]:
    with storage.open_read(path) as stream:
        for data in read_records(stream):
            yield json.loads(data)


def _write_run(entries: Iterable[Entry], directory: str) -> str:
    path = os.path.join(directory, f"{uuid.uuid4().hex}.run")
    with open(path, "wb") as stream:
        for entry in entries:
            write_record(stream, json.dumps(entry).encode("utf-8"))
    return path


def _merged(paths: list[str]) -> Iterator[Entry]:
    streams = [open(path, "rb") for path in paths]
    try:
        yield from heapq.merge(*((json.loads(d) for d in read_records(s, check_crc=False)) for s in streams))
    finally:
        for stream in streams:
            stream.close()


def _sorted_runs(parts: Iterable[DiscardPart], scratch: str, run_bytes: int) -> list[str]:
    runs: list[str] = []
    buffer: list[Entry] = []
    size = 0
    for part in parts:
        for entry in _entries(part.path):
            buffer.append(entry)
            size += sum(len(c) for c in entry[2]) + len(entry[0]) + len(entry[1])
            if size >= run_bytes:
                runs.append(_write_run(sorted(buffer), scratch))
                buffer, size = [], 0
    if buffer or not runs:
        runs.append(_write_run(sorted(buffer), scratch))
    return runs


def write_discard_file(parts: Iterable[DiscardPart], columns: Sequence[str], destination: str,
                       run_bytes: int = RUN_BYTES, fan_in: int = MERGE_FAN_IN) -> None:
    """Write every row of `parts` into the CSV `destination` (columns + reason), sorted by reason then row.

    Memory holds one run of `run_bytes`; scratch runs live in a local temporary directory. Rewriting
    the destination from the same parts gives the same bytes, so a retried merge is harmless.
    """
    with tempfile.TemporaryDirectory(prefix="tfrecorder-discards-") as scratch:
        runs = _sorted_runs(parts, scratch, run_bytes)
        while len(runs) > fan_in:
            runs = [_write_run(_merged(runs[i:i + fan_in]), scratch) for i in range(0, len(runs), fan_in)]
        with storage.open_write(destination) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
            writer = csv.writer(text)
            writer.writerow([*columns, "reason"])
            for reason, _row, cells in _merged(runs):
                writer.writerow([*cells, reason])
            text.flush()
            text.detach()


class WriteDiscardParts(beam.DoFn):
    """Stream the discarded rows a bundle finds into one part file; emits its DiscardPart at the end."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def start_bundle(self) -> None:
        self.writer = None

    def process(self, discard: tuple[dict, str]):
        if self.writer is None:
            self.writer = DiscardPartWriter(self.config.discards_dir, self.config.columns)
        self.writer.write(*discard)
        return ()

    def finish_bundle(self):
        if self.writer is not None:
            yield in_global_window(self.writer.close())
            self.writer = None


def write_discards(parts: list[DiscardPart], config: JobConfig) -> dict[str, int]:
    """Write discarded.csv (original columns + reason) from the committed parts; returns counts per reason."""
    write_discard_file(parts, config.columns, storage.join(config.temp_dir, file_names.DISCARD_FILE))
    return reason_counts(parts)
