"""Turn pipeline failures into errors a user can act on.

Beam re-raises a worker's exception carrying the original text, the names of the steps it ran in
and a long traceback. A whole-table problem the pipeline found (TableError, a ValueError) is raised
again with exactly the text the driver would have used; out-of-space conditions deserve one clear
sentence: what failed, where, and that nothing was published.
"""
from __future__ import annotations

import errno
import re
from typing import Iterator, Optional

_SPACE_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EFBIG: "file size limit exceeded",
                 errno.EDQUOT: "disk quota exceeded"}


class TableError(ValueError):
    """A table-level problem the pipeline found in the whole table (no rows, none assigned to TRAIN)."""


_BEAM_STEP = re.compile(r"( \[while running '[^']*'\])+$")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and its causes/contexts, each once."""
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _table_error(exc: BaseException) -> Optional[TableError]:
    """The TableError in the exception's chain, with the text the check raised (Beam appends step names)."""
    for current in _chain(exc):
        if isinstance(current, TableError):
            return TableError(_BEAM_STEP.sub("", str(current)))
    return None


class OutputWriteError(OSError):
    """The conversion could not write its output (disk full, quota, file size limit)."""


class StorageReadError(OSError):
    """Storage failed while reading a row's file (still failing after retries: an outage, not bad data).

    Raised inside the pipeline to fail the bundle (Dataflow retries it); a local run stops with it.
    """


_STORAGE_READ = re.compile(r"StorageReadError: \[Errno (\d+)\] (could not read .*?)(?: \[while running '[^']*'\])*$",
                           re.MULTILINE)


def _storage_read_error(exc: BaseException) -> Optional[StorageReadError]:
    """The StorageReadError behind a pipeline failure: in the exception chain, or in Beam's re-raised text."""
    for current in _chain(exc):
        if isinstance(current, StorageReadError):
            return current
        match = _STORAGE_READ.search(str(current))
        if match:
            return StorageReadError(int(match.group(1)), match.group(2))
    return None


def _space_errno(exc: BaseException) -> Optional[int]:
    for current in _chain(exc):
        if isinstance(current, OSError) and current.errno in _SPACE_ERRNOS:
            return current.errno
        match = re.search(r"\[Errno (\d+)\]", str(current))
        if match and int(match.group(1)) in _SPACE_ERRNOS:
            return int(match.group(1))
    return None


def translate_pipeline_error(exc: BaseException, output_dir: str) -> BaseException:
    """A TableError with its own message for whole-table problems, one StorageReadError for a storage
    outage while reading rows' files, an OutputWriteError for out-of-space failures; any other
    exception is returned unchanged."""
    found = _table_error(exc)
    if found is not None:
        return found
    outage = _storage_read_error(exc)
    if outage is not None:
        return StorageReadError(outage.errno, f"{outage.strerror}; the conversion stopped and nothing was published")
    code = _space_errno(exc)
    if code is None:
        return exc
    return OutputWriteError(
        code, f"could not write the output under {output_dir}: {_SPACE_ERRNOS[code]}; "
        "the conversion stopped and nothing was published"
    )
