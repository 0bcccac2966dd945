"""A part's parsed Arrow table kept on local disk from one pass of a job to the next (work once).

An image-free CSV job reads each slice twice: the count pass (split counts, label vocabularies, missing
values) and, once every part is counted, the encode pass. Parsing a 16 MB slice takes ~40 ms of CPU in a
job's worker process; writing its table as an Arrow IPC file takes ~18 ms, and mapping it back ~2 ms.
So a local job's count pass keeps the table of each slice it parsed (`KEEP`), and the encode pass takes
it (`TAKE`: mapped, and its file removed at once) instead of parsing the slice again.

- Bounded: only parts ending within the first KEPT_BYTES of their file are kept (a table is ~1.1 times
  its CSV bytes), so a large file costs at most about a GiB more scratch while it is between passes
  (up to twice that where the count pass's guess of a part, counted while scanning, was wrong at every
  range boundary: the guessed part's table is then never taken, and goes with the work directory);
  parts under KEPT_MIN_BYTES are parsed again (a small parse costs less than a file).
- Never trusted blindly: a table is taken only for the same part (file name from its place in the file)
  and the same columns; anything else (missing, unreadable, other columns) means the part is parsed.
- Retry-safe: a table appears whole, through a temporary name and one rename, so a retried or repeated
  pass never maps half of one; a failed write (a full disk) keeps nothing and fails nothing.
- Scratch: the files live under the job's work directory, removed with it when the job is published.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional, Sequence

import pyarrow as pa

from tfrecorder.format.file_names import temporary_file_name
from tfrecorder.io import storage

KEPT_BYTES = 1 << 30  # parts ending within this many bytes of their file's start are kept
KEPT_MIN_BYTES = 1 << 20  # smaller parts parse faster than a file is made and mapped
KEEP, TAKE = "keep", "take"  # what a pass does with kept tables


@dataclasses.dataclass(frozen=True)
class KeptTables:
    """Kept tables of one job (`directory`: local), for a pass that keeps them (KEEP) or takes them (TAKE)."""

    directory: str
    mode: str

    def path(self, part: Any) -> str:
        """Where `part` (a slice: index, start and end offsets in its file) is kept."""
        return os.path.join(self.directory, f"{part.index:06d}-{part.start}-{part.end}.arrow")

    def take(self, part: Any, columns: Sequence[str]) -> Optional[pa.Table]:
        """The table kept for `part` with exactly `columns` (mapped, not read), its file removed; None when
        this pass keeps tables, or none (usable) is kept."""
        if self.mode != TAKE:
            return None
        import pyarrow.ipc as ipc

        path = self.path(part)
        try:  # the table's buffers hold the mapping (a regular file's only: storage.map_local)
            table = ipc.open_file(pa.py_buffer(storage.map_local(path))).read_all()
        except (OSError, ValueError, pa.ArrowInvalid):  # not kept (or unreadable, or not a file): parsed again
            return None
        finally:
            storage.delete_files([path])
        return table if table.column_names == list(columns) else None

    def keep(self, part: Any, table: pa.Table) -> None:
        """Keep `table` as `part`'s, when this pass keeps tables and the part is within the bounds above."""
        if self.mode != KEEP or part.end > KEPT_BYTES or part.end - part.start < KEPT_MIN_BYTES:
            return
        import pyarrow.ipc as ipc

        path = self.path(part)
        staging = os.path.join(self.directory, temporary_file_name(os.path.basename(path)))
        try:
            os.makedirs(self.directory, exist_ok=True)
            with pa.OSFile(staging, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            os.replace(staging, path)
        except OSError:  # e.g. a full disk: the encode pass parses the part instead
            storage.delete_files([staging])
