"""Every exception tfrecorder raises on purpose, in one hierarchy, and the translation of pipeline failures.

The hierarchy says whose problem a failure is; the CLI's exit codes follow it (tfrecorder/cli.py):

    TFRecorderError                     base class of all of them
    ├── BadInputError (ValueError)      the caller's input cannot be used: fix the input and rerun (exit 2)
    │   ├── TableError                  a whole-table problem the pipeline found (no rows, none in TRAIN)
    │   ├── RowError                    one row cannot be converted: its message is the discard reason
    │   └── InvalidImage                an image's bytes are unusable: its message is the discard reason
    ├── InfrastructureError (OSError)   storage or the output failed, not the data: retry or fix the machine
    │   ├── OutputWriteError            the output could not be written: disk full, quota, size limit (exit 4)
    │   ├── StorageReadError            storage still failing after retries while reading a row's file (exit 1)
    │   └── TensorFlowUnavailable       validate="decode" but TensorFlow does not load on this machine (exit 1)
    ├── CorruptDataError                bytes already written are damaged (exit 3, like `verify` finding it)
    │   └── CorruptRecordError          a TFRecord's framing or checksum is wrong
    └── DataflowJobError (RuntimeError) a Dataflow job ended FAILED or CANCELLED (exit 1)

Bad input is also every plain `ValueError` a check raises before work starts (the documented
contract: "one ValueError naming the problem"); BadInputError is a ValueError so both are caught the
same way. Row-level bad input (RowError, InvalidImage) never reaches the caller: the row goes to
discarded.csv. CorruptDataError is deliberately *not* a ValueError: a damaged shard is not bad input.
Their old import locations still work (tfrecorder.row_encoder.RowError, tfrecorder.images.InvalidImage
and tfrecorder.tfrecord_format.CorruptRecordError with a DeprecationWarning; tfrecorder.result.DataflowJobError).

Beam re-raises a worker's exception carrying the original text, the names of the steps it ran in
and a long traceback (Ctrl-C inside a step becomes a RuntimeError too: `interruption` finds the
KeyboardInterrupt); a worker in another process (`direct_running_mode="multi_processing"`,
Dataflow) sends only that text, so errors are recognised by object, by class name and by the
`Name: message` line of a traceback alike. A whole-table problem the pipeline found (TableError) is
raised again with exactly the text the driver would have used, a storage outage as one
StorageReadError; out-of-space conditions deserve one clear sentence: what failed, where, and that
nothing was published.
"""
from __future__ import annotations

import errno
import re
from typing import Iterator, Optional

_SPACE_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EFBIG: "file size limit exceeded",
                 errno.EDQUOT: "disk quota exceeded"}


class TFRecorderError(Exception):
    """Base class of every exception tfrecorder raises on purpose."""


class BadInputError(TFRecorderError, ValueError):
    """The caller's input cannot be used (a ValueError, like every input check's error)."""


class TableError(BadInputError):
    """A table-level problem the pipeline found in the whole table (no rows, none assigned to TRAIN)."""


class RowError(BadInputError):
    """A row that cannot be converted; the message is the reason written to discarded.csv."""


class InvalidImage(BadInputError):
    """The bytes are not a usable image; the message is the discard reason."""


class InfrastructureError(TFRecorderError, OSError):
    """Storage or the output failed, not the data (an OSError: `errno` and `strerror` are set)."""


class OutputWriteError(InfrastructureError):
    """The conversion could not write its output (disk full, quota, file size limit)."""


class StorageReadError(InfrastructureError):
    """Storage failed while reading a row's file (still failing after retries: an outage, not bad data).

    Raised inside the pipeline to fail the bundle (Dataflow retries it); a local run stops with it.
    """


class TensorFlowUnavailable(InfrastructureError):
    """Neither TensorFlow's native libraries nor its Python package load here (a broken or missing
    installation), and the conversion must decode images; raised before its pipeline starts."""


class CorruptDataError(TFRecorderError):
    """Data that was written is damaged (a shard, an index file): not the caller's input."""


class CorruptRecordError(CorruptDataError):
    """A record whose framing or checksum is wrong; `offset` is where the record starts."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at byte offset {offset}")
        self.message = message
        self.offset = offset

    def __reduce__(self):  # picklable across processes despite the two-argument constructor
        return type(self), (self.message, self.offset)


class DataflowJobError(TFRecorderError, RuntimeError):
    """A Dataflow job ended in a state other than DONE."""


class JobBusyError(TFRecorderError, RuntimeError):
    """Another run is continuing the same incomplete job (its lock is held): this one stops, touching nothing."""


_BEAM_STEP = re.compile(r"( \[while running '[^']*'\])+$")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and its causes/contexts, each once."""
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def interruption(exc: BaseException) -> Optional[KeyboardInterrupt]:
    """The KeyboardInterrupt (Ctrl-C) behind a failure: Beam re-raises one that interrupted a DoFn as a
    RuntimeError whose context is the KeyboardInterrupt."""
    for current in _chain(exc):
        if isinstance(current, KeyboardInterrupt):
            return current
    return None


def _worker_error_text(exc: BaseException, cls: type) -> Optional[str]:
    """The message of the `cls` error behind a pipeline failure, without the step names Beam appends:
    an exception of that class (or of one with its name) in the chain, or a `[module.]Name: message`
    line in the text of one (a worker process's traceback, all another process sends back)."""
    line = re.compile(rf"\b{cls.__name__}: (.+?)(?: \[while running '[^']*'\])*$", re.MULTILINE)
    for current in _chain(exc):
        if isinstance(current, cls) or type(current).__name__ == cls.__name__:
            return _BEAM_STEP.sub("", str(current))
        match = line.search(str(current))
        if match:
            return match.group(1)
    return None


def _table_error(exc: BaseException) -> Optional[TableError]:
    """The TableError behind a pipeline failure, with the text the check raised."""
    text = _worker_error_text(exc, TableError)
    return None if text is None else TableError(text)


_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\] (.*)", re.DOTALL)  # how an OSError's str() shows errno and strerror


def _storage_read_error(exc: BaseException) -> Optional[StorageReadError]:
    """The StorageReadError behind a pipeline failure, its errno and text recovered from its message."""
    text = _worker_error_text(exc, StorageReadError)
    match = None if text is None else _ERRNO_TEXT.match(text)
    return None if match is None else StorageReadError(int(match.group(1)), match.group(2))


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
